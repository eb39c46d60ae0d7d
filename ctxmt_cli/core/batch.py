"""Batch, encoder output, incremental decoder state, model output and vocabulary: the data half of the core
contract.

Mask convention (used everywhere in ctxmt): a mask is a ``bool`` tensor that is ``True`` where a position holds a
real token (may be attended to) and ``False`` at padding. Padding is always on the right of each row.

*Context memory*: vectors a family keeps outside the source window and the decoder reads through its
context-attention blocks (or as extra cross-attention keys). The caching family (sequence shortening) fills it
with the cached entries of previous sentences; any family may use the same three fields: ``Batch.memory``
(entries kept per document by the translator), ``EncoderOut.context`` / ``EncoderOut.entry`` (the assembled
memory, and the entry the current sentence leaves for later ones) and ``DecoderState.context`` (its keys/values
per layer).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from itertools import accumulate
from typing import ClassVar, NamedTuple

import torch
from torch import Tensor


@dataclass(frozen=True)
class VocabInfo:
    """Vocabulary sizes and special ids (from the tokenizer): what models, windows and decoding need."""

    src_size: int
    tgt_size: int
    pad: int = 0
    unk: int = 1
    bos: int = 2
    eos: int = 3
    brk: int = 4
    joint: bool = True

    @classmethod
    def of(cls, tokenizer) -> VocabInfo:
        """The vocabulary description of a :class:`~ctxmt_cli.data.tokenize.Tokenizer`."""
        return cls(src_size=tokenizer.src_vocab_size, tgt_size=tokenizer.tgt_vocab_size, pad=tokenizer.pad_id,
                   unk=tokenizer.unk_id, bos=tokenizer.bos_id, eos=tokenizer.eos_id, brk=tokenizer.brk_id,
                   joint=tokenizer.joint)


@dataclass
class LossTerm:
    """One named extra term of the training objective, as sums over a batch.

    The objective is (Σ_tokens ℓ + Σ_terms weight · sum) / (tokens + Σ_terms [normalizes] weight · count):
    the label-smoothed window loss plus each term weighted in. ``sum / count`` is the term's logged
    mean. A term with weight 0 is only a statistic (logged and validated, no gradient); with
    ``normalizes`` its weighted count joins the normaliser (a per-token reweighting, see concat).
    """

    sum: Tensor                                      # () float32
    count: Tensor                                    # () float32
    weight: float = 1.0
    normalizes: bool = False


@dataclass
class ModelOutput:
    logits: Tensor | None                         # (B, T, V); None when forward(project=False)
    hidden: Tensor | None = None                  # (B, T, C) final decoder states, when project=False;
    #                                                  (N, C) packed (Batch.pack order) for a chunked batch
    loss_terms: dict[str, LossTerm] = field(default_factory=dict)   # a family's (LossTerm), its encoder's included


@dataclass
class Extras:
    """A family's own batch fields, beside the core's (MBE's sentence groups, HanoiT's target concatenation).

    A family subclasses it as a dataclass in its folder and its hooks alone read it: the core never looks inside.
    Every tensor field is per source row (dimension 0 = the batch's source rows), so :meth:`rows` cuts it with the
    rows of a chunk (:meth:`Batch.parts`) and :meth:`map` moves or pins it with the batch; a field named in
    ``whole`` describes the whole batch (say, one flag per group) and is kept as it is by :meth:`rows`. A field
    may not take the name of a method (``map``, ``rows``).
    """

    whole: ClassVar[tuple[str, ...]] = ()

    def map(self, fn: Callable[[Tensor], Tensor]) -> Extras:
        """``fn`` applied to every tensor field (moving, pinning)."""
        return replace(self, **{f.name: fn(v) for f in fields(self) if isinstance(v := getattr(self, f.name), Tensor)})

    def rows(self, start: int, end: int) -> Extras:
        """Rows ``start``..``end`` of every per-row field; ``whole`` fields as they are."""
        return replace(self, **{f.name: v[start:end] for f in fields(self)
                                if f.name not in self.whole and isinstance(v := getattr(self, f.name), Tensor)})


@dataclass
class Batch:
    """A padded batch of (possibly windowed) sentence pairs.

    ``src`` is the source window (context sentences, ``<brk>`` separators, the current sentence, ``</s>``).
    ``tgt_in``/``tgt_out`` are the teacher-forced decoder input (starting with ``<s>``) and the labels. For
    decoding, ``tgt_prefix`` holds forced decoder inputs (``<s>`` + target context, each sentence followed by
    ``<brk>``) and ``tgt_sentences`` the number of target sentences the window will hold once the current one is
    generated. ``src_index`` (scoring) lets several target rows share one source row: target row ``r`` is
    conditioned on ``src[src_index[r]]``, so each distinct source window is encoded once (contrastive candidates).
    ``src_next``: how many of each row's context sentences are *next* sentences; a window is then [previous
    (oldest first), next (nearest first), current], each context sentence followed by ``<brk>``, the current one
    last (the convention every family keeps). None = 0. It belongs to the window layout, which the data layer
    cuts for any family (``WindowSpec.src_next_sentences``), not to one family.
    ``chunks`` (training batches of whole groups): the rows, sorted by length, cut into consecutive chunks
    ``(first row, end row, source width, target width)`` that cover rows 0..B in order; the model runs each
    chunk at its own width (:meth:`parts`) in one forward pass, so rows of one group need not share one
    padded tensor. Its teacher-forced outputs come back packed (:meth:`pack` order, :meth:`unpack`). The core's
    forward and loss read it, whichever family planned the batch.
    ``extras``: what one family adds (:class:`Extras`), or None.
    """

    src: Tensor                                  # (B, S) long
    tgt_in: Tensor | None = None              # (B, T) long
    tgt_out: Tensor | None = None             # (B, T) long
    tgt_prefix: Tensor | None = None          # (B, P) long, for decoding
    tgt_sentences: Tensor | None = None       # (B,) long, for decoding
    ids: Tensor | None = None                 # (B,) long, sentence/item index of each row
    src_index: Tensor | None = None           # (B_tgt,) long, source row of each target row
    memory: list | None = None                # context memory: per row, cached entries (M_i, C), oldest first
    chunks: tuple[tuple[int, int, int, int], ...] | None = None   # row chunks: (first, end, src width, tgt width)
    src_next: Tensor | None = None            # (B,) long, next sentences among each source row's context
    extras: Extras | None = None              # a family's own fields, per source row

    def map(self, fn: Callable[[Tensor], Tensor]) -> Batch:
        """A batch with ``fn`` applied to every tensor field and to the extras' (moving, pinning)."""
        moved = {f.name: getattr(self, f.name) for f in fields(self)}
        moved = {k: (fn(v) if isinstance(v, Tensor) else v) for k, v in moved.items()}
        if self.extras is not None:
            moved["extras"] = self.extras.map(fn)
        return Batch(**moved)

    def to(self, device: torch.device | str) -> Batch:
        """Move every tensor field to ``device``."""
        return self.map(lambda t: t.to(device, non_blocking=True))

    @property
    def size(self) -> int:
        return self.src.size(0) if self.src_index is None else self.src_index.size(0)

    def target_tokens(self, pad_id: int) -> int:
        """Number of real target tokens (labels)."""
        return int((self.tgt_out != pad_id).sum()) if self.tgt_out is not None else 0

    def parts(self) -> list[Batch]:
        """The row chunks (``chunks``) as teacher-forcing batches of their own widths (views of this batch's
        tensors); the extras' per-row fields are cut with the rows (:meth:`Extras.rows`), keeping their width."""
        if self.chunks is None or self.src_index is not None or self.memory is not None or self.tgt_prefix is not None:
            raise ValueError("parts() needs a chunked teacher-forcing batch (no src_index, memory or tgt_prefix)")

        def part(a: int, b: int, s: int, t: int) -> Batch:        # rows a:b, source width s, target width t
            return Batch(src=self.src[a:b, :s], tgt_in=_cut(self.tgt_in, a, b, t), tgt_out=_cut(self.tgt_out, a, b, t),
                         ids=_cut(self.ids, a, b), src_next=_cut(self.src_next, a, b),
                         extras=None if self.extras is None else self.extras.rows(a, b))

        return [part(*chunk) for chunk in self.chunks]

    def pack(self, t: Tensor) -> Tensor:
        """The target positions a chunked forward computes, of a (B, T, ...) tensor: (N, ...), chunk after chunk,
        row-major inside each (N = sum of rows x target width over the chunks)."""
        return torch.cat([t[a:b, :w].reshape(-1, *t.shape[2:]) for a, b, _, w in self.chunks])

    def unpack(self, flat: Tensor, width: int) -> Tensor:
        """(N, ...) in :meth:`pack` order -> (B, ``width``, ...), zeros where no chunk reaches (differentiable)."""
        out, start = [], 0
        for a, b, _, w in self.chunks:
            part = flat[start:start + (b - a) * w].reshape(b - a, w, *flat.shape[1:])   # (b - a, w, ...)
            start += (b - a) * w
            out.append(torch.cat([part, part.new_zeros(b - a, width - w, *flat.shape[1:])], 1) if w < width else part)
        return torch.cat(out)


@dataclass
class Memory:
    """A padded set of vectors per row and its mask (a context memory, or one sentence's cache entry)."""

    states: Tensor                               # (B, M, C)
    mask: Tensor                                 # (B, M) bool, True = real entry
    current: Tensor | None = None             # (B, M) bool, entries of the current sentence (analysis)

    def rows(self) -> list[Tensor]:
        """The real vectors of each row: B tensors (M_i, C)."""
        return [self.states[r][self.mask[r]] for r in range(self.states.size(0))]

    def index_select(self, index: Tensor) -> Memory:
        """Rows ``index`` (B',)."""
        current = None if self.current is None else self.current.index_select(0, index)
        return Memory(self.states.index_select(0, index), self.mask.index_select(0, index), current)


@dataclass
class EncoderOut:
    """Encoder states and their mask, and what a family adds (every tensor batch-first). S can be less than the
    source rows' width: positions a between-layers step dropped are cut off where no probe listens (HanoiT)."""

    states: Tensor                               # (B, S, C)
    mask: Tensor                                 # (B, S) bool, True = real token
    shift: Tensor                                # (B,) long, segment shift used by the decoder
    current: Tensor | None = None             # (B, S) bool, states of the current sentence (set when a probe asks)
    prefix: Tensor | None = None              # (B, P, C) vectors the decoder puts before its input (input prefix)
    loss_terms: dict = field(default_factory=dict)   # terms computed while encoding (name -> LossTerm)
    context: Memory | None = None             # context memory read by context attention, (B, Mc, C)
    entry: Memory | None = None               # what this sentence leaves in a document memory, (B, M, C)


class Fold(NamedTuple):
    """How decoder rows (B) sit on the key/value rows they share (G, :class:`SharedRows`): in ``size`` slots per
    shared row, the slots of one shared row attended as one query block. ``slots`` (B,): each row's slot in that
    (G * size) layout, where some slots are empty (a group that left the search, its rows not yet compacted away);
    None: the rows are that layout. ``Fold()``: one row per shared row."""

    size: int = 1
    slots: Tensor | None = None
    widths: tuple[tuple[int, int], ...] | None = None   # (end stored row, keys read) per block of stored rows

    def blocks(self, groups: int, keys: int) -> list[tuple[int, int, int]]:
        """(first, end, keys) of each block of the ``groups`` stored rows (:attr:`SharedRows.widths`); without
        widths, one block of all ``keys``."""
        if self.widths is None:
            return [(0, groups, keys)]
        firsts = [0, *(end for end, _ in self.widths[:-1])]
        return [(first, end, width) for first, (end, width) in zip(firsts, self.widths, strict=True)]

    def spread(self, x: Tensor, groups: int) -> Tensor:
        """Rows ``x`` (B, ...) in the slot layout (G * size, ...), empty slots zero."""
        if self.slots is None:
            return x
        out = x.new_zeros((groups * self.size, *x.shape[1:]))
        return out.index_copy_(0, self.slots, x)

    def gather(self, x: Tensor) -> Tensor:
        """The rows (B, ...) of ``x`` in the slot layout (G * size, ...)."""
        return x if self.slots is None else x.index_select(0, self.slots)

    def fold(self, x: Tensor, groups: int) -> Tensor:
        """Rows ``x`` (B, H, T, X) as one block of queries per stored row: (G, H, size*T, X), empty slots zero."""
        _, h, t, n = x.shape
        return self.spread(x, groups).reshape(groups, self.size, h, t, n).transpose(1, 2).reshape(groups, h, -1, n)

    def unfold(self, x: Tensor, t: int) -> Tensor:
        """:meth:`fold` undone: blocks (G, H, size*T, X) back to the rows (B, H, T, X)."""
        g, h, _, n = x.shape
        return self.gather(x.reshape(g, h, self.size, t, n).transpose(1, 2).reshape(g * self.size, h, t, n))


#: stored rows are compacted once at most this share of them is still used: copying every layer's keys and values
#: each time a sentence finishes cost more than the empty slots that attention reads until then
COMPACT_AT = 0.5


@dataclass
class SharedRows:
    """Per-layer attention keys/values that groups of decoder rows share (the beams of one sentence).

    Beam search keeps the beams of a sentence in adjacent rows; their cross-attention (and context, and forced
    target prefix) keys/values are identical, so they are stored once per group and ``group`` maps every row to its
    stored row. Reordering beams inside a group copies nothing; stored rows are compacted only when at most
    :data:`COMPACT_AT` of them are still used (until then the groups that left are empty slots, :class:`Fold`).
    """

    k: list[Tensor]                              # per layer (G, H, M, D)
    v: list[Tensor]
    mask: Tensor                                 # (G, M) bool
    group: Tensor                                # (B,) long: row -> stored row
    widths: tuple[tuple[int, int], ...] | None = None   # blocks a step reads apart: (end stored row, keys) each

    @classmethod
    def one_per_row(cls, kv: list[tuple[Tensor, Tensor]], mask: Tensor) -> SharedRows:
        """One stored row per decoder row, laid out once here, not by every decoding step's matmul: on the CPU the keys
        as the transpose of a contiguous (G, H, D, M), so that a step's ``q @ k^T`` is a plain product (0.44 against
        0.76 ms at 64 x 8 heads x 4 queries x 130 keys, 2 threads); contiguous elsewhere, as SDPA's kernels want."""
        keys = [k.mT.contiguous().mT if k.device.type == "cpu" else k.contiguous() for k, _ in kv]
        return cls(keys, [v.contiguous() for _, v in kv], mask,
                   torch.arange(mask.size(0), device=mask.device))

    def index_select(self, index: Tensor) -> SharedRows:
        """Rows ``index`` (reordering, expansion, removal); stored rows are copied only to compact them."""
        group = self.group.index_select(0, index)                           # (B',)
        used, remapped = torch.unique(group, return_inverse=True)           # sorted stored rows still in use
        if used.numel() > COMPACT_AT * self.mask.size(0):
            return replace(self, group=group)
        return SharedRows([t[used] for t in self.k], [t[used] for t in self.v],    # indexing keeps the keys' layout
                          self.mask.index_select(0, used), remapped.reshape(-1), self._kept_widths(used))

    def _kept_widths(self, used: Tensor) -> tuple[tuple[int, int], ...] | None:
        """:attr:`widths` once only the stored rows ``used`` (sorted) are kept: blocks left empty dropped."""
        if self.widths is None:
            return None
        ends = torch.tensor([end for end, _ in self.widths], device=used.device)
        kept = torch.bincount(torch.bucketize(used, ends, right=True), minlength=len(self.widths)).tolist()
        left = [(n, width) for n, (_, width) in zip(kept, self.widths, strict=True) if n]
        out = tuple(zip(accumulate(n for n, _ in left), (width for _, width in left), strict=True))
        return out if len(out) > 1 else None

    def for_rows(self) -> tuple[list[Tensor], list[Tensor], Tensor, Fold]:
        """Keys, values and mask laid out for the rows, and how the rows fold onto them.

        Where every used stored row has the same number f of adjacent rows, in order (as beam search keeps them),
        the stored rows are read as they are (:class:`Fold` of size f, with slots where some stored rows are no
        longer used); otherwise the stored rows are gathered per row (``Fold()``).
        """
        g, b = self.mask.size(0), self.group.numel()
        device = self.group.device
        if b % g == 0 and torch.equal(self.group, torch.arange(g, device=device).repeat_interleave(b // g)):
            return self.k, self.v, self.mask, Fold(b // g, None, self.widths)
        counts = torch.bincount(self.group, minlength=g)                    # (G,) rows per stored row
        f = int(counts.max()) if b else 1
        in_order = b == 0 or bool((self.group[1:] >= self.group[:-1]).all())
        if in_order and bool(((counts == 0) | (counts == f)).all()):
            return self.k, self.v, self.mask, Fold(f, self.group * f + torch.arange(b, device=device) % f,
                                                   self.widths)
        group = self.group
        return ([t.index_select(0, group) for t in self.k], [t.index_select(0, group) for t in self.v],
                self.mask.index_select(0, group), Fold())


def _cut(t: Tensor | None, a: int, b: int, width: int | None = None) -> Tensor | None:
    """Rows ``a:b`` of ``t`` (its first ``width`` columns when given); None stays None."""
    if t is None:
        return None
    return t[a:b] if width is None else t[a:b, :width]


@dataclass
class DecoderState:
    """Everything incremental decoding needs; every tensor is batch-first so beam search can reorder it.

    ``pos``/``sent_idx`` are the token position and sentence index (number of
    ``<brk>`` seen) of the *next* input token; ``pending`` is that token.
    """

    self_k: list[Tensor]                         # per layer (B, H, T, D)
    self_v: list[Tensor]
    cross: SharedRows                            # per layer (G, H, S, D): encoder keys/values, once per sentence
    self_mask: Tensor                            # (B, T) bool, valid cached positions
    pos: Tensor                                  # (B,) long
    sent_idx: Tensor                             # (B,) long
    n_sent: Tensor                               # (B,) long
    shift: Tensor                                # (B,) long
    pending: Tensor                              # (B,) long
    context: SharedRows | None = None         # context-memory keys/values per layer, once per sentence
    prefix: SharedRows | None = None          # per layer (G, H, P, D): the forced target prefix's self-attention
                                                 # keys/values, once per sentence; self_k/self_v follow them

    def index_select(self, index: Tensor) -> DecoderState:
        """Rows ``index`` of every tensor (beam search reordering / expansion); shared rows are not copied."""

        def pick(t: Tensor) -> Tensor:
            return t.index_select(0, index)

        return replace(
            self,
            self_k=[pick(t) for t in self.self_k], self_v=[pick(t) for t in self.self_v],
            cross=self.cross.index_select(index),
            self_mask=pick(self.self_mask), pos=pick(self.pos),
            sent_idx=pick(self.sent_idx), n_sent=pick(self.n_sent), shift=pick(self.shift),
            pending=pick(self.pending),
            context=None if self.context is None else self.context.index_select(index),
            prefix=None if self.prefix is None else self.prefix.index_select(index),
        )
