"""Token-budget, length-bucketed batches and collation into :class:`Batch`.

Batches are shuffled per epoch from ``(seed, epoch)`` alone, so a resumed run
sees exactly the batches an uninterrupted run would.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np
import torch

from ctxmt_cli.core.batch import Batch


def token_batches(
    src_len: np.ndarray, tgt_len: np.ndarray, indices: np.ndarray, max_tokens: int,
    bucket_width: int = 1, seed: int = 1, epoch: int = 0, shuffle: bool = True,
) -> list[np.ndarray]:
    """Group ``indices`` into batches whose padded size (rows × longest side) stays within ``max_tokens``.

    Items are sorted by their longer side, then by the sum of both sides (lengths in buckets of
    ``bucket_width`` tokens; random order among equal keys), so that both the source and the
    target rows of a batch have similar lengths: sorting by one side alone leaves the other side's
    padding high where the two lengths correlate loosely (SCAT: 43% source padding when sorted by
    target length, 17% here; target padding 10%). The batch order is shuffled.
    """
    rng = np.random.default_rng([seed, epoch])
    src, tgt = src_len[indices], tgt_len[indices]
    longest = np.maximum(src, tgt)
    noise = rng.random(len(indices)) if shuffle else np.arange(len(indices)) / max(len(indices), 1)
    order = np.lexsort((noise, (src + tgt) // bucket_width, longest // bucket_width))
    batches, start, width = [], 0, 0
    for pos, item in enumerate(order):
        size = int(longest[item])
        if pos > start and max(width, size) * (pos - start + 1) > max_tokens:
            batches.append(indices[order[start:pos]])
            start, width = pos, 0
        width = max(width, size)
    if start < len(order):
        batches.append(indices[order[start:]])
    if shuffle:
        batches = [batches[i] for i in rng.permutation(len(batches))]
    return batches


def shard_batches(batches: Sequence[np.ndarray], rank: int, world: int) -> list[np.ndarray]:
    """This rank's share: every ``world``-th batch, the same count on every rank (tail dropped)."""
    usable = len(batches) - len(batches) % world if len(batches) >= world else len(batches)
    return list(batches[rank:usable:world]) if world > 1 else list(batches)


def pad_rows(rows: Iterable[np.ndarray], pad: int) -> torch.Tensor:
    """Right-pad 1-d id arrays into a (B, T) long tensor."""
    rows = list(rows)
    out = np.full((len(rows), max(len(r) for r in rows)), pad, dtype=np.int64)
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return torch.from_numpy(out)


def collate(sources: list[np.ndarray], targets: list[np.ndarray], pad: int, bos: int, ids=None) -> Batch:
    """Teacher-forcing batch: ``tgt_in`` = ``<s>`` + target[:-1], ``tgt_out`` = target."""
    tgt_in = [np.concatenate([[bos], t[:-1]]) for t in targets]
    return Batch(
        src=pad_rows(sources, pad), tgt_in=pad_rows(tgt_in, pad), tgt_out=pad_rows(targets, pad),
        ids=None if ids is None else torch.as_tensor(np.asarray(ids), dtype=torch.long),
    )


def window_batch(dataset, indices: np.ndarray, pad: int, bos: int) -> Batch:
    """Collate the windows of sentences ``indices`` of a :class:`WindowDataset`."""
    return collate([dataset.source(j) for j in indices], [dataset.target(j) for j in indices], pad, bos, indices)
