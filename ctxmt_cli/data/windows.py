"""Context windows built on the fly from the flat prepared arrays.

For sentence j of a document the source window is the previous ``src_context_sentences``
sentences (oldest first), each followed by ``<brk>``, then sentence j and
``</s>``; the target window likewise with ``tgt_context_sentences``. At a document start
the window is shorter: no window ever crosses a document boundary. A window
longer than ``max_window_tokens`` loses its oldest context sentences (never a
part of a sentence), as in Lupo et al.'s implementation.

With ``context_order="random"`` the context sentences are instead drawn at random
from the current sentence's document (never the sentence itself), for corpora whose
in-document order is lost (Morishita et al. 2021, footnote 3: the 2-to-1 baseline on
JParaCrawl); the draw is a function of ``(seed, epoch)`` alone, so a resumed run sees
the windows an uninterrupted one would.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np


@dataclass(frozen=True)
class WindowSpec:
    """How many previous sentences each side of a window holds."""

    src_context_sentences: int = 0
    tgt_context_sentences: int = 0
    max_window_tokens: int = 1024
    context_order: Literal["previous", "random"] = "previous"
    seed: int = 1                  # context_order random: the draw of epoch e comes from (seed, e)


#: keeps the random-context stream apart from the batch shuffling's, which also starts from (seed, epoch)
RANDOM_CONTEXT_STREAM = 7919


def context_sizes(lengths: np.ndarray, doc_start: np.ndarray, wanted: int, limit: int) -> np.ndarray:
    """Number of context sentences per sentence: ≤ ``wanted``, inside the document, window ≤ ``limit`` tokens.

    ``lengths`` are sentence lengths (no separators); a window with c context
    sentences has sum(lengths[j-c..j]) + c separators + 1 ``</s>`` tokens.
    """
    n = len(lengths)
    j = np.arange(n)
    csum = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])
    available = np.minimum(wanted, j - doc_start)                          # never cross the document start
    chosen = np.full(n, -1, dtype=np.int64)
    for c in range(int(available.max(initial=0)), -1, -1):
        size = csum[j + 1] - csum[np.maximum(j - c, 0)] + c + 1
        ok = (chosen < 0) & (c <= available) & (size <= limit)
        chosen[ok] = c
    return chosen                                                          # -1: the sentence alone is too long


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


def window_lengths(lengths: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Token length of each window given its number of context sentences."""
    j = np.arange(len(lengths))
    csum = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])
    c = np.maximum(sizes, 0)
    return csum[j + 1] - csum[j - c] + c + 1


class WindowDataset:
    """Windows over one split of a prepared dataset (``SplitArrays``)."""

    def __init__(self, split, spec: WindowSpec, brk_id: int, eos_id: int):
        self.split, self.spec, self.brk, self.eos = split, spec, brk_id, eos_id
        doc_index = np.asarray(split.doc_index)
        offsets = np.asarray(split.doc_offsets)
        self._doc_start, self._doc_end = offsets[doc_index], offsets[doc_index + 1]
        self._lengths = np.asarray(split.src_lengths), np.asarray(split.tgt_lengths)
        #: context_order random: (N, K) sentence ids of each window's context, nearest last (-1: none);
        #: None: the previous sentences
        self.context: np.ndarray | None = None
        self.epoch = -1
        self.set_epoch(0)

    def set_epoch(self, epoch: int) -> None:
        """Draw the random context of ``epoch`` (a no-op for the previous-sentence order)."""
        if epoch == self.epoch or (self.spec.context_order == "previous" and self.epoch >= 0):
            return
        self.epoch = epoch
        spec, (src_len, tgt_len) = self.spec, self._lengths
        if spec.context_order == "random":
            rng = np.random.default_rng([spec.seed, epoch, RANDOM_CONTEXT_STREAM])
            wanted = max(spec.src_context_sentences, spec.tgt_context_sentences)
            self.context = random_context(self._doc_start, self._doc_end, wanted, rng)
            self.src_ctx = table_context_sizes(src_len, self.context, spec.src_context_sentences, spec.max_window_tokens)
            self.tgt_ctx = table_context_sizes(tgt_len, self.context, spec.tgt_context_sentences, spec.max_window_tokens)
            self.src_len = self._table_lengths(src_len, self.src_ctx)
            self.tgt_len = self._table_lengths(tgt_len, self.tgt_ctx) + 1  # + <s> on the decoder input
        else:
            self.src_ctx = context_sizes(src_len, self._doc_start, spec.src_context_sentences, spec.max_window_tokens)
            self.tgt_ctx = context_sizes(tgt_len, self._doc_start, spec.tgt_context_sentences, spec.max_window_tokens)
            self.src_len = window_lengths(src_len, self.src_ctx)
            self.tgt_len = window_lengths(tgt_len, self.tgt_ctx) + 1       # + <s> on the decoder input
        #: sentences whose own length exceeds the window limit are left out
        self.indices = np.nonzero((self.src_ctx >= 0) & (self.tgt_ctx >= 0))[0]

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

    def _window(self, get, j: int, c: int) -> np.ndarray:
        parts = []
        for i in self.context_ids(j, c):
            parts.extend([get(i), [self.brk]])
        parts.extend([get(j), [self.eos]])
        return np.concatenate([np.asarray(p, dtype=np.int64) for p in parts])

    def source(self, j: int) -> np.ndarray:
        """Source window of sentence ``j`` (ids incl. separators and ``</s>``)."""
        return self._window(self.split.src, j, int(self.src_ctx[j]))

    def target(self, j: int) -> np.ndarray:
        """Target window of sentence ``j`` (ids incl. separators and ``</s>``, no ``<s>``)."""
        return self._window(self.split.tgt, j, int(self.tgt_ctx[j]))
