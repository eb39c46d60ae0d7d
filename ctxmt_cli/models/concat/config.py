"""The recipe schema of the ``concat`` family (Lupo et al. 2022, 2023). No torch."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from ctxmt_cli.config_base import MAX_CONTEXT, MAX_POSITIONS, MAX_WIDTH, ModelBase, Section, TargetContextOptions


class ShiftPair(Section):
    """A resolved segment shift per side (``shift: auto`` becomes one of these)."""

    src: int = Field(ge=0, le=MAX_POSITIONS, description="position shift per sentence of the source window")
    tgt: int = Field(ge=0, le=MAX_POSITIONS, description="position shift per sentence of the target window")


class PSEConfig(Section):
    """Position-segment embedding: concatenate a (d_model - d_se) position code with a d_se segment code."""

    d_se: int = Field(ge=1, le=MAX_WIDTH, description="width of the segment code (smaller than d_model)")


#: one shift for both sides, in tokens per sentence
_Shift = Annotated[int, Field(ge=0, le=MAX_POSITIONS)]


class ConcatConfig(ModelBase, TargetContextOptions):
    """Sliding-window concatenation sKtoK / sKto1 (Lupo et al. 2022, 2023)."""

    family: Literal["concat"] = Field("concat", description="the family this section configures")
    src_context_sentences: int = Field(3, ge=0, le=MAX_CONTEXT,
                                       description="previous source sentences in the window (K-1)")
    tgt_context_sentences: int = Field(3, ge=0, le=MAX_CONTEXT, description="previous target sentences (0 = sKto1)")
    src_next_sentences: int = Field(0, ge=0, le=MAX_CONTEXT, description="next source sentences in the window, after "
                                    "the previous ones and before the current one (sKto1 only; Yang et al. give "
                                    "their ECT baseline 1 previous + 1 next)")
    cd: float = Field(1.0, ge=0.0, le=1.0, description="context discount: L = cd * L_context + L_current")
    cd_normalize: Literal["window_tokens", "weight_sum"] = Field(
        "window_tokens", description="the discounted loss's divisor: the window's target tokens (the authors' code) "
        "or the sum of the token weights")
    shift: None | Literal["auto", "per-window"] | _Shift | ShiftPair = Field(
        None, description="segment-shifted positions: auto (mean sentence length), an int, per-window"
    )
    segment: Literal["onehot", "sinusoidal", "learned"] | None = Field(
        None, description="segment embedding added to the positions (sentence index from the right; none by default)")
    persistent: bool = Field(False, description="add the position/segment encodings to every layer's input")
    pse: PSEConfig | None = Field(None, description="position-segment embedding: positions and segments "
                                                     "concatenated instead of added")
    context_order: Literal["previous", "random"] = Field(
        "previous", description="training windows' context: the previous sentences, or sentences drawn at random "
        "from the same document, re-drawn each epoch (Morishita et al. 2021, footnote 3: for corpora whose "
        "in-document order is lost); validation, translation and scoring use the previous sentences")
    bilingual: bool = Field(False, description="sKto1 only: the source window also holds the target side of its "
                            "context sentences, [target context; source context; current], from a first pass when "
                            "translating (Yang et al.'s bilingual ECT baseline, Table 2; needs a joint vocabulary)")

    @model_validator(mode="after")
    def _check_concat(self) -> ConcatConfig:
        if self.pse is not None:
            if self.segment is None:
                raise ValueError("pse needs a segment encoding: set segment to onehot, sinusoidal or learned")
            if self.pse.d_se >= self.d_model:
                raise ValueError(f"pse.d_se ({self.pse.d_se}) must be smaller than d_model ({self.d_model})")
            if self.segment == "onehot" and self.pse.d_se < self.max_segments:
                raise ValueError(f"onehot pse needs d_se >= {self.max_segments} (sentences per window)")
        if self.cd < 1.0 and self.tgt_context_sentences == 0:
            raise ValueError("cd < 1 discounts target context, but tgt_context_sentences is 0")
        if self.shift is not None and isinstance(self.shift, int) and self.shift < 0:
            raise ValueError("shift must be >= 0")
        if self.src_next_sentences and self.tgt_context_sentences:
            raise ValueError("src_next_sentences: the target windows hold previous sentences only, so a model reading "
                             "next source sentences translates sKto1: set tgt_context_sentences to 0")
        self._check_bilingual()
        if self.context_order == "random" and self.max_segments == 1:
            raise ValueError("context_order: random draws context sentences, but src_context_sentences and "
                             "tgt_context_sentences are 0: set one of them >= 1 (or context_order: previous)")
        return self

    def _check_bilingual(self) -> None:
        """A bilingual window is sKto1 over previous (and next) sentences; fill where its target context comes
        from; refuse the target-context options on a model that reads none."""
        self.fill_target_context(self.bilingual, "set bilingual: true")
        if not self.bilingual:
            return
        if self.tgt_context_sentences:
            raise ValueError("bilingual puts the target context in the source window (sKto1): set "
                             "tgt_context_sentences to 0")
        if self.src_context_sentences + self.src_next_sentences == 0:
            raise ValueError("bilingual reads the target side of the context sentences, but src_context_sentences "
                             "and src_next_sentences are 0: set one of them >= 1")
        if self.context_order == "random":
            raise ValueError("bilingual reads the target side of the previous sentences; context_order: random "
                             "is not supported with it: set context_order: previous")

    @property
    def max_segments(self) -> int:
        """Number of sentences in the longest window (segment index range); a bilingual window holds each context
        sentence twice, once per side."""
        src_context = (self.src_context_sentences + self.src_next_sentences) * (2 if self.bilingual else 1)
        return max(src_context, self.tgt_context_sentences) + 1

