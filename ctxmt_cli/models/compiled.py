"""``--compile``: a loaded model's decoder layers compiled with ``torch.compile`` (TorchInductor) for translation.

A decoding step runs each decoder layer on one new position per row: about 60 small operations per layer, each a
Python call and a dispatch, with the products themselves small at a few dozen rows. TorchInductor traces a layer
once and runs it as one generated function (its pointwise work, softmax and layer norms fused into C++ loops, the
products left to the BLAS), so the per-operation cost goes. Measured on the decode benchmark's ``small`` model
(32 sentences, 25 steps, 2 idle CPU threads, torch 2.13; docs/benchmarks.md): greedy 208 -> 181 ms, beam 4 518 ->
478 ms, the same tokens; a random model of d 16 (nothing but overhead) 47 -> 42 ms.

What is compiled, and why only that:

* each decoder layer's ``forward``, with dynamic shapes (the key/value cache grows every step, batches shrink as
  sentences finish), so one compilation serves every step and batch; a family whose layers take other inputs
  (context attention, a shared target prefix) gets one more compiled variant per kind of input;
* not the whole step: the bookkeeping around the layers (which stored rows each row reads) depends on the
  tensors' values and splits the graph, and compiling the whole ``decode_step`` measured slower than eager
  (greedy 215 against 204 ms, beam 4 569 against 495 ms) for a compile four times as long;
* no ``freezing`` (weights folded as constants): it recompiled per batch size and ran slower (beam 4 615 ms).

Costs: the first translation of a process compiles (tens of seconds on 2 CPU cores; TorchInductor caches its
kernels on disk, so a later process compiles faster), and it needs a C++ compiler on the CPU (Triton on a GPU).
Results agree with the eager model to float32 rounding (fused loops sum in another order), so a near tie
between two hypotheses can go the other way. Where compiling fails (no compiler, an operation the tracer does
not support), the layer falls back to eager for the rest of the process, with one warning line.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from ctxmt_cli.core.batch import Fold

#: the warning line printed once when compiling is asked for (a translation's first call waits for it)
COMPILING = "compiling the decoder layers with torch.compile: the first sentences wait for it (tens of seconds)"


class CompiledForward:
    """A layer's ``forward`` run through ``torch.compile``; after a failure, the eager ``forward`` for good.

    ``failed`` is shared by every layer of a model, so one failure switches them all back, with one warning."""

    def __init__(self, forward: Callable, warn: Callable[[str], None], failed: list[str]):
        self.eager, self.warn, self.failed = forward, warn, failed
        self.compiled = torch.compile(forward, dynamic=True)

    def __call__(self, *args, **kwargs):
        if self.failed:
            return self.eager(*args, **kwargs)
        try:
            return self.compiled(*every_key(args), **{name: every_key(v) for name, v in kwargs.items()})
        except Exception as error:      # noqa: BLE001 - any failure of the compiler: run eager (an error of the
            # layer itself is raised again by the eager call below)
            self.failed.append(type(error).__name__)
            self.warn(f"torch.compile failed ({type(error).__name__}: {str(error).strip().splitlines()[0][:200]}); "
                      "the decoder runs without it")
            return self.eager(*args, **kwargs)


def every_key(value):
    """``value`` with every :class:`~ctxmt_cli.core.batch.Fold` in it (nested in tuples) made to read all its keys:
    a compiled layer would otherwise be traced again for every set of block widths a search starts with
    (``Fold.widths`` are Python ints, which the tracer specialises on), so it reads the padded keys, masked, as
    before blocks existed."""
    if isinstance(value, Fold):
        return value._replace(widths=None)
    if type(value) is tuple:                                            # a NamedTuple keeps its type
        return tuple(every_key(v) for v in value)
    return value


def compile_decoder(model: nn.Module, *, warn: Callable[[str], None]) -> int:
    """Compile every decoder layer of ``model`` (in place; see the module docstring); returns how many.

    ``warn`` takes the one line printed if compiling fails; a model without ``decoder_layers`` is left as it is."""
    layers = getattr(model, "decoder_layers", None) or []
    failed: list[str] = []
    for layer in layers:
        layer.forward = CompiledForward(layer.forward, warn, failed)
    return len(layers)
