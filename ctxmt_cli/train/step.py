"""One optimiser update: accumulation, mixed precision, DDP gradient normalisation, clipping.

Gradients are taken of the objective's *sum* (:mod:`ctxmt_cli.train.losses`) of every
micro-batch; after the ``update_freq`` micro-batches the per-rank normalisers
(window tokens, or Σw with a normalising term) are summed across ranks in the step's single all-reduce
and the gradients are multiplied by ``world / normalizer``. DDP averages the
gradients over ranks (÷ world), so the update is exactly that of one process
on the global batch: Σ_ranks Σ_micro ∇(objective sum) / Σ normalizer. The same
reduction carries the other loss sums, so logging needs no extra collective.
Nothing here reads a value back to the host (no ``.item()``): the update runs
ahead asynchronously on a GPU; non-finite losses are checked when the trainer
flushes its logs (with fp16 the grad scaler skips such updates itself). Tested by
counting what one update dispatches (``tests/unit/test_step.py``; on CUDA with its
sync detector). ``train.compile`` compiles :meth:`Updater._loss`, model and fused loss together.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ctxmt_cli.core.batch import Batch
from ctxmt_cli.train.distributed import DistEnv, all_reduce_sum, maybe_no_sync, unwrap
from ctxmt_cli.train.losses import NORMALIZER, LossLayout
from ctxmt_cli.train.projected_loss import projected_token_losses


@dataclass(frozen=True)
class LossSettings:
    """What the objective needs besides the model's output: special ids, smoothing, the vector layout."""

    pad: int
    brk: int
    label_smoothing: float
    layout: LossLayout

    @classmethod
    def from_recipe(cls, recipe, vocab, model: nn.Module) -> LossSettings:
        """Settings of ``recipe`` for ``model`` (whose ``loss_term_names`` fix the loss vector's layout)."""
        terms = core_model(model).loss_term_names
        return cls(vocab.pad, vocab.brk, recipe.train.label_smoothing, LossLayout(terms))


def autocast_for(amp: str, device: torch.device):
    """Autocast context of ``amp`` (bf16 on CPU and CUDA; fp16 where the device supports it)."""
    if amp == "off":
        return nullcontext()
    dtype = torch.bfloat16 if amp == "bf16" else torch.float16
    return torch.autocast(device_type=device.type, dtype=dtype)


def make_scaler(amp: str, device: torch.device) -> torch.amp.GradScaler | None:
    """A grad scaler for fp16 (bf16 has float32's range and needs none)."""
    return torch.amp.GradScaler(device.type) if amp == "fp16" else None


def make_optimizer(model: nn.Module, train_cfg) -> torch.optim.Optimizer:
    """Adam with the recipe's betas/eps; AdamW (decoupled decay) when weight_decay > 0; PyTorch's fused
    implementation when the model is on a GPU (the same update, up to rounding)."""
    params = [p for p in model.parameters() if p.requires_grad]
    kwargs = dict(lr=train_cfg.lr, betas=tuple(train_cfg.betas), eps=train_cfg.adam_eps)
    if params and all(p.device.type == "cuda" for p in params):
        kwargs["fused"] = True     # one kernel per step for all parameters: on a GPU the per-tensor launches dominate
    if train_cfg.weight_decay > 0:
        return torch.optim.AdamW(params, weight_decay=train_cfg.weight_decay, **kwargs)
    return torch.optim.Adam(params, **kwargs)


def core_model(model: nn.Module) -> nn.Module:
    """The family's model inside ``torch.compile`` and DDP wrappers."""
    return unwrap(getattr(model, "_orig_mod", model))


def batch_loss(model: nn.Module, batch: Batch, loss: LossSettings, amp: str,
               device: torch.device) -> tuple[Tensor, Tensor]:
    """Forward one batch under autocast: (objective sum () with gradient, loss vector (N,) float32).

    The output projection is fused with the loss (:mod:`ctxmt_cli.train.projected_loss`): the same
    numbers as label-smoothed cross-entropy on the logits, without vocabulary-sized intermediates.
    The family's loss terms come from its ``loss_terms`` hook (see :mod:`ctxmt_cli.train.losses`).
    A chunked batch (``Batch.chunks``) projects only the positions its chunks computed (packed), and its
    per-token losses are laid back out as (B, T) for the loss vector and the hook.
    """
    inner = core_model(model)
    chunked = batch.chunks is not None
    with autocast_for(amp, device):
        output = model(batch, project=False)
        target = batch.pack(batch.tgt_out) if chunked else batch.tgt_out    # (N,) or (B, T)
        token = projected_token_losses(output.hidden, inner.output.weight, target, loss.pad, loss.label_smoothing,
                                       bias=inner.output.bias)
        if chunked:
            token = batch.unpack(token, batch.tgt_out.size(1))              # (B, T), 0 at padding
        terms = inner.loss_terms(batch, token, output)
    return loss.layout.sums(token, batch.tgt_out, loss.pad, loss.brk, terms)


class Updater:
    """Runs one update over a group of micro-batches (already on the device)."""

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer, scaler, env: DistEnv,
                 loss: LossSettings, amp: str, clip_norm: float, compile: bool = False):
        self.model, self.optimizer, self.scaler, self.env = model, optimizer, scaler, env
        self.loss, self.amp, self.clip_norm = loss, amp, clip_norm
        self.params = [p for g in optimizer.param_groups for p in g["params"]]
        self.forward = self._loss
        if compile:
            # the whole training forward, model and fused loss, is one compiled region; dynamic shapes: every
            # batch has other lengths, and one graph serves them all (no recompiling per shape)
            self.forward = torch.compile(self._loss, dynamic=True)

    def _loss(self, batch: Batch) -> tuple[Tensor, Tensor]:
        """(objective sum (), loss vector (N,)) of one micro-batch: the forward that ``train.compile`` compiles."""
        return batch_loss(self.model, batch, self.loss, self.amp, self.env.device)

    def update(self, batches: list[Batch]) -> tuple[Tensor, Tensor | None]:
        """Accumulate ``batches``, normalise, clip and step; returns (global loss vector (N,), grad norm)."""
        self.model.train()
        total = None                                                        # (N,) float32
        for i, batch in enumerate(batches):
            # gradients are all-reduced only with the last micro-batch's backward
            with maybe_no_sync(self.model, skip_sync=i < len(batches) - 1):
                objective, sums = self.forward(batch)
                (objective if self.scaler is None else self.scaler.scale(objective)).backward()
            total = sums if total is None else total + sums
        if total is None:                                                   # no micro-batch: nothing to add
            total = torch.zeros(len(self.loss.layout), device=self.env.device)
        all_reduce_sum(total, self.env)                                     # the step's one collective
        if self.scaler is not None:
            self.scaler.unscale_(self.optimizer)                            # records inf/nan for step()
        self._normalise(total[NORMALIZER])
        grad_norm = None
        if self.clip_norm > 0:
            grad_norm = torch.nn.utils.clip_grad_norm_(self.params, self.clip_norm, foreach=True)
        if self.scaler is not None:
            self.scaler.step(self.optimizer)                                # skipped on inf/nan gradients
            self.scaler.update()
        else:
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return total, grad_norm

    def _normalise(self, normalizer: Tensor) -> None:
        """grad ← grad · world / Σ normalizer, as a device tensor (no host sync)."""
        grads = [p.grad for p in self.params if p.grad is not None]
        if not grads:
            return
        scale = (self.env.world / normalizer.clamp(min=1e-8)).to(grads[0].dtype)  # () tensor
        torch._foreach_mul_(grads, scale)                                   # one fused kernel, not one per tensor
