"""``ctxmt benchmark train --count-ops``: aten ops dispatched by one training update (part of ``train``).

A GPU update of small kernels is bound by the host launching them, one per dispatched aten op; this counts
them, on any device, below autograd (:class:`ctxmt_cli.train.op_count.OpCounter`): forward, loss, backward and
the optimiser step of one update, after one uncounted update (Adam creates its state in the first). ctxmt runs
its trainer's update (:class:`~ctxmt_cli.train.step.Updater`, its loss sized in blocks as on a GPU); the
plain-torch peer (``nn.Transformer``, ``benchmarks/peers.py``) runs forward, the label-smoothed cross-entropy,
backward and Adam, under ``torch.autocast`` for bf16. Both take Adam as ctxmt's trainer and the peers run it
on a GPU: ``fused=True`` (one kernel for all parameters; PyTorch >= 2.4 has it on the CPU too, so the count
made on a CPU is the GPU's). bf16 is CPU autocast here, whose op lists are close to, not identical with, CUDA's.
Counts do not depend on the batch size, so a small batch is used (:data:`ROWS` x :data:`LENGTH`).

Prints ``ops: train-PRESET-PRECISION ctxmt N plain M`` per preset (small, base, big; or ``--preset`` alone when
given another) and precision (fp32, bf16).
"""

from __future__ import annotations

from contextlib import nullcontext

import bench_util as bu  # a sibling: train.py puts this folder on the path
import torch
from peers import ADAM, TorchPeer

from ctxmt_cli.core.batch import VocabInfo
from ctxmt_cli.train.distributed import DistEnv
from ctxmt_cli.train.op_count import count_ops
from ctxmt_cli.train.projected_loss import blocks_as_on
from ctxmt_cli.train.step import LossSettings, Updater

ROWS, LENGTH = 8, 25
PRECISIONS = {"fp32": "off", "bf16": "bf16"}


def presets(settings) -> list[str]:
    """small, base and big by default; an explicit other preset alone."""
    return ["small", "base", "big"] if settings.preset == "small" else [settings.preset]


def counted(step) -> int:
    """aten ops of the second call of ``step`` (the first creates optimiser state and lazy caches)."""
    step()
    return count_ops(step).total


def ctxmt_ops(dims: bu.Dims, amp: str, batch, seed: int) -> int:
    """Ops of one update of ctxmt's trainer (fused Adam, loss blocks as on a GPU)."""
    recipe, model = bu.ctxmt_recipe(dims), bu.ctxmt_model(dims, seed)
    optimizer = torch.optim.Adam(model.parameters(), **ADAM, fused=True)
    updater = Updater(model, optimizer, None, DistEnv(device=torch.device("cpu")),
                      LossSettings.from_recipe(recipe, VocabInfo(dims.vocab, dims.vocab), model), amp,
                      recipe.train.clip_norm)
    with blocks_as_on("cuda"):
        return counted(lambda: updater.update([batch]))


def plain_ops(dims: bu.Dims, amp: str, batch, seed: int) -> int:
    """Ops of one training step of ``nn.Transformer`` (fused Adam; bf16: under autocast)."""
    peer = TorchPeer(dims, seed)
    peer.optimizer = torch.optim.Adam(peer.parameters(), **ADAM, fused=True)

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16) if amp == "bf16" else nullcontext():
            peer.train_step(batch)

    return counted(step)


def run_count(settings) -> dict[str, tuple[int, int]]:
    """Count every preset and precision on the CPU, print the ``ops:`` lines; figure -> (ctxmt, plain)."""
    out = {}
    print(f"ops per training update (forward, loss, backward, fused Adam), counted on the CPU with a batch of "
          f"{ROWS} x {LENGTH} tokens (counts do not depend on it)")
    with bu.torch_threads(1):                        # counts do not depend on threads; a shared CPU is spared
        for preset in presets(settings):
            dims = bu.Dims.of(preset)
            batch = bu.random_pairs(ROWS, LENGTH, dims.vocab, settings.seed)
            for precision, amp in PRECISIONS.items():
                figure = f"train-{preset}-{precision}"
                out[figure] = (ctxmt_ops(dims, amp, batch, settings.seed), plain_ops(dims, amp, batch, settings.seed))
                print(f"ops: {figure} ctxmt {out[figure][0]} plain {out[figure][1]}", flush=True)
    return out
