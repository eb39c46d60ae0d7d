"""Sentence codes of the concat family's windows (Lupo et al. 2022, 2023): the token positions of
:class:`~ctxmt_cli.core.positions.PositionEncoding`, plus an added segment embedding (``onehot | sinusoidal |
learned``), or the two concatenated (PSE, Lupo et al. 2023, §2.3), optionally re-added to every layer's input
(persistent, §2.2). Segments count right to left, k = 1 for the current sentence (:func:`window_layout`).

Two details follow the authors' code (github.com/lorelupo/focused-concat): the decoder's start token takes the
*current* sentence's segment (k = 1) while its position stays 0 (``decoder=True``), and learned segment
embeddings are one table shared by encoder and decoder, initialised N(0, 1) (``table``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ctxmt_cli.core.positions import PositionEncoding, sinusoid


class SegmentPositionEncoding(PositionEncoding):
    """(position, segment) → vector, added to token embeddings (and, if persistent, partly to every layer's input).

    ``shifted``: the positions are segment-shifted, so they encode sentence position too (and persist).
    ``decoder``: position 0 is the decoder's start token, which takes the current sentence's segment k = 1.
    ``table``: the learned segment embedding to use (shared by encoder and decoder); by default a new one.
    """

    def __init__(
        self, d_model: int, segment: str | None = None, max_segments: int = 1,
        d_se: int | None = None, persistent: bool = False, shifted: bool = False, decoder: bool = False,
        table: nn.Embedding | None = None, layout: str = "tensor2tensor",
    ):
        super().__init__(d_model, layout)
        self.segment, self.max_segments = segment, max_segments
        self.d_se, self.persistent, self.shifted, self.decoder = d_se, persistent, shifted, decoder
        seg_dim = d_se if d_se is not None else d_model
        self.seg_dim = seg_dim
        # k runs 1..max_segments; longer windows at inference reuse the last code.
        self.table = None
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

    def forward(self, positions: Tensor, seg: Tensor | None) -> Tensor:
        """Encoding (B, T, C) of ``positions`` (B, T) and segments ``seg`` (B, T) or None."""
        if self.segment is None or seg is None:
            return sinusoid(positions, self.d_model, self.layout)
        codes = self.segment_codes(self.segments(positions, seg))              # (B, T, seg_dim)
        if self.d_se is not None:  # PSE: [PE_t (d_model - d_se), SE_k (d_se)]
            return torch.cat([sinusoid(positions, self.d_model - self.d_se, self.layout), codes], dim=-1)
        return sinusoid(positions, self.d_model, self.layout) + codes

    def persisted(self, positions: Tensor, seg: Tensor | None, encoding: Tensor) -> Tensor | None:
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
