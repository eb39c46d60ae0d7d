"""``Linear``: ``nn.Linear`` whose large CPU inference products run oneDNN's float32 matmul, not MKL's sgemm.

PyTorch sends a float32 ``F.linear`` on CPU to MKL's sgemm. oneDNN (built into every x86-64 PyTorch wheel)
multiplies the same float32 numbers, faster on some of the shapes a Transformer has: measured here (2 idle threads,
AMD EPYC with AVX-512, torch 2.13) 0.65-0.90x MKL's time at 32 x 512 x 1,536 and 8 x 512 x 8,000, level at 128
rows. Same arithmetic and precision (no bf16, no TF32), different summation order: results agree to float32
rounding.

Only products of at least :data:`ONEDNN_MIN_MACS` multiply-adds take it. Each oneDNN call costs a fixed ~20 us
and always opens a parallel region, so on small products MKL wins (4 against 26 us at 1 x 32 x 32, 136 against
216 us at 8 x 512 x 1,536), and on a busy machine (another job on the same cores) a tiny oneDNN call took 6.8 ms
against MKL's 4 us: every parallel region waits for a descheduled thread.

Used only where nothing needs it to be a plain ``F.linear``: no autograd (training keeps the autograd-aware
path), float32, CPU, no autocast, not inside ``torch.compile`` (``--compile``: its compiler picks the kernel), and
a PyTorch with the op (``torch.ops.mkldnn._linear_pointwise``, the kernel PyTorch's own compiler emits for CPU
linears). Anything else takes ``F.linear``. Parameters, state dicts and initialisation are those of
``nn.Linear``.
"""

from __future__ import annotations

import platform

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def _onednn_linear():
    """The oneDNN linear op where this PyTorch has it and the CPU is x86-64 (where it was measured), else None."""
    if platform.machine().lower() not in ("x86_64", "amd64") or not torch.backends.mkldnn.is_available():
        return None
    try:
        return torch.ops.mkldnn._linear_pointwise
    except (AttributeError, RuntimeError):
        return None


def _cpu_autocast_probe():
    """A no-argument check for CPU autocast that works on every supported PyTorch (the signature changed in 2.4)."""
    try:
        torch.is_autocast_enabled("cpu")
        return lambda: torch.is_autocast_enabled("cpu")
    except TypeError:
        return torch.is_autocast_cpu_enabled


ONEDNN_LINEAR = _onednn_linear()
#: the smallest product (rows x in x out multiply-adds) sent to oneDNN (module docstring)
ONEDNN_MIN_MACS = 1 << 24
_cpu_autocast = _cpu_autocast_probe()


def _compiling() -> bool:
    """Whether ``torch.compile`` is tracing the caller (its compiler chooses the kernels of a plain ``F.linear``)."""
    compiler = getattr(torch, "compiler", None)
    return compiler is not None and hasattr(compiler, "is_compiling") and compiler.is_compiling()


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``F.linear(x, weight, bias)``; large float32 CPU inference products go through oneDNN (module docstring)."""
    if (ONEDNN_LINEAR is not None and x.numel() * weight.shape[0] >= ONEDNN_MIN_MACS and not torch.is_grad_enabled()
            and x.device.type == "cpu" and x.dtype == torch.float32 and weight.dtype == torch.float32
            and not _cpu_autocast() and not _compiling()):
        return ONEDNN_LINEAR(x, weight, bias, "none", [], "")
    return F.linear(x, weight, bias)


class Linear(nn.Linear):
    """``nn.Linear`` computed by :func:`linear`. ``blocks`` > 1: a fused projection, ``blocks`` maps of
    ``out_features / blocks`` outputs each stacked along the output axis (queries, keys, values), each
    initialised as its own layer would be (:func:`xavier_`)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, blocks: int = 1, **kwargs):
        super().__init__(in_features, out_features, bias, **kwargs)
        self.blocks = blocks

    def forward(self, x: Tensor) -> Tensor:
        return linear(x, self.weight, self.bias)


@torch.no_grad()
def xavier_(layer: nn.Linear) -> None:
    """Xavier-uniform weights, block by block for a fused :class:`Linear` (the same distribution, and the same
    random draws in the same order, as separate layers would get)."""
    for block in layer.weight.chunk(getattr(layer, "blocks", 1)):          # (out / blocks, in) views
        nn.init.xavier_uniform_(block)


def linear_weights(layer: nn.Module) -> tuple[Tensor, Tensor | None]:
    """The (out, in) weight and the bias of a linear layer as float tensors, whether it is quantized or not (a
    quantized layer's int8 weight is dequantized: for code that reads the matrix itself, as scoring does)."""
    weight = layer.weight
    if callable(weight):                                                     # a quantized layer: weight() / bias()
        return weight().dequantize(), layer.bias()
    return weight, layer.bias
