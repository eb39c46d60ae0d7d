"""int8 inference on the CPU: every linear layer of a loaded model with int8 weights, through PyTorch's dynamic
quantization (``torch.ao.quantization.quantize_dynamic``).

Dynamic quantization stores each linear layer's weights as int8 (one scale per output row) and, at every call,
quantizes the layer's input to 8 bits with a scale taken from that input, multiplies in int8 with int32
accumulation (FBGEMM / oneDNN on x86-64, QNNPACK on ARM) and returns float32. Embeddings, layer norms, attention
softmax and the search stay float32. It is the library's own path, with no hand-written kernel. It is a CPU path:
the quantized layers have no CUDA kernels.

Two consequences users see:

* results move by the quantization error. On the contract suite's tiny models, log-probabilities stay within
  :data:`INT8_TOLERANCE` of the float32 model's, and the decode properties (incremental = full forward, padding and
  batch composition, beam 1 = greedy) hold within that tolerance (tests/unit/test_quantize.py). The BLEU change on
  a real test set is on the translate page.
* the scale of a layer's input is taken over the whole batch, so a sentence's scores depend slightly on the other
  rows of its batch (within the same tolerance), where float32 gives the same numbers in any batch.

PyTorch marks ``torch.ao.quantization`` as deprecated in favour of the separate ``torchao`` package, but keeps
it (PyTorch 2.13); :func:`quantize` turns its absence into one line naming the fix.
"""

from __future__ import annotations

import warnings

import torch
from torch import nn

#: what ``--quantize`` accepts
QUANTIZE = ("int8",)
#: the largest change of a log-probability the int8 tests allow on the contract suite's tiny models (d 32; the
#: largest measured was 0.18)
INT8_TOLERANCE = 0.25


class QuantizeUnavailable(RuntimeError):
    """This PyTorch build has no dynamic int8 quantization for the CPU."""


def quantize(model: nn.Module, *, scheme: str = "int8") -> nn.Module:
    """``model`` (eval mode, on the CPU) with every linear layer replaced by its dynamically quantized int8 version,
    in place; returns it. Raises :class:`QuantizeUnavailable` where this PyTorch lacks the path."""
    if scheme not in QUANTIZE:
        raise ValueError(f"quantize scheme {scheme!r}: choose one of {', '.join(QUANTIZE)}")
    try:
        from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic
    except ImportError as error:                                             # removed from a later PyTorch
        raise QuantizeUnavailable(f"this PyTorch ({torch.__version__}) has no torch.ao.quantization: {error}") from None
    if torch.backends.quantized.engine == "none":
        raise QuantizeUnavailable(f"this PyTorch ({torch.__version__}) was built without a quantized CPU engine")
    for layer in model.modules():
        if isinstance(layer, nn.Linear):
            # ctxmt's Linear (core.linear) changes only how float32 is computed; the library converts exact
            # nn.Linear instances alone, and the layer is replaced next anyway
            layer.__class__ = nn.Linear
    with warnings.catch_warnings():                                          # the deprecation notes, once per layer
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", UserWarning)
        quantize_dynamic(model.eval(), {nn.Linear: per_channel_dynamic_qconfig}, dtype=torch.qint8, inplace=True)
    return model
