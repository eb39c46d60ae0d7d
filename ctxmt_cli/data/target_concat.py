"""The bilingual HanoiT's second source row: the *target concatenation* (Yang et al., §2.3).

For sentence j the row is the target side of its context sentences, then the current *source* sentence and
``</s>``: ``[previous (oldest first), next (nearest first)] current_source </s>``, each context sentence
followed by ``<brk>`` (the layout of :mod:`ctxmt_cli.data.windows`). The context sentences are the same ones
the source window reads (previous and next, never across a document boundary); their target side comes from a
first-pass stream of the split (``target_context_from: first_pass``, sentence-level translations written by
``ctxmt first-pass``, the paper's setting) or from the split's own target side (``reference``, for ablations).
The row obeys ``max_window_tokens`` by the source window's rule (the farthest context sentence dropped first,
the next one before the previous one at equal distance), over its own lengths, so it may hold fewer context
sentences than the source window: it has its own next count (``TargetConcatRows.next_sentences``).

Eq. 13, L = α·L_m + (1 − α)·L_b, is trained in one pass: each training row goes without its target
concatenation (an empty row of ``TargetConcatRows``) with probability α, and is then read exactly as by the
monolingual model; in expectation over the draw that is the α-weighted sum of the two objectives, for the
cost of one pass instead of two. The draw is a function of (training seed, epoch, sentence) alone, so a resumed
run, another batch size or another number of processes drop the same rows. Validation, translation and scoring
always give every row its target concatenation (L_b, the model as it translates).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ctxmt_cli.core.batch import VocabInfo
from ctxmt_cli.data.windows import fit_window, two_sided_sizes
from ctxmt_cli.errors import CtxmtError

#: keeps the monolingual-row draw apart from the batch shuffling's and the random context's streams
MONOLINGUAL_STREAM = 104729


class ReferenceSide:
    """The split's own target side as the target context (``target_context_from: reference``)."""

    def __init__(self, split):
        self.split = split
        self.lengths = np.asarray(split.tgt_lengths)

    def sentence(self, i: int) -> np.ndarray:
        """Target ids of sentence ``i``."""
        return self.split.tgt(i)


def target_side(prepared, split: str, target_context_from: str, stream: str | None):
    """What the target concatenation reads for ``split`` of ``prepared``: a first-pass stream or the reference.

    A missing stream, or one in the source language, is one error line naming the command that writes it."""
    if target_context_from == "reference":
        return ReferenceSide(prepared.split(split))
    if stream not in prepared.streams(split):
        raise CtxmtError(f"the bilingual model reads the first-pass stream {stream!r} of split {split!r}, but "
                         f"{prepared.dir} has none; write it with "
                         f"`ctxmt first-pass -c SENTENCE_CKPT --data {prepared.dir} --split {split} --name {stream}` "
                         "(a sentence-level checkpoint), or set model.target_context_from: reference")
    found = prepared.stream(split, stream)
    if found.side != "tgt":
        raise CtxmtError(f"first-pass stream {stream!r} of split {split!r} is in the source language (a "
                         "back-translation); the target context needs a translation of the source side "
                         f"(`ctxmt first-pass --from src --name {stream} --force`)")
    return found


class TargetConcat:
    """The target concatenation of every sentence of a split, and each epoch's monolingual rows.

    ``side``: the target context (:func:`target_side`); ``alpha``: the share of rows given without it in
    training (eq. 13; 0 for validation); ``seed``: the training seed the draw comes from.
    """

    def __init__(self, side, alpha: float = 0.0, seed: int = 1):
        self.side, self.alpha, self.seed = side, alpha, seed
        self.ctx = self.next = self.off = None

    def fit(self, src_lengths: np.ndarray, doc_start: np.ndarray, doc_end: np.ndarray, spec) -> None:
        """(previous, next) context sentences of each row under ``spec``'s counts and window limit."""
        self.ctx, self.next = two_sided_sizes(np.asarray(self.side.lengths), doc_start, doc_end,
                                              spec.src_context_sentences, spec.src_next_sentences,
                                              spec.max_window_tokens, own=src_lengths)
        self.off = np.zeros(len(src_lengths), dtype=bool)

    def draw(self, epoch: int) -> None:
        """The rows of ``epoch`` that go without target concatenation: each with probability ``alpha``."""
        if self.alpha > 0:
            rng = np.random.default_rng([self.seed, epoch, MONOLINGUAL_STREAM])
            self.off = rng.random(len(self.off)) < self.alpha

    def lengths(self, own: np.ndarray) -> np.ndarray:
        """Token length of every sentence's row as :meth:`row` builds it when none is dropped: its context's target
        sentences, a ``<brk>`` each, then the current source sentence (``own`` (N,), its length) and ``</s>``."""
        ends = np.concatenate([[0], np.cumsum(np.asarray(self.side.lengths, dtype=np.int64))])   # (N + 1,)
        j = np.arange(len(own))
        c, m = np.maximum(self.ctx, 0), np.maximum(self.next, 0)                                 # (N,)
        return (ends[j] - ends[j - c]) + (ends[j + 1 + m] - ends[j + 1]) + c + m + np.asarray(own) + 1

    def row(self, j: int, current: np.ndarray, brk: int, eos: int) -> np.ndarray:
        """Sentence ``j``'s row (``current``: its source ids); empty when ``j`` goes without it this epoch."""
        if self.off[j]:
            return np.zeros(0, dtype=np.int64)
        c, m = int(self.ctx[j]), int(self.next[j])
        parts = []
        for i in list(range(j - c, j)) + list(range(j + 1, j + 1 + m)):   # previous, then next nearest first
            parts.extend([self.side.sentence(i), [brk]])
        parts.extend([current, [eos]])
        return np.concatenate([np.asarray(p, dtype=np.int64) for p in parts])


def target_concat_row(current: Sequence[int], targets: Sequence[Sequence[int]], j: int, context: int,
                      following: int, limit: int, vocab: VocabInfo) -> tuple[list[int], int]:
    """Sentence ``j``'s target concatenation and its next sentences: up to ``context`` previous and
    ``following`` next first-pass sentences (``targets``; the training rule: the farthest dropped first while the
    row is over ``limit``), each + ``<brk>``, then ``current`` and ``</s>``. ``current`` is the source sentence
    (HanoiT's row), or a whole source window without its ``</s>`` (a bilingual concatenation model's one row,
    whose target context then fits in what the window leaves of ``limit``)."""
    before, after = targets[max(j - context, 0):j], targets[j + 1:j + 1 + following]
    c, m = fit_window([len(t) for t in before], [len(t) for t in after], context, following, limit - len(current) - 1)
    row: list[int] = []
    for sentence in list(targets[j - c:j]) + list(targets[j + 1:j + 1 + m]):
        row += list(sentence) + [vocab.brk]
    return row + list(current) + [vocab.eos], m
