"""Bilingual windows: one source row holding the target side of its context sentences too,
``[target context; source context; current] </s>``, each context sentence followed by ``<brk>`` (the target
side's previous sentences oldest first, then its next ones nearest first, as the source side's).

Families whose model reads its source window as a sequence of sentences (``concat``'s sKto1 windows, ``caching``'s
cached sentences) read target context this way (``bilingual: true``; Yang et al.'s bilingual ECT and Dual Encoder
baselines). The target context comes from a first-pass stream of the split (or the reference) in training and
validation, from the document's first pass when translating, from the test item's context when scoring; it fits
in what the source window leaves of ``max_window_tokens``, the farthest sentence dropped first, so a long source
window keeps all of its own context and less of the other side's. A family's inputs inherit
:class:`BilingualWindowInputs`, which overrides :meth:`Inputs.windows`,
:meth:`Inputs.step_rows` and :meth:`Inputs.scoring_batch` for a bilingual model and leaves the others' as they are.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ctxmt_cli.core.batch import Batch, VocabInfo
from ctxmt_cli.data.batching import pad_rows
from ctxmt_cli.data.target_concat import TargetConcat, target_concat_row, target_side
from ctxmt_cli.data.windows import WindowDataset
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.models.inputs import Inputs


def check_joint(cfg, joint: bool) -> None:
    """Refuse a model reading target context (recipe section ``cfg``) over separate source and target vocabularies
    (``joint`` False): its target-language context sentences go through the source embeddings."""
    if cfg.reads_target_context and not joint:
        raise CtxmtError(f"this {cfg.family} model's source row holds target-language context sentences "
                         "(bilingual: true), which needs one vocabulary for both sides; prepare the data with one "
                         "(`ctxmt prepare ... --joint`, the default), or set bilingual: false")


class BilingualWindows(WindowDataset):
    """Source windows that also hold their context's target side, ``[target context; source window]``: the
    target concatenation (:class:`~ctxmt_cli.data.target_concat.TargetConcat`) of each source window without its
    ``</s>``, fitted to the room the window leaves (its rows are what the batch budget counts)."""

    def set_epoch(self, epoch: int) -> None:
        first = self.epoch < 0
        super().set_epoch(epoch)
        if first:                                            # previous-sentence windows: the same every epoch
            window = self.src_len - 1                        # (N,) each source window without its </s>
            self.target_concat.fit(window, self._doc_start, self._doc_end, self.spec)
            self.src_len = self.target_concat.lengths(window)

    def source(self, j: int) -> np.ndarray:
        """Sentence ``j``'s one source row: its target context, then its source window."""
        return self.target_concat.row(j, super().source(j)[:-1], self.brk, self.eos)


class BilingualWindowInputs(Inputs):
    """The plain windows, or for a recipe section with ``bilingual: true`` windows with the target side of their
    context first."""

    def __init__(self, cfg):
        super().__init__(cfg)
        self.target_concat = bool(cfg.reads_target_context)

    def windows(self, data, split: str, recipe, vocab: VocabInfo, role: str) -> WindowDataset:
        """The windows of ``split``; a bilingual model's hold the target side of their context, from the split's
        first-pass stream or its reference."""
        if not self.target_concat:
            return super().windows(data, split, recipe, vocab, role)
        side = target_side(data, split, self.cfg.target_context_from, self.cfg.first_pass_stream)
        return BilingualWindows(data.split(split), self.window_spec(recipe, role), vocab.brk, vocab.eos,
                                TargetConcat(side))

    def step_rows(self, batch: Batch, sources: Sequence, j, plan, vocab: VocabInfo) -> None:
        """A bilingual model's rows translating sentence ``j`` (one index, or one per row) of each document: the
        first pass (``doc.first_pass``) of the window's context sentences before each source window, within the
        window limit."""
        if not self.target_concat or not sources:
            return
        rows, js = [], [j] * len(sources) if isinstance(j, int) else j
        for doc, window, i in zip(sources, batch.src, js, strict=True):                   # window (S,), right-padded
            own = window[window != vocab.pad].tolist()[:-1]                  # the source window without </s>
            rows.append(target_concat_row(own, doc.first_pass, i, plan.src_context_sentences,
                                          plan.src_next_sentences or 0, plan.max_window_tokens, vocab)[0])
        batch.src = pad_rows([np.asarray(r, dtype=np.int64) for r in rows], vocab.pad)        # (B, S')

    def scoring_batch(self, batch: Batch, vocab: VocabInfo, target_concat: Sequence | None = None) -> Batch:
        """A bilingual model's scoring rows: each source window after its row of ``target_concat`` (the item's
        target context, each sentence + ``<brk>``, then the current source sentence and ``</s>``, which the
        window holds already); a row without target context, the window alone."""
        if not self.target_concat or target_concat is None:
            return batch
        rows = []
        for window, concat in zip(batch.src, target_concat, strict=True):
            concat = np.asarray(concat, dtype=np.int64)
            breaks = np.nonzero(concat == vocab.brk)[0]
            context = concat[:breaks[-1] + 1] if len(breaks) else concat[:0]          # target sentences + <brk>
            rows.append(np.concatenate([context, window[window != vocab.pad].numpy()]))
        batch.src = pad_rows(rows, vocab.pad)                                            # (B_src, S')
        return batch
