"""Token and sentence positions in a window (Vaswani et al. 2017; Lupo et al. 2022).

A window holds n sentences separated by ``<brk>``. For every token we compute

* its sentence index from the left, ``idx`` = number of ``<brk>`` strictly before
  it (a ``<brk>`` belongs to the sentence it ends; the final ``</s>`` and the
  decoder's start token belong to the last / first sentence respectively);
* its segment ``k = n - idx`` counting right to left, ``k = 1`` for the current
  sentence (Lupo et al. 2023, §2.1);
* its position ``t + idx * shift`` (segment-shifted positions, Lupo et al. 2022,
  §3.2): the oldest sentence is unshifted, the current one shifted most.

:class:`PositionEncoding` turns positions into sinusoidal vectors; a plain sentence-level Transformer is the
special case shift = 0. Segment codes (added or concatenated, persistent) are the concat family's
(:mod:`ctxmt_cli.models.concat.positions`).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def sinusoid(positions: Tensor, dim: int, layout: str = "tensor2tensor") -> Tensor:
    """Sinusoidal codes of integer ``positions`` (...,) as (..., dim), sin and cos halves concatenated; frequencies
    10000^(-i/(half-1)) (``tensor2tensor``), or 10000^(-2i/dim) in float64 (``marian``: Marian's, HF
    MarianMTModel's)."""
    half, dtype = dim // 2, torch.float64 if layout == "marian" else torch.float32
    scale = math.log(10000.0) / (dim / 2 if layout == "marian" else max(half - 1, 1))
    inv_freq = torch.exp(torch.arange(half, device=positions.device, dtype=dtype) * -scale)
    angles = positions.to(dtype).unsqueeze(-1) * inv_freq                   # (..., half)
    out = torch.cat([angles.sin(), angles.cos()], dim=-1).float()
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
    """Sinusoidal token positions (Vaswani et al. 2017), added to the token embeddings. A family that also encodes
    which sentence a token is in subclasses it (concat: segment embeddings, PSE, persistent codes), declaring
    ``segment`` (the segment code it adds; None: positions alone) and ``persistent`` (codes re-added to every
    layer's input)."""

    segment: str | None = None
    persistent: bool = False

    def __init__(self, d_model: int, layout: str = "tensor2tensor"):
        super().__init__()
        self.d_model, self.layout = d_model, layout                        # layout: see sinusoid()
        self._first: Tensor | None = None                               # cached codes of 0..n-1, see first()

    def forward(self, positions: Tensor, seg: Tensor | None) -> Tensor:
        """Encoding (B, T, C) of ``positions`` (B, T); segments ``seg`` (B, T) are not read here."""
        return sinusoid(positions, self.d_model, self.layout)

    def first(self, length: int, device: torch.device) -> Tensor:
        """The codes of positions 0..length-1 without segments (1, length, C): what :meth:`forward` gives for a
        one-sentence row, read from a table made once per device (and grown when a row is longer), so a plain
        Transformer's forward pass computes no positions."""
        table = self._first
        if table is None or table.device != device or table.size(0) < length:
            n = max(length, 1024 if table is None or table.device != device else 2 * table.size(0))
            table = self._first = sinusoid(torch.arange(n, device=device), self.d_model, self.layout)   # (n, C)
        return table[:length].unsqueeze(0)

    def persisted(self, positions: Tensor, seg: Tensor | None, encoding: Tensor) -> Tensor | None:
        """What is re-added to the input of every layer after the first (B, T, C); None: nothing."""
        return None


def window_layout(
    tokens: Tensor, brk_id: int, shift: Tensor, n_sent: Tensor | None = None, start: int = 0,
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
