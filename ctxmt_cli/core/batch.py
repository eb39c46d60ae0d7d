"""Batch, encoder output and incremental decoder state: the data half of the core contract.

Mask convention (used everywhere in ctxmt): a mask is a ``bool`` tensor that is
``True`` where a position holds a real token (may be attended to) and ``False``
at padding. Padding is always on the right of each row.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Optional

import torch
from torch import Tensor


@dataclass
class Batch:
    """A padded batch of (possibly windowed) sentence pairs.

    ``src`` is the source window (context sentences, ``<brk>`` separators, the
    current sentence, ``</s>``). ``tgt_in``/``tgt_out`` are the teacher-forced
    decoder input (starting with ``<s>``) and the labels. For decoding,
    ``tgt_prefix`` holds forced decoder inputs (``<s>`` + target context, each
    sentence followed by ``<brk>``) and ``tgt_sentences`` the number of target
    sentences the window will hold once the current one is generated.
    ``src_index`` (scoring) lets several target rows share one source row:
    target row ``r`` is conditioned on ``src[src_index[r]]``, so each distinct
    source window is encoded once (contrastive candidates of one item).
    """

    src: Tensor                                  # (B, S) long
    tgt_in: Optional[Tensor] = None              # (B, T) long
    tgt_out: Optional[Tensor] = None             # (B, T) long
    tgt_prefix: Optional[Tensor] = None          # (B, P) long, for decoding
    tgt_sentences: Optional[Tensor] = None       # (B,) long, for decoding
    doc_ids: Optional[Tensor] = None             # (B,) long, document of each row
    ids: Optional[Tensor] = None                 # (B,) long, sentence/item index of each row
    src_index: Optional[Tensor] = None           # (B_tgt,) long, source row of each target row
    memory: Optional[list] = None                # caching: per row, cached context entries (M_i, C), oldest first

    def to(self, device: torch.device | str) -> "Batch":
        """Move every tensor field to ``device``."""
        moved = {f.name: getattr(self, f.name) for f in fields(self)}
        moved = {k: (v.to(device, non_blocking=True) if isinstance(v, Tensor) else v) for k, v in moved.items()}
        return Batch(**moved)

    @property
    def size(self) -> int:
        return self.src.size(0) if self.src_index is None else self.src_index.size(0)

    def target_tokens(self, pad_id: int) -> int:
        """Number of real target tokens (labels)."""
        return int((self.tgt_out != pad_id).sum()) if self.tgt_out is not None else 0


@dataclass
class EncoderOut:
    """Encoder states and their mask; ``extra`` carries family-specific tensors (batch-first)."""

    states: Tensor                               # (B, S, C)
    mask: Tensor                                 # (B, S) bool, True = real token
    shift: Tensor                                # (B,) long, segment shift used by the decoder
    extra: dict = field(default_factory=dict)


@dataclass
class DecoderState:
    """Everything incremental decoding needs; every tensor is batch-first so beam search can reorder it.

    ``pos``/``sent_idx`` are the token position and sentence index (number of
    ``<brk>`` seen) of the *next* input token; ``pending`` is that token.
    """

    self_k: list[Tensor]                         # per layer (B, H, T, D)
    self_v: list[Tensor]
    cross_k: list[Tensor]                        # per layer (B, H, S, D)
    cross_v: list[Tensor]
    self_mask: Tensor                            # (B, T) bool, valid cached positions
    enc_mask: Tensor                             # (B, S) bool
    pos: Tensor                                  # (B,) long
    sent_idx: Tensor                             # (B,) long
    n_sent: Tensor                               # (B,) long
    shift: Tensor                                # (B,) long
    pending: Tensor                              # (B,) long
    extra: dict = field(default_factory=dict)
    context_k: Optional[list[Tensor]] = None     # per layer (G, H, Mc, D): context attention (caching family)
    context_v: Optional[list[Tensor]] = None
    context_mask: Optional[Tensor] = None        # (G, Mc) bool
    context_group: Optional[Tensor] = None       # (B,) long: row -> context row (beams of a document share one)

    def index_select(self, index: Tensor) -> "DecoderState":
        """Rows ``index`` of every tensor (beam search reordering / expansion)."""
        pick = lambda t: t.index_select(0, index)  # noqa: E731
        return replace(
            self,
            self_k=[pick(t) for t in self.self_k], self_v=[pick(t) for t in self.self_v],
            cross_k=[pick(t) for t in self.cross_k], cross_v=[pick(t) for t in self.cross_v],
            self_mask=pick(self.self_mask), enc_mask=pick(self.enc_mask), pos=pick(self.pos),
            sent_idx=pick(self.sent_idx), n_sent=pick(self.n_sent), shift=pick(self.shift),
            pending=pick(self.pending),
            extra={k: (pick(v) if isinstance(v, Tensor) else v) for k, v in self.extra.items()},
            **self._select_context(index),
        )

    def _select_context(self, index: Tensor) -> dict:
        """Context rows are shared, not copied: rows map to context rows, which are compacted only when a
        document leaves the search (beam reordering inside a document copies nothing)."""
        if self.context_k is None:
            return {}
        group = self.context_group.index_select(0, index)                    # (B',)
        used, remapped = torch.unique(group, return_inverse=True)           # sorted context rows still in use
        if used.numel() == self.context_mask.size(0):
            return {"context_group": group}
        pick = lambda t: t.index_select(0, used)  # noqa: E731
        return {"context_k": [pick(t) for t in self.context_k], "context_v": [pick(t) for t in self.context_v],
                "context_mask": pick(self.context_mask), "context_group": remapped.reshape(-1)}

    def context_for_rows(self) -> tuple[Optional[list[Tensor]], Optional[list[Tensor]], Optional[Tensor], int]:
        """Context keys/values/mask laid out for the rows, and the fold factor f.

        f > 0: row r uses context row r // f (rows of a document adjacent, as beam search keeps them), so
        attention can fold the f rows into one query block; f = 0: rows were permuted, gather per row.
        """
        if self.context_k is None:
            return None, None, None, 1
        g, b = self.context_mask.size(0), self.context_group.numel()
        if b % g == 0 and torch.equal(self.context_group, torch.arange(g, device=self.context_group.device).repeat_interleave(b // g)):
            return self.context_k, self.context_v, self.context_mask, b // g
        pick = lambda t: t.index_select(0, self.context_group)  # noqa: E731
        return [pick(t) for t in self.context_k], [pick(t) for t in self.context_v], pick(self.context_mask), 1
