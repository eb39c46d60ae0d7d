"""Context windows built on the fly from the flat prepared arrays.

For sentence j of a document the source window is the previous ``src_context_sentences``
sentences (oldest first), each followed by ``<brk>``, then sentence j and
``</s>``; the target window likewise with ``tgt_context_sentences``. At a document start
the window is shorter: no window ever crosses a document boundary. A window
longer than ``max_window_tokens`` loses its oldest context sentences (never a
part of a sentence), as in Lupo et al.'s implementation.

A model that also reads the *next* source sentences (``src_next_sentences``, the offline setting of Yang et
al.'s HanoiT) gets ``[previous (oldest first), next (nearest first), current]``, each context sentence followed
by ``<brk>``: the current sentence stays last, as every family expects, and ``Batch.src_next`` says how many
of a row's context sentences are next ones. Near a document end there are fewer next sentences. A window
too long loses the context sentence farthest from the current one first, the next one before the previous
one at equal distance (:func:`split_context`); the kept sentences are always the nearest ones.

With ``context_order="random"`` the context sentences are instead drawn at random
from the current sentence's document (never the sentence itself), for corpora whose
in-document order is lost (Morishita et al. 2021, footnote 3: the 2-to-1 baseline on
JParaCrawl); the draw is a function of ``(seed, epoch)`` alone, so a resumed run sees
the windows an uninterrupted one would.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Literal

import numpy as np

from ctxmt_cli.errors import CtxmtError


@dataclass(frozen=True)
class WindowSpec:
    """How many previous sentences each side of a window holds, and how many next ones the source side."""

    src_context_sentences: int = 0
    tgt_context_sentences: int = 0
    max_window_tokens: int = 1024
    context_order: Literal["previous", "random"] = "previous"
    seed: int = 1                  # context_order random: the draw of epoch e comes from (seed, e)
    src_next_sentences: int = 0    # next source sentences (nearest first, after the previous ones)

    def __post_init__(self):
        if self.context_order == "random" and self.src_next_sentences:
            raise CtxmtError(f"context_order random draws the context from anywhere in the document, but "
                             f"src_next_sentences={self.src_next_sentences} needs the document order; "
                             "use context_order previous or src_next_sentences 0")


#: keeps the random-context stream apart from the batch shuffling's, which also starts from (seed, epoch)
RANDOM_CONTEXT_STREAM = 7919


def context_sizes(lengths: np.ndarray, doc_start: np.ndarray, wanted: int, limit: int) -> np.ndarray:
    """Number of context sentences per sentence: ≤ ``wanted``, inside the document, window ≤ ``limit`` tokens.

    ``lengths`` are sentence lengths (no separators); a window with c context
    sentences has sum(lengths[j-c..j]) + c separators + 1 ``</s>`` tokens.
    """
    return two_sided_sizes(lengths, doc_start, None, wanted, 0, limit)[0]


def split_context(c, prev_avail, next_avail):
    """(previous, next) sentences among the ``c`` nearest context sentences (numbers or arrays).

    The order of nearness: at each distance d the previous sentence j-d, then the next one j+d; a side that
    has run out leaves the rest to the other. Keeping the c first of that order is dropping the farthest
    first and, at equal distance, the next sentence before the previous one. ``c`` ≤ prev_avail + next_avail.
    """
    paired = np.minimum(c, 2 * np.minimum(prev_avail, next_avail))        # alternating p1 n1 p2 n2 ...
    rest, prev_longer = c - paired, np.greater(prev_avail, next_avail)
    return (paired + 1) // 2 + np.where(prev_longer, rest, 0), paired // 2 + np.where(prev_longer, 0, rest)


def two_sided_sizes(lengths: np.ndarray, doc_start: np.ndarray, doc_end, wanted: int, wanted_next: int,
                    limit: int, own: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(previous, next) context sentences per sentence: ≤ ``wanted`` / ``wanted_next``, inside the document
    (``doc_end``: one past its last sentence; None: no next sentence), window ≤ ``limit`` tokens, the nearest
    kept (:func:`split_context`). Previous -1 (next 0): the sentence alone is too long. ``own``: the current
    sentences' lengths when the window's current sentence is not the context's (the bilingual target
    concatenation: target context, current source); default ``lengths``."""
    n = len(lengths)
    j = np.arange(n)
    csum = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])
    extra = np.zeros(n, np.int64) if own is None else np.asarray(own, np.int64) - np.asarray(lengths, np.int64)
    prev_avail = np.minimum(wanted, j - doc_start)                         # never cross the document start
    next_avail = np.zeros(n, np.int64) if doc_end is None or not wanted_next else \
        np.minimum(wanted_next, doc_end - 1 - j)                           # ... nor its end
    total = prev_avail + next_avail
    prev, nxt = np.full(n, -1, dtype=np.int64), np.zeros(n, dtype=np.int64)
    for c in range(int(total.max(initial=0)), -1, -1):
        p, m = split_context(np.minimum(c, total), prev_avail, next_avail)
        size = csum[j + 1 + m] - csum[j - p] + extra + c + 1               # sentences j-p .. j+m, c <brk>, </s>
        ok = (prev < 0) & (c <= total) & (size <= limit)
        prev[ok], nxt[ok] = p[ok], m[ok]
    return prev, nxt


def fit_window(previous: Sequence[int], following: Sequence[int], wanted: int, wanted_next: int,
               budget: int) -> tuple[int, int]:
    """:func:`two_sided_sizes` for one sentence: (previous, next) context sentences whose lengths plus one
    separator each stay within ``budget``; ``previous`` are the lengths before it (oldest first), ``following``
    those after it (nearest first), both already inside its document.

    The window grows by one sentence with each added context sentence (:func:`split_context`'s order), so its
    size is increasing in the count and the largest count that fits is found by bisection over prefix sums:
    O(log n) sizes, where trying every count from the largest down cost O(n^2) on a long document (a model
    that reads every previous sentence the window limit holds, as mbe's scoring does)."""
    p_avail, n_avail = min(wanted, len(previous)), min(wanted_next, len(following))
    nearest_before = [0, *accumulate(reversed(previous[len(previous) - p_avail:]))]  # the k nearest previous
    nearest_after = [0, *accumulate(following[:n_avail])]

    def size(c: int) -> int:
        p, m = split_context(c, p_avail, n_avail)
        return nearest_before[int(p)] + nearest_after[int(m)] + c

    lo, hi = 0, p_avail + n_avail                    # invariant: every count <= lo fits (0 counts as fitting)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if size(mid) <= budget:
            lo = mid
        else:
            hi = mid - 1
    p, m = split_context(lo, p_avail, n_avail)
    return int(p), int(m)


def random_context(doc_start: np.ndarray, doc_end: np.ndarray, wanted: int, rng: np.random.Generator) -> np.ndarray:
    """(N, wanted) sentence ids: up to ``wanted`` distinct other sentences of each sentence's document, -1 padded.

    Drawn uniformly without replacement; entries are right-aligned (the last column is the one next to the
    current sentence in a window), so a window that must shrink drops the first columns first.
    """
    n = len(doc_start)
    j = np.arange(n)
    others = doc_end - doc_start - 1                                       # candidates: the document minus j
    count = np.minimum(others, wanted)
    table = np.full((n, wanted), -1, dtype=np.int64)
    ranks = np.full((n, wanted), np.iinfo(np.int64).max, dtype=np.int64)  # drawn ranks among the others, sorted
    for k in range(wanted):
        live = k < count
        r = np.floor(rng.random(n) * np.maximum(others - k, 1)).astype(np.int64)  # rank among the undrawn
        for col in range(k):                                               # skip the ranks drawn before (ascending)
            r += r >= ranks[:, col]
        ranks[live, k] = r[live]
        ranks.sort(axis=1)
        local = r + (r >= j - doc_start)                                   # skip the current sentence itself
        table[live, wanted - count[live] + k] = doc_start[live] + local[live]
    return table


def table_context_sizes(lengths: np.ndarray, table: np.ndarray, wanted: int, limit: int) -> np.ndarray:
    """:func:`context_sizes` for context given as a table of sentence ids (the last ``wanted`` columns used)."""
    cols = table[:, table.shape[1] - wanted:] if wanted else table[:, :0]
    ctx_len = np.where(cols >= 0, lengths[np.maximum(cols, 0)], 0)
    # tokens of the c nearest context sentences (the last c columns), c = 0..wanted
    nearest = np.concatenate([np.zeros((len(lengths), 1), np.int64), np.cumsum(ctx_len[:, ::-1], axis=1)], axis=1)
    available = (cols >= 0).sum(axis=1)
    chosen = np.full(len(lengths), -1, dtype=np.int64)
    for c in range(wanted, -1, -1):
        size = lengths + nearest[:, c] + c + 1
        ok = (chosen < 0) & (c <= available) & (size <= limit)
        chosen[ok] = c
    return chosen


def window_lengths(lengths: np.ndarray, sizes: np.ndarray, next_sizes: np.ndarray | None = None) -> np.ndarray:
    """Token length of each window given its number of previous (and next) context sentences."""
    j = np.arange(len(lengths))
    csum = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])
    c = np.maximum(sizes, 0)
    m = np.zeros_like(c) if next_sizes is None else next_sizes
    return csum[j + 1 + m] - csum[j - c] + c + m + 1


class WindowDataset:
    """Windows over one split of a prepared dataset (``SplitArrays``); ``target_concat``
    (:class:`~ctxmt_cli.data.target_concat.TargetConcat`): the bilingual HanoiT's second source row of each
    sentence too, over the same context sentences (:meth:`tgt_concat`)."""

    def __init__(self, split, spec: WindowSpec, brk_id: int, eos_id: int, target_concat=None):
        self.split, self.spec, self.brk, self.eos = split, spec, brk_id, eos_id
        self.target_concat = target_concat
        doc_index = np.asarray(split.doc_index)
        offsets = np.asarray(split.doc_offsets)
        self._doc_start, self._doc_end = offsets[doc_index], offsets[doc_index + 1]
        self._lengths = np.asarray(split.src_lengths), np.asarray(split.tgt_lengths)
        #: context_order random: (N, K) sentence ids of each window's context, nearest last (-1: none);
        #: None: the previous sentences
        self.context: np.ndarray | None = None
        #: (N,) next sentences in each source window (all 0 unless ``spec.src_next_sentences``)
        self.src_next = np.zeros(len(self._doc_start), dtype=np.int64)
        self.epoch = -1
        self.set_epoch(0)

    def set_epoch(self, epoch: int) -> None:
        """Draw the random context of ``epoch`` and the rows it gives without target concatenation (each a no-op
        where nothing is drawn)."""
        if epoch == self.epoch:
            return
        again, self.epoch = self.epoch >= 0, epoch
        if self.target_concat is not None and again:
            self.target_concat.draw(epoch)
        if again and self.spec.context_order == "previous":
            return
        spec, (src_len, tgt_len) = self.spec, self._lengths
        if spec.context_order == "random":
            rng = np.random.default_rng([spec.seed, epoch, RANDOM_CONTEXT_STREAM])
            wanted = max(spec.src_context_sentences, spec.tgt_context_sentences)
            self.context = random_context(self._doc_start, self._doc_end, wanted, rng)
            limit = spec.max_window_tokens
            self.src_ctx = table_context_sizes(src_len, self.context, spec.src_context_sentences, limit)
            self.tgt_ctx = table_context_sizes(tgt_len, self.context, spec.tgt_context_sentences, limit)
            self.src_len = self._table_lengths(src_len, self.src_ctx)
            self.tgt_len = self._table_lengths(tgt_len, self.tgt_ctx) + 1  # + <s> on the decoder input
        else:
            self.src_ctx, self.src_next = two_sided_sizes(src_len, self._doc_start, self._doc_end,
                                                          spec.src_context_sentences, spec.src_next_sentences,
                                                          spec.max_window_tokens)
            self.tgt_ctx = context_sizes(tgt_len, self._doc_start, spec.tgt_context_sentences, spec.max_window_tokens)
            self.src_len = window_lengths(src_len, self.src_ctx, self.src_next)
            self.tgt_len = window_lengths(tgt_len, self.tgt_ctx) + 1       # + <s> on the decoder input
        #: sentences whose own length exceeds the window limit are left out
        self.indices = np.nonzero((self.src_ctx >= 0) & (self.tgt_ctx >= 0))[0]
        if self.target_concat is not None:
            self.target_concat.fit(src_len, self._doc_start, self._doc_end, spec)
            self.target_concat.draw(epoch)

    def _table_lengths(self, lengths: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        """Token length of each window whose context is the last ``sizes`` columns of ``self.context``."""
        c = np.maximum(sizes, 0)
        width = self.context.shape[1]
        used = (np.arange(width)[None, :] >= width - c[:, None]) & (self.context >= 0)
        ctx = np.where(used, lengths[np.maximum(self.context, 0)], 0).sum(axis=1)
        return lengths + ctx + c + 1

    def __len__(self) -> int:
        return len(self.indices)

    def context_ids(self, j: int, c: int) -> list[int]:
        """The ``c`` context sentences of sentence ``j``'s window, oldest (farthest) first."""
        if self.context is None:
            return list(range(j - c, j))
        return [int(i) for i in self.context[j, self.context.shape[1] - c:]] if c else []

    def _window(self, get, j: int, c: int, m: int = 0) -> np.ndarray:
        parts = []
        for i in self.context_ids(j, c) + list(range(j + 1, j + 1 + m)):   # previous, then next nearest first
            parts.extend([get(i), [self.brk]])
        parts.extend([get(j), [self.eos]])
        return np.concatenate([np.asarray(p, dtype=np.int64) for p in parts])

    def source(self, j: int) -> np.ndarray:
        """Source window of sentence ``j`` (ids incl. separators and ``</s>``): previous sentences oldest first,
        next sentences nearest first (``src_next[j]`` of them), sentence j."""
        return self._window(self.split.src, j, int(self.src_ctx[j]), int(self.src_next[j]))

    def target(self, j: int) -> np.ndarray:
        """Target window of sentence ``j`` (ids incl. separators and ``</s>``, no ``<s>``)."""
        return self._window(self.split.tgt, j, int(self.tgt_ctx[j]))

    def tgt_concat(self, j: int) -> tuple[np.ndarray, int]:
        """Sentence ``j``'s target concatenation (empty: none this epoch) and its next sentences."""
        tc = self.target_concat
        row = tc.row(j, self.split.src(j), self.brk, self.eos)
        return row, int(tc.next[j]) if len(row) else 0
