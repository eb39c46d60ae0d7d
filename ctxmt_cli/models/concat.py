"""Sliding-window concatenation, sKtoK and sKto1.

Papers: Lupo, Dinarelli, Besacier (2022) "Focused Concatenation for Context-Aware
NMT" (seed 001: context-discounted loss, segment-shifted positions) and (2023)
"Encoding Sentence Position in Context-Aware NMT with Concatenation" (seed 000:
one-hot / sinusoidal / learned segment embeddings, persistent encodings, PSE).

The family is mostly data: windows of K sentences joined by ``<brk>`` (built in
``ctxmt_cli.data.windows``) and the context discount (``ctxmt_cli.train.losses``).
Hooks it sets on the core: the source/target :class:`PositionEncoding` modules
and the segment shift (``shift: auto | int | per-window``).
"""

from __future__ import annotations

from ctxmt_cli.config import ConcatConfig, ShiftPair
from ctxmt_cli.core.model import EncoderDecoder, VocabInfo
from ctxmt_cli.core.positions import PositionEncoding
from ctxmt_cli.errors import CtxmtError


class Concat(EncoderDecoder):
    """Encoder-decoder over concatenated windows with sentence position encodings."""

    context_aware = True

    def __init__(self, cfg: ConcatConfig, vocab: VocabInfo):
        if cfg.shift == "auto":
            raise CtxmtError("model.shift is 'auto' but was not resolved from the prepared data's meta.json")
        d_se = cfg.pse.d_se if cfg.pse is not None else None

        def positions() -> PositionEncoding:
            return PositionEncoding(cfg.d_model, cfg.segment, cfg.max_segments, d_se, cfg.persistent)

        per_window = cfg.shift == "per-window"
        if isinstance(cfg.shift, ShiftPair):
            shift = (cfg.shift.src, cfg.shift.tgt)
        elif isinstance(cfg.shift, int):
            shift = (cfg.shift, cfg.shift)
        else:
            shift = (0, 0)
        super().__init__(cfg, vocab, positions(), positions(), shift, per_window)

    @staticmethod
    def resolve(cfg: ConcatConfig, meta: dict) -> ConcatConfig:
        """Replace ``shift: auto`` by the training corpus' mean sentence length per side (meta.json)."""
        if cfg.shift != "auto":
            return cfg
        mean = meta.get("mean_sentence_length") or {}
        if "src" not in mean or "tgt" not in mean:
            raise CtxmtError("shift: auto needs mean_sentence_length in the prepared data's meta.json; re-run ctxmt prepare")
        return cfg.model_copy(update={"shift": ShiftPair(src=round(mean["src"]), tgt=round(mean["tgt"]))})
