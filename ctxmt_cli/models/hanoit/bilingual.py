"""The bilingual HanoiT's parts (Yang et al., §2.3-2.4): the gate of eqs. 9-10 and the target stream's input.

The model (:class:`~ctxmt_cli.models.hanoit.HanoiT` with ``bilingual: true``) encodes a second row per sentence,
the target concatenation ``[target context; current source]`` (:class:`TargetConcatRows`, the batch's extras),
through the same encoder (or one of its own, ``share_encoder: false``) with the same selection, and hands its
selected states to the
decoder as the core's context memory (``EncoderOut.context``): each decoder layer has a second cross-attention
over it, parallel to the first, with its own parameters, and :class:`ContextGate` joins the two outputs instead
of adding them. The memory's keys and values are computed once per sentence and live in the decoder state, so
incremental decoding equals the full pass. A row whose target concatenation is empty (all padding, or a batch
without :class:`TargetConcatRows`) has an empty memory and γ = 0: it is read exactly as by the monolingual
model (the L_m rows of eq. 13, see :mod:`ctxmt_cli.data.target_concat`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ctxmt_cli.core.batch import Batch, Extras, Memory
from ctxmt_cli.core.linear import Linear
from ctxmt_cli.data.batching import pad_rows

#: segment rows of the target context (eq. 2): previous and next, after the monolingual model's three
TARGET_PREVIOUS, TARGET_NEXT = 3, 4


@dataclass
class TargetConcatRows(Extras):
    """``Batch.extras`` of a bilingual hanoit batch: each source row's target concatenation (the target side of its
    context sentences laid out as the source window: previous oldest first, next nearest first, each followed by
    ``<brk>``; then the current *source* sentence and ``</s>``) and how many of its context sentences are next
    ones (truncation can make that differ from ``Batch.src_next``). A row of padding only reads no target context
    (the monolingual rows of training)."""

    tokens: Tensor                               # (B, S2) long
    next_sentences: Tensor                       # (B,) long

    @classmethod
    def of(cls, rows: Sequence[tuple[Sequence[int], int]], pad: int) -> TargetConcatRows | None:
        """The extras of (row, next sentences) pairs, an empty row one of padding; None when no row has any."""
        if not any(len(row) for row, _ in rows):
            return None
        return cls(pad_rows([row for row, _ in rows], pad), torch.tensor([m for _, m in rows], dtype=torch.long))


def target_concat_of(batch: Batch) -> TargetConcatRows | None:
    """The batch's target concatenations, or None (no row reads target context)."""
    return batch.extras if isinstance(batch.extras, TargetConcatRows) else None


class ContextGate(nn.Module):
    """Eqs. 9-10: γ = c·σ(W_s z^s + U_t z^t + b), z = (1 − γ)·z^s + γ·z^t, per decoder position.

    ``z^s`` / ``z^t``: the outputs of the source and target cross-attention of one decoder layer (after their
    output projections, before the residual). ``kind`` ``vector``: W_s and U_t are d x d (one γ per channel, as
    the paper calls them matrices); ``scalar``: d x 1 (one γ per position). ``scale`` is c ∈ [0, 1]: c = 0
    gives z = z^s exactly.
    """

    def __init__(self, d_model: int, kind: str, scale: float):
        super().__init__()
        width = d_model if kind == "vector" else 1
        self.source = Linear(d_model, width)                     # W_s and the bias b
        self.target = Linear(d_model, width, bias=False)         # U_t
        self.scale = scale

    def gamma(self, zs: Tensor, zt: Tensor, on: Tensor) -> Tensor:
        """γ (B, T, 1) or (B, T, C) of eq. 9 for ``zs``, ``zt`` (B, T, C); 0 on the rows ``on`` (B,) leaves out."""
        g = self.scale * torch.sigmoid(self.source(zs) + self.target(zt))   # (B, T, width)
        return g * on.to(g.dtype)[:, None, None]

    def forward(self, zs: Tensor, zt: Tensor, on: Tensor) -> Tensor:
        """z of eq. 10, (B, T, C)."""
        g = self.gamma(zs, zt, on)
        return (1 - g) * zs + g * zt


def stream_input(tgt_concat: Tensor | None, batch_size: int, pad: int, eos: int,
                 device: torch.device) -> tuple[Tensor, Tensor]:
    """(rows to encode (B, S2), rows with a target concatenation (B,) bool) of ``tgt_concat`` (B, S2). An empty
    row becomes a lone ``</s>`` (finite states, masked out afterwards); no ``tgt_concat`` at all: every row is one."""
    if tgt_concat is None:
        return torch.full((batch_size, 1), eos, dtype=torch.long, device=device), \
            torch.zeros(batch_size, dtype=torch.bool, device=device)
    on = tgt_concat[:, 0] != pad                                            # (B,)
    rows = tgt_concat.clone()
    rows[:, 0] = torch.where(on, rows[:, 0], torch.full_like(rows[:, 0], eos))
    return rows, on


def target_segments(seg: Tensor, current: int) -> Tensor:
    """The target stream's segment rows (B, S2) from the monolingual layout's: previous and next context move to
    :data:`TARGET_PREVIOUS` and :data:`TARGET_NEXT` (rows 1, 2 -> 3, 4), the current source sentence stays."""
    return torch.where(seg == current, seg, seg + (TARGET_PREVIOUS - 1))


def memory_of(states: Tensor, mask: Tensor, on: Tensor) -> Memory:
    """The decoder's context memory: the target stream's selected states (B, S2, C), masked to the rows ``on``."""
    return Memory(states, mask & on[:, None])
