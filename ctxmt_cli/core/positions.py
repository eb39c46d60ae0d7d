"""Token and sentence position encodings (Vaswani et al. 2017; Lupo et al. 2022, 2023).

A window holds n sentences separated by ``<brk>``. For every token we compute

* its sentence index from the left, ``idx`` = number of ``<brk>`` strictly before
  it (a ``<brk>`` belongs to the sentence it ends; the final ``</s>`` and the
  decoder's start token belong to the last / first sentence respectively);
* its segment ``k = n - idx`` counting right to left, ``k = 1`` for the current
  sentence (Lupo et al. 2023, §2.1);
* its position ``t + idx * shift`` (segment-shifted positions, Lupo et al. 2022,
  §3.2): the oldest sentence is unshifted, the current one shifted most.

:class:`PositionEncoding` turns (position, segment) into vectors: sinusoidal
positions, plus an added segment embedding (``onehot | sinusoidal | learned``),
or the two concatenated (PSE, Lupo et al. 2023, §2.3). A plain sentence-level
Transformer is the special case shift = 0, no segments.

Two details follow the authors' code (github.com/lorelupo/focused-concat): the
decoder's start token takes the *current* sentence's segment (k = 1) while its
position stays 0 (``decoder=True``), and learned segment embeddings are one
table shared by encoder and decoder, initialised N(0, 1) (``table``).
"""

from __future__ import annotations

import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def sinusoid(positions: Tensor, dim: int) -> Tensor:
    """Sinusoidal codes of integer ``positions`` (...,) as (..., dim), sin and cos halves concatenated."""
    half = dim // 2
    scale = math.log(10000.0) / max(half - 1, 1)
    inv_freq = torch.exp(torch.arange(half, device=positions.device, dtype=torch.float32) * -scale)
    angles = positions.float().unsqueeze(-1) * inv_freq                     # (..., half)
    out = torch.cat([angles.sin(), angles.cos()], dim=-1)
    return F.pad(out, (0, dim - 2 * half))                                  # odd dims: one zero column


def sentence_index(tokens: Tensor, brk_id: int) -> tuple[Tensor, Tensor]:
    """Per-token sentence index from the left (B, T) and sentences per row (B,)."""
    is_brk = (tokens == brk_id).long()
    idx = is_brk.cumsum(dim=1) - is_brk                                     # (B, T) brk strictly before
    return idx, is_brk.sum(dim=1) + 1


def current_sentence_mask(tokens: Tensor, brk_id: int) -> Tensor:
    """True for tokens of the last sentence of each row (the ``current`` sentence, final ``</s>`` included)."""
    idx, n = sentence_index(tokens, brk_id)
    return idx == (n - 1).unsqueeze(1)


class PositionEncoding(nn.Module):
    """(position, segment) → vector, added to token embeddings (and, if persistent, partly to every layer's input).

    ``shifted``: the positions are segment-shifted, so they encode sentence position too (and persist).
    ``decoder``: position 0 is the decoder's start token, which takes the current sentence's segment k = 1.
    ``table``: the learned segment embedding to use (shared by encoder and decoder); by default a new one.
    """

    def __init__(
        self, d_model: int, segment: Optional[str] = None, max_segments: int = 1,
        d_se: Optional[int] = None, persistent: bool = False, shifted: bool = False, decoder: bool = False,
        table: Optional[nn.Embedding] = None,
    ):
        super().__init__()
        self.d_model, self.segment, self.max_segments = d_model, segment, max_segments
        self.d_se, self.persistent, self.shifted, self.decoder = d_se, persistent, shifted, decoder
        seg_dim = d_se if d_se is not None else d_model
        self.seg_dim = seg_dim
        # k runs 1..max_segments; longer windows at inference reuse the last code.
        self.table = None
        self._first: Optional[Tensor] = None                               # cached codes of 0..n-1, see first()
        if segment == "learned":
            self.table = table if table is not None else self.learned_table(max_segments, seg_dim)

    @staticmethod
    def learned_table(max_segments: int, seg_dim: int) -> nn.Embedding:
        """A learned segment table for k = 1..max_segments (row 0 unused), N(0, 1) as ``nn.Embedding`` in the
        authors' code: the same scale as the sinusoidal positions and the scaled token embeddings."""
        table = nn.Embedding(max_segments + 1, seg_dim)
        nn.init.normal_(table.weight, 0.0, 1.0)
        return table

    def segment_codes(self, seg: Tensor) -> Tensor:
        """Segment embedding (B, T, seg_dim) of segment indices ``seg`` (B, T), k >= 1."""
        k = seg.clamp(1, self.max_segments)
        if self.segment == "learned":
            return self.table(k)
        if self.segment == "onehot":
            return F.one_hot((k - 1).clamp(max=self.seg_dim - 1), self.seg_dim).float()
        return sinusoid(k, self.seg_dim)

    def segments(self, positions: Tensor, seg: Tensor) -> Tensor:
        """The segments (B, T) the encoding uses: ``seg``, except the decoder's start token (position 0) gets k = 1."""
        return seg.masked_fill(positions == 0, 1) if self.decoder else seg

    def forward(self, positions: Tensor, seg: Optional[Tensor]) -> Tensor:
        """Encoding (B, T, C) of ``positions`` (B, T) and segments ``seg`` (B, T) or None."""
        if self.segment is None or seg is None:
            return sinusoid(positions, self.d_model)
        codes = self.segment_codes(self.segments(positions, seg))              # (B, T, seg_dim)
        if self.d_se is not None:  # PSE: [PE_t (d_model - d_se), SE_k (d_se)]
            return torch.cat([sinusoid(positions, self.d_model - self.d_se), codes], dim=-1)
        return sinusoid(positions, self.d_model) + codes

    def first(self, length: int, device: torch.device) -> Tensor:
        """The codes of positions 0..length-1 without segments (1, length, C): what :meth:`forward` gives for a
        one-sentence row, read from a table made once per device (and grown when a row is longer), so a plain
        Transformer's forward pass computes no positions."""
        table = self._first
        if table is None or table.device != device or table.size(0) < length:
            n = max(length, 1024 if table is None or table.device != device else 2 * table.size(0))
            table = self._first = sinusoid(torch.arange(n, device=device), self.d_model)   # (n, C)
        return table[:length].unsqueeze(0)

    def persisted(self, positions: Tensor, seg: Optional[Tensor], encoding: Tensor) -> Optional[Tensor]:
        """What is re-added to the input of every layer after the first (B, T, C); None when not persistent.

        Lupo et al. (2023, §2.2) persist the *sentence position* encoding: PSE as a whole; an added segment
        embedding alone (token positions are added once, at the input), unless the positions are
        segment-shifted, which encode sentence position themselves; and, with no segment embedding, the
        positions (shifted or not: their Table 9 row "s4to4 + pers"). ``encoding`` is :meth:`forward`'s output.
        """
        if not self.persistent:
            return None
        if self.segment is None or seg is None or self.d_se is not None or self.shifted:
            return encoding
        codes = self.segment_codes(self.segments(positions, seg))              # (B, T, C)
        return codes.to(encoding.dtype)


def window_layout(
    tokens: Tensor, brk_id: int, shift: Tensor, n_sent: Optional[Tensor] = None, start: int = 0,
) -> tuple[Tensor, Tensor, Tensor]:
    """Positions (B, T), segments k (B, T) and sentence counts (B,) of windows ``tokens`` (B, T).

    ``shift`` (B,) is the per-row segment shift; ``n_sent`` overrides the number
    of sentences (decoding, where the window is not complete yet); ``start`` is
    the position of column 0.
    """
    idx, n_found = sentence_index(tokens, brk_id)
    n = n_found if n_sent is None else n_sent
    t = torch.arange(start, start + tokens.size(1), device=tokens.device).unsqueeze(0)
    positions = t + idx * shift.unsqueeze(1)                               # (B, T)
    seg = (n.unsqueeze(1) - idx).clamp(min=1)                              # (B, T), 1 = current
    return positions, seg, n
