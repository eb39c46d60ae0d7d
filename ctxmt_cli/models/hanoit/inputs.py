"""The ``hanoit`` family's inputs (Yang et al., HanoiT): the plain windows read its previous *and next* source
sentences (``[previous (oldest first), next (nearest first), current]``, ``Batch.src_next`` counting the next
ones); the bilingual model (§2.3) also reads a second source row beside each window, the *target concatenation*
(:mod:`ctxmt_cli.data.target_concat`), from a first pass of the document when it is translated. A model
over the target context alone (``context_side: target``, §3.5) reads the target concatenation *as* its source row.

Overrides :meth:`Inputs.windows`, :meth:`Inputs.collate`,
:meth:`Inputs.step_rows` and :meth:`Inputs.scoring_batch` (the bilingual model's target concatenations go into
``Batch.extras`` as :class:`~ctxmt_cli.models.hanoit.bilingual.TargetConcatRows`, a target-context model's into
``Batch.src``); ``target_concat`` is the recipe section's ``reads_target_context``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ctxmt_cli.core.batch import Batch, VocabInfo
from ctxmt_cli.data.target_concat import TargetConcat, target_concat_row, target_side
from ctxmt_cli.data.windows import WindowDataset
from ctxmt_cli.models.hanoit.bilingual import TargetConcatRows
from ctxmt_cli.models.inputs import Inputs


class TargetContextWindows(WindowDataset):
    """The windows of a target-context model (``context_side: target``): the batch budget counts the rows it reads,
    its target concatenations, in place of the source windows (:meth:`HanoiTInputs.collate` puts them there)."""

    def set_epoch(self, epoch: int) -> None:
        super().set_epoch(epoch)
        self.src_len = self.target_concat.lengths(np.asarray(self.split.src_lengths))


class HanoiTInputs(Inputs):
    """Previous and next source sentences; a target concatenation for the bilingual model, or in place of the
    source window for a model over the target context."""

    def __init__(self, cfg):
        super().__init__(cfg)
        self.target_concat = bool(cfg.reads_target_context)
        self.target_only = cfg.context_side == "target"

    def windows(self, data, split: str, recipe, vocab: VocabInfo, role: str) -> WindowDataset:
        """The windows of ``split``; the bilingual model's also carry each sentence's target concatenation, from
        the split's first-pass stream or its reference; the training rows go without it with probability
        ``alpha`` (eq. 13), the validation rows never; a target-context model's rows always have it."""
        if not self.target_concat:
            return super().windows(data, split, recipe, vocab, role)
        m = self.cfg
        concat = TargetConcat(target_side(data, split, m.target_context_from, m.first_pass_stream),
                              m.alpha if role == "train" and m.bilingual else 0.0, recipe.train.seed)
        kind = TargetContextWindows if self.target_only else WindowDataset
        return kind(data.split(split), self.window_spec(recipe, role), vocab.brk, vocab.eos, concat)

    def collate(self, dataset: WindowDataset, plan, vocab: VocabInfo, chunked: bool = False) -> Batch:
        """The windows of ``plan``; the bilingual model's rows also carry their target concatenations (from the
        dataset's, where it has them)."""
        batch = super().collate(dataset, plan, vocab, chunked)
        if getattr(dataset, "target_concat", None) is not None:
            self._give(batch, TargetConcatRows.of([dataset.tgt_concat(j) for j in batch.ids.tolist()], vocab.pad))
        return batch

    def _give(self, batch: Batch, rows: TargetConcatRows | None) -> None:
        """Hand ``batch`` its target concatenations: beside the source windows (bilingual, ``Batch.extras``) or
        as them (a target-context model: ``Batch.src`` and ``Batch.src_next``)."""
        if not self.target_only:
            batch.extras = rows
        elif rows is not None:
            batch.src, batch.src_next, batch.extras = rows.tokens, rows.next_sentences, None

    def step_rows(self, batch: Batch, sources: Sequence, j, plan, vocab: VocabInfo) -> None:
        """The bilingual model's target concatenations (``Batch.extras``) translating sentence ``j`` (one index,
        or one per row) of each document, from the first pass the documents carry (``doc.first_pass``)."""
        if not self.target_concat or not sources:
            return
        js = [j] * len(sources) if isinstance(j, int) else j
        rows = [target_concat_row(doc[i], doc.first_pass, i, plan.src_context_sentences, plan.src_next_sentences,
                                  plan.max_window_tokens, vocab) for doc, i in zip(sources, js, strict=True)]
        self._give(batch, TargetConcatRows.of(rows, vocab.pad))

    def scoring_batch(self, batch: Batch, vocab: VocabInfo, target_concat: Sequence | None = None) -> Batch:
        """A scoring batch of source windows; the bilingual model's rows also read ``target_concat`` (one row
        per source row, its context's target side, no next sentences), when the test set gives one; a
        target-context model reads only those (an empty one, a sentence without context: its source window, the
        sentence alone)."""
        if self.target_only and target_concat is not None:
            target_concat = [row if len(row) else own[own != vocab.pad].numpy()
                             for row, own in zip(target_concat, batch.src, strict=True)]
        if self.target_concat and target_concat is not None:
            self._give(batch, TargetConcatRows.of([(row, 0) for row in target_concat], vocab.pad))
        return batch

