"""Sliding-window concatenation, sKtoK and sKto1.

Papers: Lupo, Dinarelli, Besacier (2022) "Focused Concatenation for Context-Aware
NMT" (context-discounted loss, segment-shifted positions) and Lupo, Dinarelli,
Besacier (2023) "Encoding Sentence Position in Context-Aware NMT with Concatenation"
(one-hot / sinusoidal / learned segment embeddings, persistent encodings, PSE).

The family is mostly data: windows of K sentences joined by ``<brk>`` (built in
``ctxmt_cli.data.windows``). An sKto1 model may also read next source sentences
(``src_next_sentences``, not in Lupo et al.; Yang et al.'s ECT baseline reads 1 previous + 1 next): the window is
[previous, next (nearest first), current], every family's layout, so segment codes count the next sentences
among the context ("from the right" = from the current sentence). A bilingual sKto1 window (``bilingual``, Yang et
al.'s bilingual ECT baseline) holds the target side of its context sentences too, before the source side
(:mod:`ctxmt_cli.models.bilingual_windows`); the model reads it as any window, one segment per sentence.
Hooks it overrides on the core: ``resolve`` (``shift: auto``), ``context_aware``, ``loss_terms`` (the context
discount), and the source/target :class:`PositionEncoding` modules and segment shift (``shift: auto | int |
per-window``) it passes to ``__init__``.
"""

from __future__ import annotations

from torch import Tensor

from ctxmt_cli.core.batch import Batch, LossTerm, ModelOutput, VocabInfo
from ctxmt_cli.core.model import EncoderDecoder
from ctxmt_cli.core.positions import current_sentence_mask
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.models.bilingual_windows import check_joint
from ctxmt_cli.models.concat.config import ConcatConfig, ShiftPair
from ctxmt_cli.models.concat.positions import SegmentPositionEncoding


class Concat(EncoderDecoder):
    """Encoder-decoder over concatenated windows with sentence position encodings."""

    context_aware = True
    loss_term_names = ("context_loss",)

    def __init__(self, cfg: ConcatConfig, vocab: VocabInfo):
        check_joint(cfg, vocab.joint)
        if cfg.shift == "auto":
            raise CtxmtError("model.shift is 'auto' but was not resolved from the prepared data's meta.json")
        d_se = cfg.pse.d_se if cfg.pse is not None else None
        per_window = cfg.shift == "per-window"
        if isinstance(cfg.shift, ShiftPair):
            shift = (cfg.shift.src, cfg.shift.tgt)
        elif isinstance(cfg.shift, int):
            shift = (cfg.shift, cfg.shift)
        else:
            shift = (0, 0)

        def positions(side: int, table=None) -> SegmentPositionEncoding:
            return SegmentPositionEncoding(cfg.d_model, cfg.segment, cfg.max_segments, d_se, cfg.persistent,
                                    shifted=per_window or shift[side] != 0, decoder=side == 1, table=table,
                                           layout=cfg.sinusoid)

        src_pos = positions(0)
        # one learned segment table for encoder and decoder, as the authors' code (Lupo et al. 2023)
        super().__init__(cfg, vocab, src_pos, positions(1, src_pos.table), shift, per_window)

    @classmethod
    def resolve(cls, cfg: ConcatConfig, meta: dict) -> ConcatConfig:
        """Replace ``shift: auto`` by the training corpus' mean sentence length per side (meta.json); refuse a
        bilingual model on data with separate vocabularies."""
        check_joint(cfg, meta.get("joint", True))
        if cfg.shift != "auto":
            return cfg
        mean = meta.get("mean_sentence_length") or {}
        if "src" not in mean or "tgt" not in mean:
            raise CtxmtError("shift: auto needs mean_sentence_length in the prepared data's meta.json; re-run ctxmt "
                             "prepare")
        return cfg.model_copy(update={"shift": ShiftPair(src=round(mean["src"]), tgt=round(mean["tgt"]))})

    def loss_terms(self, batch: Batch, token_loss: Tensor, output: ModelOutput) -> dict[str, LossTerm]:
        """The context discount (Lupo et al. 2022, eq. 2) as the term ``context_loss``.

        L = CD · L_context + L_current = L_window + (CD - 1) · L_context: the term sums the loss of the
        target context tokens (every token before the last ``<brk>``) with weight CD - 1, so CD = 1 adds
        nothing and the objective is exactly the plain window loss. ``cd_normalize: window_tokens`` (the
        authors' code) divides by the window's target tokens; ``weight_sum`` by Σ w, the term's weighted
        count joining the normaliser.
        """
        target = batch.tgt_out
        real = target != self.vocab.pad                                     # (B, T)
        context = real & ~current_sentence_mask(target, self.vocab.brk)      # (B, T)
        term = LossTerm((token_loss * context).sum(), context.sum().float(), weight=self.cfg.cd - 1.0,
                        normalizes=self.cfg.cd_normalize == "weight_sum")
        return {"context_loss": term}


#: tiny variants the contract suite checks (tests/unit/test_contract.py): name -> model-config overrides
VARIANTS: dict[str, dict] = {
    "s4to4": {},
    "s4to1": {"tgt_context_sentences": 0},
    "cd": {"cd": 0.01},
    "cd-weight-sum": {"cd": 0.2, "cd_normalize": "weight_sum"},
    "shift": {"shift": 5},
    "shift-auto": {"shift": "auto"},
    "shift-per-window": {"shift": "per-window"},
    "onehot": {"segment": "onehot"},
    "sinusoidal": {"segment": "sinusoidal"},
    "learned": {"segment": "learned"},
    "persistent": {"persistent": True},
    "persistent-shift": {"persistent": True, "shift": 3},
    "persistent-learned": {"segment": "learned", "persistent": True},
    "pse-learned": {"segment": "learned", "pse": {"d_se": 8}, "persistent": True},
    "pse-onehot": {"segment": "onehot", "pse": {"d_se": 8}},
    "post-norm": {"normalize_before": False, "shift": 2, "segment": "sinusoidal"},
    "next": {"src_context_sentences": 1, "src_next_sentences": 1, "tgt_context_sentences": 0, "segment": "learned"},
    "bilingual": {"src_context_sentences": 1, "src_next_sentences": 1, "tgt_context_sentences": 0, "bilingual": True,
                  "segment": "learned", "shift": 2},
}

#: Variants that, started from a sentence-level model of the same architecture (``train.init_from``), give its
#: logits exactly on a one-sentence window (no segment embedding; a shift moves context sentences only). The others
#: add a segment embedding to every position (onehot, sinusoidal, learned: a vector the sentence model never saw),
#: or replace its sinusoidal positions with a fresh learned table (``segment: learned``).
EXACT_FROM_SENTENCE = frozenset({"s4to4", "s4to1", "cd", "cd-weight-sum", "shift", "shift-auto", "shift-per-window"})
