"""Token-budget, length-bucketed batches and collation into :class:`Batch`.

Batches are shuffled per epoch from ``(seed, epoch)`` alone, so a resumed run
sees exactly the batches an uninterrupted run would.
"""

from __future__ import annotations

from dataclasses import dataclass
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


def window_batch(dataset, plan, pad: int, bos: int) -> Batch:
    """Collate the windows of a :class:`WindowDataset`: sentences ``plan`` (an index array), or a
    :class:`GroupedBatch` (its groups and mixed-document labels go into ``Batch.groups`` / ``Batch.mixed``)."""
    indices = plan.indices if isinstance(plan, GroupedBatch) else plan
    batch = collate([dataset.source(j) for j in indices], [dataset.target(j) for j in indices], pad, bos, indices)
    if isinstance(plan, GroupedBatch):
        batch.groups, batch.mixed = torch.as_tensor(plan.groups), torch.as_tensor(plan.mixed)
    return batch


# ---- groups: whole groups of one document's sentences (Batching.GROUPS) ---------------------------
@dataclass
class GroupedBatch:
    """One micro-batch of whole groups: sentence indices, the group of each (0..G-1), whether each group mixes
    documents."""

    indices: np.ndarray                          # (B,) sentence (window) indices
    groups: np.ndarray                           # (B,) group of each row
    mixed: np.ndarray                            # (G,) bool


def _cut(order: np.ndarray, size: np.ndarray, budget: int) -> list[np.ndarray]:
    """Consecutive runs of ``order`` whose padded size (rows × longest) stays within ``budget``."""
    runs, start, width = [], 0, 0
    for pos, item in enumerate(order):
        if pos > start and max(width, int(size[item])) * (pos - start + 1) > budget:
            runs.append(order[start:pos])
            start, width = pos, 0
        width = max(width, int(size[item]))
    if start < len(order):
        runs.append(order[start:])
    return runs


def sentence_groups(doc_index: np.ndarray, size: np.ndarray, indices: np.ndarray, group_tokens: int,
                    mixed_share: float, rng: np.random.Generator, shuffle: bool) -> list[tuple[np.ndarray, bool]]:
    """(sentences, mixed) groups of ``indices`` (Morishita et al. 2021, §3.1 and §3.3).

    A same-document group is one document's sentences (order ignored); a document whose padded size exceeds
    ``group_tokens`` is length-sorted and cut into several groups, documents are never mixed. With
    ``mixed_share`` > 0, whole documents (drawn at random) holding that share of the tokens go to a pool whose
    sentences, sorted by length (random among equal lengths), are cut into mixed groups of near-equal lengths.
    """
    docs = np.unique(doc_index[indices])
    if shuffle:
        docs = rng.permutation(docs)
    by_doc = {d: indices[doc_index[indices] == d] for d in docs}
    total, pooled, mixed_pool, groups = float(size[indices].sum()), 0.0, [], []
    for d in docs:
        sentences = by_doc[d]
        if pooled < mixed_share * total:
            mixed_pool.append(sentences)
            pooled += float(size[sentences].sum())
            continue
        order = sentences[np.lexsort((rng.random(len(sentences)), size[sentences]))]
        groups += [(run, False) for run in _cut(order, size, group_tokens)]
    if mixed_pool:
        pool = np.concatenate(mixed_pool)
        order = pool[np.lexsort((rng.random(len(pool)), size[pool]))]
        groups += [(run, len(np.unique(doc_index[run])) > 1) for run in _cut(order, size, group_tokens)]
    return groups


def group_batches(doc_index: np.ndarray, src_len: np.ndarray, tgt_len: np.ndarray, indices: np.ndarray,
                  max_tokens: int, group_tokens: int, mixed_share: float = 0.0, seed: int = 1, epoch: int = 0,
                  shuffle: bool = True) -> list[GroupedBatch]:
    """Micro-batches of whole groups (:func:`sentence_groups`) under ``max_tokens`` padded tokens; a group is
    never split across batches (a group over the budget is a batch of its own). Drawn from ``(seed, epoch)``
    alone, like :func:`token_batches`; under DDP :func:`shard_batches` then keeps every group on one rank.

    Groups are packed by length, as :func:`token_batches` packs sentences: sorted by their longest sentence,
    then by the sum of their longest source and target (random order among equals), cut into batches, and the
    batch order shuffled. Packed in random order instead, a batch is as wide as the longest sentence of any of
    its groups: on the synthetic benchmark 45% of the target tokens were padding, 22% by length (the spread of
    lengths inside one document's group, 21%, is the floor). Which groups share a batch changes no output.
    """
    rng = np.random.default_rng([seed, epoch, 1])
    size = np.maximum(src_len, tgt_len)
    groups = sentence_groups(doc_index, size, indices, group_tokens, mixed_share, rng, shuffle)
    widest = np.array([size[m].max() for m, _ in groups], dtype=np.int64)                      # (G,)
    both = np.array([src_len[m].max() + tgt_len[m].max() for m, _ in groups], dtype=np.int64)   # (G,)
    noise = rng.random(len(groups)) if shuffle else np.arange(len(groups))
    groups = [groups[i] for i in np.lexsort((noise, both, widest))]
    batches, current, rows, width = [], [], 0, 0
    for members, mixed in groups:
        longest = int(size[members].max())
        if current and max(width, longest) * (rows + len(members)) > max_tokens:
            batches.append(current)
            current, rows, width = [], 0, 0
        current.append((members, mixed))
        rows, width = rows + len(members), max(width, longest)
    if current:
        batches.append(current)
    if shuffle:
        batches = [batches[i] for i in rng.permutation(len(batches))]
    return [GroupedBatch(np.concatenate([m for m, _ in b]),
                         np.repeat(np.arange(len(b)), [len(m) for m, _ in b]),
                         np.asarray([x for _, x in b], dtype=bool)) for b in batches]


def plan_batches(scheme, dataset, indices: np.ndarray, max_tokens: int, bucket_width: int = 1, seed: int = 1,
                 epoch: int = 0, shuffle: bool = True) -> list:
    """Micro-batches of a :class:`WindowDataset`'s ``indices`` as the model's ``batch_scheme`` asks: index arrays
    (:func:`token_batches`) or :class:`GroupedBatch` es (:func:`group_batches`); :func:`window_batch` collates both."""
    if not scheme.groups:
        return token_batches(dataset.src_len, dataset.tgt_len, indices, max_tokens, bucket_width, seed, epoch, shuffle)
    return group_batches(np.asarray(dataset.split.doc_index), dataset.src_len, dataset.tgt_len, indices, max_tokens,
                         scheme.group_tokens, scheme.mixed_share, seed, epoch, shuffle)
