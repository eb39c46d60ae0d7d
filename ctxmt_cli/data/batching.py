"""Token-budget, length-bucketed batches and collation into :class:`Batch`.

Batches are shuffled per epoch from ``(seed, epoch)`` alone, so a resumed run
sees exactly the batches an uninterrupted run would.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ctxmt_cli.config_base import DEFAULT_MAX_TOKENS
from ctxmt_cli.core.batch import Batch

#: what ``data.max_tokens`` counts, per row: the longer side (fairseq's ``--max-tokens``), or one side
BUDGET_SIDES = ("longer", "source", "target")


@dataclass(frozen=True)
class BatchBudget:
    """What a batch may hold: ``max_tokens`` padded tokens (rows × the widest row of the side ``side`` names, one
    of :data:`BUDGET_SIDES`), rows sorted by length in buckets of ``bucket_width`` tokens. A recipe's is
    :meth:`of` its ``data`` section; the defaults are the schema's."""

    max_tokens: int = DEFAULT_MAX_TOKENS
    bucket_width: int = 1
    side: str = "longer"

    def __post_init__(self):
        if self.side not in BUDGET_SIDES:
            raise ValueError(f"budget side {self.side!r}: choose one of {', '.join(BUDGET_SIDES)}")
        if self.max_tokens < 1 or self.bucket_width < 1:
            raise ValueError(f"a batch budget of {self.max_tokens} tokens in buckets of {self.bucket_width}: give "
                             "1 or more of each")

    @classmethod
    def of(cls, data) -> BatchBudget:
        """The budget of a recipe's ``data`` section (``data.max_tokens``, ``data.bucket_width``,
        ``data.max_tokens_of``)."""
        return cls(max_tokens=data.max_tokens, bucket_width=data.bucket_width, side=data.max_tokens_of)


def budget_width(src_len: np.ndarray, tgt_len: np.ndarray, side: str = "longer") -> np.ndarray:
    """Each row's width under the budget's ``side`` (:data:`BUDGET_SIDES`): a batch costs rows × its widest."""
    if side not in BUDGET_SIDES:
        raise ValueError(f"budget side {side!r}: choose one of {', '.join(BUDGET_SIDES)}")
    if side == "longer":
        return np.maximum(src_len, tgt_len)
    return src_len if side == "source" else tgt_len


def token_batches(
    src_len: np.ndarray, tgt_len: np.ndarray, indices: np.ndarray, *, budget: BatchBudget, seed: int = 1,
    epoch: int = 0, shuffle: bool = True,
) -> list[np.ndarray]:
    """Group ``indices`` into batches whose padded size (rows × widest row) stays within ``budget.max_tokens``, a
    row's width being the side ``budget.side`` names (:func:`budget_width`).

    Items are sorted by that width, then by the sum of both sides (lengths in buckets of
    ``budget.bucket_width`` tokens; random order among equal keys), so that both the source and the
    target rows of a batch have similar lengths: sorting by one side alone leaves the other side's
    padding high where the two lengths correlate loosely (SCAT: 43% source padding when sorted by
    target length, 17% here; target padding 10%). The batch order is shuffled.
    """
    if not len(indices):
        return []
    rng = np.random.default_rng([seed, epoch])
    src, tgt = src_len[indices], tgt_len[indices]
    width = budget_width(src, tgt, budget.side)                                # (N,)
    noise = rng.random(len(indices)) if shuffle else np.arange(len(indices)) / max(len(indices), 1)
    bucket = budget.bucket_width
    order = _sorted_order(noise, (src + tgt) // bucket, width // bucket)
    batches = np.split(indices[order], _batch_starts(width[order], budget.max_tokens))
    if shuffle:
        batches = [batches[i] for i in rng.permutation(len(batches))]
    return batches


def _sorted_order(*keys: np.ndarray) -> np.ndarray:
    """``np.lexsort(keys)`` (last key primary), sorting the integer keys by radix where they fit 16 bits: a
    6M-item corpus is ordered in about 1 s instead of 3 (the first training step waits for it). The first key
    (random noise, distinct in practice) is sorted by the faster unstable sort, deterministic all the same."""
    order = np.argsort(keys[0])
    for key in keys[1:]:
        key = key[order]
        if len(key) and 0 <= key.min() and key.max() < 2**15:
            key = key.astype(np.int16)                          # numpy's stable sort of ≤16-bit ints is a radix sort
        order = order[np.argsort(key, kind="stable")]
    return order


def _batch_starts(width: np.ndarray, max_tokens: int) -> list[int]:
    """Where each batch after the first begins when items of these widths are packed in this order, each batch
    taking items while (items × widest) stays within ``max_tokens`` (one item always fits).

    The packing is worked out once per run of equal widths, not once per item: sorted widths form a few hundred
    runs however large the corpus, and inside a run a batch's width is fixed, so its cuts are an arithmetic range.
    """
    starts: list[int] = []
    cut = np.flatnonzero(np.diff(width)) + 1
    start, widest = 0, 0                                         # the open batch: first position, width so far
    firsts, ends = np.concatenate(([0], cut)).tolist(), np.concatenate((cut, [len(width)])).tolist()
    for first, end in zip(firsts, ends, strict=True):
        size = int(width[first])
        widest = max(widest, size)
        if first > start and widest * (first - start + 1) > max_tokens:
            starts.append(first)
            start, widest = first, size
        full = start + max(1, max_tokens // widest)              # the open batch is full before this position
        if full < end:
            cuts = range(full, end, max(1, max_tokens // size))  # then batches of this run's width alone
            starts.extend(cuts)
            start, widest = cuts[-1], size
    return starts


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


def collate(sources: list[np.ndarray], targets: list[np.ndarray], pad: int, bos: int, ids=None,
            src_next=None) -> Batch:
    """Teacher-forcing batch: ``tgt_in`` = ``<s>`` + target[:-1], ``tgt_out`` = target; ``src_next``: the next
    sentences among each source window's context (None for a model that reads none)."""
    tgt_in = [np.concatenate([[bos], t[:-1]]) for t in targets]

    def as_long(x) -> torch.Tensor | None:
        return None if x is None else torch.as_tensor(np.asarray(x), dtype=torch.long)

    return Batch(
        src=pad_rows(sources, pad), tgt_in=pad_rows(tgt_in, pad), tgt_out=pad_rows(targets, pad),
        ids=as_long(ids), src_next=as_long(src_next),
    )


def window_batch(dataset, plan, pad: int, bos: int, chunked: bool = False) -> Batch:
    """Collate the windows of a :class:`WindowDataset`: sentences ``plan`` (an index array), or a
    :class:`GroupedBatch` (``chunked``: its row chunks into ``Batch.chunks``, each as wide as its longest source and
    target row). ``Batch.src_next`` holds each window's next sentences where the windows have any
    (``spec.src_next_sentences``). What a family adds (its ``Batch.extras``) is its inputs' ``collate``."""
    indices = plan.indices if isinstance(plan, GroupedBatch) else plan
    sources, targets = [dataset.source(j) for j in indices], [dataset.target(j) for j in indices]
    src_next = dataset.src_next[indices] if dataset.spec.src_next_sentences else None
    batch = collate(sources, targets, pad, bos, indices, src_next)
    if isinstance(plan, GroupedBatch) and chunked and plan.ends:
        starts = (0, *plan.ends[:-1])
        batch.chunks = tuple((a, b, max(len(r) for r in sources[a:b]), max(len(r) for r in targets[a:b]))
                             for a, b in zip(starts, plan.ends, strict=True))
    return batch


# ---- groups: whole groups of one document's sentences (Batching.GROUPS) ---------------------------
@dataclass
class GroupedBatch:
    """One micro-batch of whole groups: sentence indices, the group of each (0..G-1), whether each group mixes
    documents, and the row chunks the model runs at their own widths (rows sorted by length, chunk ends)."""

    indices: np.ndarray                          # (B,) sentence (window) indices, sorted by length
    groups: np.ndarray                           # (B,) group of each row
    mixed: np.ndarray                            # (G,) bool
    ends: tuple[int, ...] = ()                   # row after the last of each chunk (the last = B)


#: a chunk costs one more pass of every layer (kernel launches on a GPU, operator dispatch on a CPU) besides its
#: positions, so rows are cut into a new chunk only where that saves more padded positions than this share of the
#: batch budget (4096 tokens: 64)
CHUNK_COST = 1 / 64


def chunk_plan(hist: np.ndarray, overhead: float) -> tuple[list[int], int]:
    """Chunks of rows sorted by size, from ``hist`` (rows of each size): (end row of each chunk, computed positions
    Σ rows × widest). The cut minimises computed positions + ``overhead`` per chunk (a dynamic programme over the
    distinct sizes: a chunk is a run of them)."""
    values = np.flatnonzero(hist)                                           # (L,) distinct sizes, ascending
    cum = np.concatenate([[0], np.cumsum(hist[values])])                     # (L + 1,) rows up to each size
    # a last chunk of sizes i..j-1 computes its rows x its widest size
    ends, total = cheapest_cuts(cum, lambda j: (cum[j] - cum[:j]) * values[j - 1] + overhead)
    return ends, int(round(total - overhead * len(ends)))


def cheapest_cuts(cum: np.ndarray, last_chunk_cost) -> tuple[list[int], float]:
    """The cheapest cut of L sorted runs of rows (``cum`` (L + 1,): rows before each run) into chunks of
    consecutive runs, by dynamic programming: ``last_chunk_cost(j)`` (j,) is the cost of a chunk of runs i..j-1
    for every i < j. Returns (row after the last of each chunk, total cost)."""
    n = len(cum) - 1
    best, back = np.zeros(n + 1), np.zeros(n + 1, dtype=np.int64)
    for j in range(1, n + 1):
        cost = best[:j] + last_chunk_cost(j)                                # (j,) the last chunk: runs i..j-1
        back[j] = int(np.argmin(cost))
        best[j] = cost[back[j]]
    ends, j = [], n
    while j > 0:
        ends.append(int(cum[j]))
        j = int(back[j])
    return ends[::-1], float(best[-1])


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


def _documents(doc_index: np.ndarray, indices: np.ndarray, rng: np.random.Generator, shuffle: bool):
    """The documents of ``indices`` (in a random order when ``shuffle``) and each one's sentences, in index order
    (one stable sort, not one pass per document)."""
    order = indices[np.argsort(doc_index[indices], kind="stable")]
    docs, starts = np.unique(doc_index[order], return_index=True)
    by_doc = dict(zip(docs.tolist(), np.split(order, starts[1:]), strict=True))
    return (rng.permutation(docs) if shuffle else docs).tolist(), by_doc


def sentence_groups(doc_index: np.ndarray, size: np.ndarray, indices: np.ndarray, *, group_tokens: int,
                    mixed_share: float, rng: np.random.Generator, shuffle: bool) -> list[tuple[np.ndarray, bool]]:
    """(sentences, mixed) groups of ``indices`` (Morishita et al. 2021, §3.1 and §3.3).

    A same-document group is one document's sentences (order ignored); a document whose padded size exceeds
    ``group_tokens`` is length-sorted and cut into several groups, documents are never mixed. With
    ``mixed_share`` > 0, whole documents (drawn at random) go to a pool until the groups it will be cut into make
    that share of all groups (the paper mixes "the two types of mini-batches at the same ratio": 0.5 = 1:1); the
    pool's sentences, sorted by length (random among equal lengths), are cut into mixed groups of near-equal
    lengths. The pool's groups are estimated as its tokens over ``group_tokens`` while documents are drawn, so the
    share lands within about one document's groups of ``mixed_share``.
    """
    docs, by_doc = _documents(doc_index, indices, rng, shuffle)
    same = {}
    for d in docs:
        order = by_doc[d][np.lexsort((rng.random(len(by_doc[d])), size[by_doc[d]]))]
        same[d] = _cut(order, size, group_tokens)
    n_same, pooled, mixed_pool = sum(len(runs) for runs in same.values()), 0.0, []
    for d in docs if mixed_share > 0 else ():
        mixed_est = -(-pooled // group_tokens)                             # the pool's groups, about
        if mixed_est >= mixed_share * (mixed_est + n_same):
            break
        mixed_pool.append(d)
        n_same -= len(same[d])
        pooled += float(size[by_doc[d]].sum())
    taken = set(mixed_pool)
    groups = [(run, False) for d in docs if d not in taken for run in same[d]]
    mixed_pool = [by_doc[d] for d in mixed_pool]
    if mixed_pool:
        pool = np.concatenate(mixed_pool)
        order = pool[np.lexsort((rng.random(len(pool)), size[pool]))]
        groups += [(run, len(np.unique(doc_index[run])) > 1) for run in _cut(order, size, group_tokens)]
    return groups


def group_batches(doc_index: np.ndarray, src_len: np.ndarray, tgt_len: np.ndarray, indices: np.ndarray, *,
                  budget: BatchBudget, group_tokens: int, mixed_share: float = 0.0, seed: int = 1, epoch: int = 0,
                  shuffle: bool = True) -> list[GroupedBatch]:
    """Micro-batches of whole groups (:func:`sentence_groups`) under ``budget.max_tokens`` computed positions, a
    row's width being its longer side (``budget.side`` must be ``longer``: a group's chunks are as wide as their
    longest row on either side); a group is never split across batches (a group over the budget is a batch of its
    own). Drawn from ``(seed, epoch)`` alone, like :func:`token_batches`; under DDP :func:`shard_batches` then
    keeps every group on one rank.

    The rows of a batch are sorted by length and cut into chunks (:func:`chunk_plan`) that the model runs at
    their own widths (``Batch.chunks``), so the budget counts what is computed, Σ rows × widest per chunk, as
    :func:`token_batches`' rows × widest does for its one chunk: a batch holds as many real tokens as a
    sentence batch. In one padded tensor a document's group is padded to its longest sentence (synthetic
    benchmark: 21.6% of the target positions; length-bucketed sentences: 1.6%).

    Groups are packed by length, as :func:`token_batches` packs sentences: sorted by their longest sentence,
    then by the sum of their longest source and target (in buckets of ``budget.bucket_width`` tokens; random
    order among equals), cut into batches, and the batch order shuffled. Which groups share a batch changes no
    output.
    """
    if budget.side != "longer":
        raise ValueError(f"batches of whole groups count each row's longer side, not the {budget.side} side")
    max_tokens, bucket = budget.max_tokens, budget.bucket_width
    rng = np.random.default_rng([seed, epoch, 1])
    size = np.maximum(src_len, tgt_len)
    groups = sentence_groups(doc_index, size, indices, group_tokens=group_tokens, mixed_share=mixed_share, rng=rng,
                             shuffle=shuffle)
    widest = np.array([size[m].max() for m, _ in groups], dtype=np.int64)                      # (G,)
    both = np.array([src_len[m].max() + tgt_len[m].max() for m, _ in groups], dtype=np.int64)   # (G,)
    noise = rng.random(len(groups)) if shuffle else np.arange(len(groups))
    groups = [groups[i] for i in np.lexsort((noise, both // bucket, widest // bucket))]
    overhead = CHUNK_COST * max_tokens
    batches = _pack(groups, size, max_tokens, overhead)
    if shuffle:
        batches = [batches[i] for i in rng.permutation(len(batches))]
    return [_chunked(b, size, src_len, tgt_len, overhead) for b in batches]


#: groups looked at beyond the first that does not fit, to fill a batch before it is closed
LOOKAHEAD = 16


class _Batch:
    """A batch being packed: its groups and the rows of each size (for its computed positions)."""

    def __init__(self, top: int):
        self.groups, self.hist, self.width = [], np.zeros(top, dtype=np.int64), 0

    def fits(self, members: np.ndarray, size: np.ndarray, max_tokens: int, overhead: float) -> bool:
        """Whether adding ``members`` keeps the computed positions within ``max_tokens`` (an empty batch takes
        any group). Cheap bounds first (padded: rows x widest; real: the sum of sizes), the chunk plan last."""
        if not self.groups:
            return True
        hist = self.hist + np.bincount(size[members], minlength=len(self.hist))
        rows, real = int(hist.sum()), int(hist @ np.arange(len(hist)))
        if max(self.width, int(size[members].max())) * rows <= max_tokens:
            return True
        return real <= max_tokens and chunk_plan(hist, overhead)[1] <= max_tokens

    def add(self, group: tuple[np.ndarray, bool], size: np.ndarray) -> None:
        self.groups.append(group)
        self.hist += np.bincount(size[group[0]], minlength=len(self.hist))
        self.width = max(self.width, int(size[group[0]].max()))


def _pack(groups: list[tuple[np.ndarray, bool]], size: np.ndarray, max_tokens: int,
          overhead: float) -> list[list[tuple[np.ndarray, bool]]]:
    """Groups (sorted by length) into batches in order; where the next group does not fit, the following
    :data:`LOOKAHEAD` groups that do fill the batch before it is closed (groups are whole: without this a batch
    loses half a group on average; the chunks make the wider groups it takes cost no padding)."""
    top = max(int(size[m].max()) for m, _ in groups) + 1 if groups else 1
    taken, batches, current = np.zeros(len(groups), dtype=bool), [], _Batch(top)
    for pos, group in enumerate(groups):
        if taken[pos]:
            continue
        if not current.fits(group[0], size, max_tokens, overhead):
            for later in range(pos + 1, min(len(groups), pos + 1 + LOOKAHEAD)):
                if not taken[later] and current.fits(groups[later][0], size, max_tokens, overhead):
                    current.add(groups[later], size)
                    taken[later] = True
            batches.append(current.groups)
            current = _Batch(top)
        current.add(group, size)
    if current.groups:
        batches.append(current.groups)
    return batches


def split_by_source(src: np.ndarray, tgt: np.ndarray, overhead: float) -> tuple[np.ndarray, list[int]]:
    """Rows of one chunk (lengths ``src``, ``tgt``) sorted by source length and cut where that saves more than
    ``overhead`` positions (Σ rows x (widest source + widest target) / 2): (row order, chunk ends).

    Chunks cut by size alone hold every source length of their sizes (sorted by the longer side, usually the
    target, so the source side pads: 13.7% of the synthetic benchmark's source positions, 6.3% after this)."""
    order = np.lexsort((tgt, src))
    s, t = src[order], tgt[order]
    values, first = np.unique(s, return_index=True)                         # (L,) distinct source lengths
    cum = np.append(first, len(s))                                          # (L + 1,) rows before each
    widest_t = np.maximum.reduceat(t, first)                                # (L,) widest target per length

    def last_chunk_cost(j: int) -> np.ndarray:                              # (j,) lengths i..j-1 in one chunk
        tail_t = np.maximum.accumulate(widest_t[:j][::-1])[::-1]            # widest target of lengths i..j-1
        return (cum[j] - cum[:j]) * (values[j - 1] + tail_t) / 2 + overhead

    return order, cheapest_cuts(cum, last_chunk_cost)[0]


def _chunked(batch: list[tuple[np.ndarray, bool]], size: np.ndarray, src_len: np.ndarray, tgt_len: np.ndarray,
             overhead: float) -> GroupedBatch:
    """The :class:`GroupedBatch` of ``batch``'s groups: rows sorted by size and cut into chunks by
    :func:`chunk_plan` (what the budget counted), each chunk then cut by source length (:func:`split_by_source`:
    a chunk's widths only shrink, so the computed positions stay within the budget)."""
    rows = np.concatenate([m for m, _ in batch])
    groups = np.repeat(np.arange(len(batch)), [len(m) for m, _ in batch])
    by_size = np.argsort(size[rows], kind="stable")
    rows, groups = rows[by_size], groups[by_size]
    coarse, _ = chunk_plan(np.bincount(size[rows]), overhead)
    order, ends = [], []
    for a, b in zip((0, *coarse[:-1]), coarse, strict=True):
        inner, cut = split_by_source(src_len[rows[a:b]], tgt_len[rows[a:b]], overhead)
        order.append(a + inner)
        ends += [a + e for e in cut]
    order = np.concatenate(order)
    return GroupedBatch(rows[order], groups[order], np.asarray([x for _, x in batch], dtype=bool), tuple(ends))
