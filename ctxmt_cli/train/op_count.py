"""Counting what one training update dispatches: aten ops, the dtypes of its matrix multiplies, its host syncs.

A GPU update whose kernels are small is bound by the host launching them, one per dispatched aten op, so
the number of ops per update is the figure to drive down (``ctxmt benchmark train --count-ops``). It is
counted below autograd with a ``TorchDispatchMode``, so forward, backward and the optimiser step all show,
on the CPU as on a GPU (the op sequence is the device's, up to autocast's per-device op lists).

Host syncs: on a GPU, ``aten::_local_scalar_dense`` (what ``.item()``, ``bool(t)``, ``float(t)``, ``int(t)``
dispatch) waits for the device, and so do ops whose output size depends on values (:data:`SYNC_OPS`, and
indexing by a boolean mask, :data:`MASK_INDEX_OPS`).
"""

from __future__ import annotations

from collections import Counter

import torch
from torch.utils._python_dispatch import TorchDispatchMode

#: ops that read a device value back to the host (a GPU waits for every queued kernel first)
SYNC_OPS = ("aten::_local_scalar_dense", "aten::nonzero", "aten::masked_select", "aten::_unique2",
            "aten::unique_consecutive", "aten::unique_dim", "aten::repeat_interleave")
#: indexing ops that sync when an index is a boolean mask (CUDA turns it into ``nonzero`` first); counted as
#: ``sync:NAME[bool]`` besides the op itself
MASK_INDEX_OPS = ("aten::index", "aten::index_put", "aten::index_put_", "aten::_index_put_impl_")
#: matrix multiplies whose input dtypes are recorded (mixed precision is about these)
MATMUL_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear")


class OpCounter(TorchDispatchMode):
    """Counts every aten op dispatched inside ``with OpCounter() as ops:`` (``ops.counts``: name -> calls,
    ``ops.total``), and the input dtypes of each matrix multiply (``ops.matmuls``: (name, dtypes) in order)."""

    def __init__(self):
        super().__init__()
        self.counts: Counter = Counter()
        self.matmuls: list[tuple[str, tuple[torch.dtype, ...]]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func._schema.name
        self.counts[name] += 1
        if name in MASK_INDEX_OPS and _boolean_index(args):
            self.counts[f"sync:{name}[bool]"] += 1
        if name in MATMUL_OPS:
            self.matmuls.append((name, tuple(a.dtype for a in args if isinstance(a, torch.Tensor))))
        return func(*args, **(kwargs or {}))

    @property
    def total(self) -> int:
        """aten ops dispatched so far (``profiler::`` record-function markers and the like are not kernels)."""
        return sum(n for name, n in self.counts.items() if name.startswith("aten::"))

    def syncs(self) -> dict[str, int]:
        """The host-synchronising ops seen (:data:`SYNC_OPS`), by name; empty when there were none."""
        return {name: n for name, n in self.counts.items() if n and (name in SYNC_OPS or name.startswith("sync:"))}


def _boolean_index(args) -> bool:
    """Whether an ``aten::index``-style call's indices (its second argument) hold a boolean mask."""
    indices = args[1] if len(args) > 1 and isinstance(args[1], (list, tuple)) else ()
    return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in indices)


def count_ops(fn) -> OpCounter:
    """Run ``fn()`` under a fresh :class:`OpCounter` and return it."""
    with OpCounter() as counter:
        fn()
    return counter

