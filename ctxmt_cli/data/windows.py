"""Context windows built on the fly from the flat prepared arrays.

For sentence j of a document the source window is the previous ``src_context_sentences``
sentences (oldest first), each followed by ``<brk>``, then sentence j and
``</s>``; the target window likewise with ``tgt_context_sentences``. At a document start
the window is shorter: no window ever crosses a document boundary. A window
longer than ``max_window_tokens`` loses its oldest context sentences (never a
part of a sentence), as in Lupo et al.'s implementation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class WindowSpec:
    """How many previous sentences each side of a window holds."""

    src_context_sentences: int = 0
    tgt_context_sentences: int = 0
    max_window_tokens: int = 1024


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
        doc_start = np.asarray(split.doc_offsets)[np.asarray(split.doc_index)]
        src_len, tgt_len = np.asarray(split.src_lengths), np.asarray(split.tgt_lengths)
        self.src_ctx = context_sizes(src_len, doc_start, spec.src_context_sentences, spec.max_window_tokens)
        self.tgt_ctx = context_sizes(tgt_len, doc_start, spec.tgt_context_sentences, spec.max_window_tokens)
        self.src_len = window_lengths(src_len, self.src_ctx)
        self.tgt_len = window_lengths(tgt_len, self.tgt_ctx) + 1           # + <s> on the decoder input
        #: sentences whose own length exceeds the window limit are left out
        self.indices = np.nonzero((self.src_ctx >= 0) & (self.tgt_ctx >= 0))[0]

    def __len__(self) -> int:
        return len(self.indices)

    def _window(self, get, j: int, c: int) -> np.ndarray:
        parts = []
        for i in range(j - c, j):
            parts.extend([get(i), [self.brk]])
        parts.extend([get(j), [self.eos]])
        return np.concatenate([np.asarray(p, dtype=np.int64) for p in parts])

    def source(self, j: int) -> np.ndarray:
        """Source window of sentence ``j`` (ids incl. separators and ``</s>``)."""
        return self._window(self.split.src, j, int(self.src_ctx[j]))

    def target(self, j: int) -> np.ndarray:
        """Target window of sentence ``j`` (ids incl. separators and ``</s>``, no ``<s>``)."""
        return self._window(self.split.tgt, j, int(self.tgt_ctx[j]))
