"""The start of a search (encoding the sources, forcing the target prefixes) in chunks of rows of similar length.

A search pads its rows to the longest. The rows of one slot step are one sentence of each of up to ``batch_docs``
document pieces, so their lengths are as mixed as the test set's: over a concatenation model's (s4to4) decoding of
the Europarl test debates, 49% of the source-window positions and 44% of the forced-prefix positions were real
tokens. The encoder and the forced-prefix pass cost in proportion to rows x width (attention to its square), and
for a concatenation model they are a third of the decoding time. So a batch is started in chunks of rows sorted
by length (:func:`plan_chunks`), each chunk encoded and its prefix forced at its own width, and the chunks' states
joined (:func:`join_states`), padded to the widest and masked there. The decoding steps
then run on all the rows at once, as before, but each chunk's rows read only their own keys: the joined keys and
values remember each chunk's width (``SharedRows.widths``), and a step's cross-attention and forced-prefix
attention run block by block at those widths (``Fold.blocks``). Cutting the whole search into chunks instead
(one search per chunk) was measured to cost more than it saves: each step's fixed cost is then paid once per chunk.

The search keeps its rows in the chunks' order (:class:`Start`) and gives its hypotheses back in the batch's.
Only batches whose rows are independent of each other while encoding are chunked: no family fields
(``Batch.extras``: MBE's sentence groups read across rows), no memory, no shared source rows; and only on the CPU,
where the fixed cost of a chunk is small beside its tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from itertools import accumulate

import torch
from torch import Tensor

from ctxmt_cli.core.batch import Batch, DecoderState, SharedRows

#: what one more chunk costs beside its tokens, in padded positions (rows x (source + prefix width)): one more pass
#: of the encoder and of the prefix through the decoder, each layer a few dozen operator calls
CHUNK_COST = 1024
#: the most cut points :func:`plan_chunks` weighs (every n-th row beyond), so planning stays far below the search
CUT_POINTS = 64
#: what one more block of a decoding step's stored rows costs beside its keys, in key positions (stored rows x
#: keys): two more attention products per layer, about 25 us each on 2 threads, against about 0.7 us to read one
#: position's keys and values of 6 layers (measured at 64 x 8 heads x 4 queries x 130 keys)
BLOCK_COST = 200


@dataclass
class Start:
    """A search's first state (rows in ``order``: row r of the state is row ``order[r]`` of the batch; None: the
    batch's order)."""

    state: object
    order: list[int] | None = None

    def rows(self, t: Tensor) -> Tensor:
        """A per-row tensor (B, ...) of the batch in the state's row order."""
        return t if self.order is None else t[torch.tensor(self.order, device=t.device)]

    def restore(self, found: list) -> list:
        """Per-row results in the state's order, back in the batch's."""
        if self.order is None:
            return found
        out = [None] * len(found)
        for r, item in zip(self.order, found, strict=True):
            out[r] = item
        return out


def plan_chunks(widths: list[tuple[int, int]], cost: int | None = None) -> list[list[int]]:
    """Rows in chunks: each row's (source, prefix) widths -> chunks of row indices (longest rows first) that
    minimise the padded positions, rows x (widest source + widest prefix) summed over chunks, plus ``cost`` per
    chunk (default :data:`CHUNK_COST`; a dynamic programme over the rows sorted by source + prefix width, cut at
    most at :data:`CUT_POINTS` places)."""
    cost = CHUNK_COST if cost is None else cost
    order = sorted(range(len(widths)), key=lambda r: -(widths[r][0] + widths[r][1]))
    step = max(1, -(-len(order) // CUT_POINTS))
    cuts = list(range(0, len(order), step)) + [len(order)]                 # candidate chunk boundaries
    best, back = [0.0] + [float("inf")] * (len(cuts) - 1), [0] * len(cuts)
    for j in range(1, len(cuts)):
        src = pre = 0
        for i in range(j - 1, -1, -1):                                     # chunk cuts[i]..cuts[j], widened leftwards
            for r in order[cuts[i]:cuts[i + 1]]:
                src, pre = max(src, widths[r][0]), max(pre, widths[r][1])
            total = best[i] + (cuts[j] - cuts[i]) * (src + pre) + cost
            if total < best[j]:
                best[j], back[j] = total, i
    chunks, j = [], len(cuts) - 1
    while j > 0:
        chunks.append(order[cuts[back[j]]:cuts[j]])
        j = back[j]
    return chunks[::-1]


@lru_cache(maxsize=256)
def merge_blocks(widths: tuple[tuple[int, int], ...], cost: int) -> tuple[tuple[int, int], ...] | None:
    """Blocks ``widths`` of stored rows (``SharedRows.widths``: end stored row and keys of each) joined where a step
    reads them cheaper as one: runs of adjacent blocks, each read at its widest width, that minimise the key
    positions read plus ``cost`` per block (:data:`BLOCK_COST`; a dynamic programme over the blocks). None: one block.

    The blocks of a search's start are worth their cost while many rows fill them; as sentences finish and the
    stored rows are compacted, a block may keep a row or two, whose padding costs less than the block."""
    firsts = [0, *(end for end, _ in widths[:-1])]
    best, back = [0.0] + [float("inf")] * len(widths), [0] * (len(widths) + 1)
    for j in range(1, len(widths) + 1):
        widest = 0
        for i in range(j - 1, -1, -1):                                     # blocks i..j-1 read as one
            widest = max(widest, widths[i][1])
            total = best[i] + (widths[j - 1][0] - firsts[i]) * widest + cost
            if total < best[j]:
                best[j], back[j] = total, i
    runs, j = [], len(widths)
    while j > 0:
        runs.append((widths[j - 1][0], max(width for _, width in widths[back[j]:j])))
        j = back[j]
    return tuple(runs[::-1]) if len(runs) > 1 else None


def merged(state):
    """``state`` with the blocks of its shared rows (cross-attention, forced prefix) joined where
    :func:`merge_blocks` finds it cheaper: called after every reordering, it acts once the stored rows were
    compacted."""
    changed = {}
    for name in ("cross", "prefix"):
        rows = getattr(state, name)
        if rows is not None and rows.widths is not None:
            widths = merge_blocks(rows.widths, BLOCK_COST)
            if widths != rows.widths:
                changed[name] = replace(rows, widths=widths)
    return replace(state, **changed) if changed else state


def chunkable(batch: Batch) -> bool:
    """Whether ``batch``'s rows may be started in chunks (module docstring)."""
    return (batch.src.device.type == "cpu" and batch.size > 1 and batch.extras is None and batch.memory is None
            and batch.src_index is None and batch.chunks is None)


def batch_rows(batch: Batch, rows: list[int], pad: int) -> Batch:
    """Rows ``rows`` of a chunkable ``batch``, its source and prefix cut to their widest real row."""
    index = torch.tensor(rows, device=batch.src.device)
    picked = batch.map(lambda t: t.index_select(0, index))

    def narrowed(t: Tensor | None) -> Tensor | None:                       # (B', widest real row)
        return None if t is None else t[:, :max(1, int((t != pad).sum(1).max()))]

    return replace(picked, src=narrowed(picked.src), tgt_prefix=narrowed(picked.tgt_prefix))


def pad_right(t: Tensor, width: int, dim: int) -> Tensor:
    """``t`` padded with zeros (False) on the right of dimension ``dim`` to ``width`` positions."""
    missing = width - t.size(dim)
    if missing <= 0:
        return t
    shape = list(t.shape)
    shape[dim] = missing
    return torch.cat([t, t.new_zeros(shape)], dim)


def join_shared(parts: list[SharedRows | None], rows: list[int]) -> SharedRows | None:
    """The shared rows of consecutive blocks of decoder rows (``rows``: each block's count; a block without any:
    None) as one: stored rows in block order, each padded on the right to the widest and masked there, with each
    block's width kept (``SharedRows.widths``) so that a step reads only a block's own keys. None where every
    block has none."""
    first = next((p for p in parts if p is not None), None)
    if first is None:
        return None

    def empty(n: int) -> SharedRows:                                        # n stored rows of no keys
        k = [t.new_zeros(n, t.size(1), 0, t.size(3)) for t in first.k]      # (n, H, 0, D) per layer
        return SharedRows(k, k, first.mask.new_zeros(n, 0), torch.arange(n, device=first.mask.device))

    parts = [empty(n) if p is None else p for p, n in zip(parts, rows, strict=True)]
    width = max(p.mask.size(1) for p in parts)
    ends = list(accumulate(p.mask.size(0) for p in parts))

    def stack(layers: list[list[Tensor]], dim: int = 2) -> list[Tensor]:   # per layer (G, H, M, D), padded on dim
        return [torch.cat([pad_right(t, width, dim) for t in per_part]) for per_part in zip(*layers, strict=True)]

    # the keys stacked as (G, H, D, M) and read back as (G, H, M, D): the CPU layout SharedRows.one_per_row gives them
    keys = [k.mT for k in stack([[t.mT for t in p.k] for p in parts], 3)]
    widths = tuple((end, p.mask.size(1)) for end, p in zip(ends, parts, strict=True) if p.mask.size(0))
    return SharedRows(keys, stack([p.v for p in parts]),
                      torch.cat([pad_right(p.mask, width, 1) for p in parts]),
                      torch.cat([p.group + end - p.mask.size(0) for p, end in zip(parts, ends, strict=True)]),
                      widths if len(widths) > 1 else None)


def join_states(parts: list[DecoderState]) -> DecoderState:
    """The decoder states of consecutive blocks of rows as one (the blocks' rows in order): every width padded on
    the right to the widest and masked there, what one ``init_state`` over all the rows, padded to the widest,
    gives. A state class with fields of its own joins itself: a ``join`` classmethod taking the parts."""
    own_join = getattr(type(parts[0]), "join", None)
    if own_join is not None:
        return own_join(parts)
    rows = [p.pos.size(0) for p in parts]
    width = max(p.self_mask.size(1) for p in parts)

    def cat(name: str) -> Tensor:                                           # (B, ...) per-row fields
        return torch.cat([getattr(p, name) for p in parts])

    def own(name: str) -> list[Tensor]:                                     # per layer (B, H, T, D)
        return [torch.cat([pad_right(t, width, 2) for t in per_part])
                for per_part in zip(*(getattr(p, name) for p in parts), strict=True)]

    def shared(name: str) -> SharedRows | None:
        return join_shared([getattr(p, name) for p in parts], rows)

    return DecoderState(self_k=own("self_k"), self_v=own("self_v"), cross=shared("cross"),
                        self_mask=torch.cat([pad_right(p.self_mask, width, 1) for p in parts]),
                        pos=cat("pos"), sent_idx=cat("sent_idx"), n_sent=cat("n_sent"), shift=cat("shift"),
                        pending=cat("pending"), context=shared("context"), prefix=shared("prefix"))


def start(model, batch: Batch, enc=None, *, chunked: bool = True) -> Start:
    """Encode ``batch`` (unless ``enc`` is given) and force its target prefixes: the state of its first search
    step, started in chunks of rows of similar length where that saves work and ``chunked`` (module docstring)."""
    if enc is None and chunked and chunkable(batch):
        pad = model.vocab.pad
        src = (batch.src != pad).sum(1).tolist()
        pre = [1] * batch.size if batch.tgt_prefix is None else (batch.tgt_prefix != pad).sum(1).tolist()
        chunks = plan_chunks(list(zip(src, pre, strict=True)))
        if len(chunks) > 1:
            parts = [batch_rows(batch, rows, pad) for rows in chunks]
            states = [model.init_state(model.encode(part), part) for part in parts]
            return Start(join_states(states), [r for rows in chunks for r in rows])
    return Start(model.init_state(model.encode(batch) if enc is None else enc, batch))
