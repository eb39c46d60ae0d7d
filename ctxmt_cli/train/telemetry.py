"""Training-loss bookkeeping between log points, and the non-finite loss check.

Each update's (already all-reduced) loss sums stay on the device; ``flush``
reads them back in one transfer every ``log_every`` updates (and before every
validation), so the update loop never waits for the GPU in between. That is
also where non-finite losses are caught: with the fp16 grad scaler those
updates were skipped by the scaler and are only counted; without a scaler
training stops with a message naming the first bad step — before any
checkpoint could hold the damaged weights.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch
from torch import Tensor

from ctxmt_cli.errors import CtxmtError, option
from ctxmt_cli.train.losses import OBJECTIVE, LossLayout


class TrainLog:
    """Per-update loss sums awaiting the next log line."""

    def __init__(self, train_cfg, env, has_scaler: bool, layout: LossLayout):
        self.cfg, self.env, self.has_scaler, self.layout = train_cfg, env, has_scaler, layout
        self.steps: list[int] = []
        self.stats: list[Tensor] = []
        self.norms: list[Tensor] = []
        self.lr, self.epoch, self.skipped = 0.0, 0, 0
        self.t_last = time.monotonic()

    def add(self, step: int, stats: Tensor, grad_norm: Tensor | None, lr: float, epoch: int) -> None:
        """Remember one update's loss vector (N,) and gradient norm, without reading them."""
        self.steps.append(step)
        self.stats.append(stats)
        if grad_norm is not None:
            self.norms.append(grad_norm.detach().float().reshape(()))
        self.lr, self.epoch = lr, epoch

    def flush(self, step: int, reporter, save_dir: Path) -> None:
        """Check and report the pending updates as one ``train`` record."""
        if not self.steps:
            return
        stats = torch.stack(self.stats).cpu()                               # (U, N): the one host sync
        finite = torch.isfinite(stats).all(dim=1)                           # (U,)
        if not bool(finite.all()):
            self._non_finite(stats, finite, save_dir)
        kept = stats[finite]
        self.skipped += int((~finite).sum())
        now = time.monotonic()
        record = {"step": step, "kind": "train", "epoch": self.epoch}
        if len(kept):
            metrics = self.layout.metrics(kept.sum(0))
            record["loss"] = metrics.pop("discounted_loss")
            record.update(metrics, tokens_per_s=metrics["tokens"] / max(now - self.t_last, 1e-9))
        else:
            record.update(loss=float("nan"), tokens=0.0, tokens_per_s=0.0)
        record["lr"] = self.lr
        if self.norms:
            record["grad_norm"] = float(torch.stack(self.norms).cpu().mean())
        if self.has_scaler:
            record["skipped_updates"] = self.skipped
        reporter.train(record)
        self.steps, self.stats, self.norms, self.t_last = [], [], [], now

    def restart_clock(self) -> None:
        """Start the next record's clock now: the time since the last one went to validation and checkpoints (every
        update before them is already flushed), not to training, and is not in the next record's tokens/s."""
        self.t_last = time.monotonic()

    def _non_finite(self, stats: Tensor, finite: Tensor, save_dir: Path) -> None:
        """fp16: the scaler skipped these updates, keep going; otherwise stop with advice."""
        if self.has_scaler:
            return
        bad = int((~finite).nonzero()[0, 0])
        value = float(stats[bad, OBJECTIVE])
        raise CtxmtError(
            f"non-finite training loss ({value}) at step {self.steps[bad]}; lower train.lr (now {self.cfg.lr:g}) "
            f"or raise train.warmup_steps, or set train.amp: off (now {self.cfg.amp}); "
            f"the last good checkpoint, if any, is {Path(save_dir) / 'checkpoint_last.pt'} ({option('resume')})")
