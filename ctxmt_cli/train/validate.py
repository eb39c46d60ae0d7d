"""Validation: the loss metrics (:meth:`LossLayout.metrics`, family terms included) over the whole valid split.

Valid batches are formed once (no shuffling) and kept collated in memory — the
valid split is small and re-collating every validation would cost more than
the forward passes on a CPU. Each rank scores every ``world``-th batch (no tail
dropped: validation has no per-batch collective) and the sums are all-reduced,
so every rank sees the same metrics and takes the same early-stopping decision.
The metrics use the training label smoothing, as fairseq reports ``loss``.
"""

from __future__ import annotations

import torch
from torch import nn

from ctxmt_cli.core.batch import Batch, VocabInfo
from ctxmt_cli.data.batching import BatchBudget
from ctxmt_cli.data.windows import WindowDataset
from ctxmt_cli.models.inputs import Inputs
from ctxmt_cli.train.distributed import DistEnv, all_reduce_sum
from ctxmt_cli.train.step import LossSettings, batch_loss


class Validator:
    """Scores a fixed set of valid batches with a model."""

    def __init__(self, dataset: WindowDataset, budget: BatchBudget, env: DistEnv, loss: LossSettings, amp: str,
                 vocab: VocabInfo, inputs: Inputs):
        """Batches of ``dataset`` within the ``budget`` that plans the training batches (the recipe's)."""
        self.env, self.loss, self.amp = env, loss, amp
        groups = inputs.plan_batches(dataset, dataset.indices, budget=budget, shuffle=False)
        mine = groups[env.rank::env.world]
        self.batches: list[Batch] = [inputs.collate(dataset, g, vocab, chunked=True) for g in mine]
        self.size = int(len(dataset))

    @torch.no_grad()
    def run(self, model: nn.Module) -> dict[str, float]:
        """Mean losses (objective, window, current, each family term) and token counts over the split."""
        was_training = model.training
        model.eval()
        total = torch.zeros(len(self.loss.layout), device=self.env.device)  # (N,)
        for batch in self.batches:
            total += batch_loss(model, batch.to(self.env.device), self.loss, self.amp, self.env.device)[1]
        all_reduce_sum(total, self.env)
        model.train(was_training)
        return self.loss.layout.metrics(total.cpu())
