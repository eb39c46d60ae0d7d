"""The recipe schema of the ``caching`` family (sequence shortening, 2023). No torch."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from ctxmt_cli.config_base import MAX_CONTEXT, MAX_HIDDEN, MAX_POSITIONS, ModelBase, TargetContextOptions

#: the reprs that cache one aggregate per sentence (or a shortened sequence)
AGGREGATING = ("sentence", "pooling", "grouping", "selecting")
#: the reprs with a shortening module (eq. 1-4, then eq. 2)
SHORTENING = ("pooling", "grouping", "selecting")


class CachingConfig(ModelBase, TargetContextOptions):
    """Caching multi-encoder with sequence shortening ("Sequence Shortening for Context-Aware MT", 2023).

    ``encoder: separate`` with ``repr: tokens`` and ``integration: concat`` is the paper's multi-encoder baseline.
    """

    family: Literal["caching"] = Field("caching", description="the family this section configures")
    src_context_sentences: int = Field(1, ge=0, le=MAX_CONTEXT, description="previous source sentences used as context")
    repr: Literal["tokens", "sentence", "pooling", "grouping", "selecting"] = Field(
        "tokens", description="what is cached per sentence: every token, the mean, or a shortened sequence")
    pooling: Literal["max", "avg", "linear"] | None = Field(None, description="repr: pooling only")
    pool_size: int = Field(2, ge=1, le=MAX_POSITIONS, description="pooling: tokens per pooled group (k)")
    groups: int | None = Field(None, ge=1, le=MAX_POSITIONS, description="grouping/selecting: number of groups (K)")
    normalizer: Literal["softmax", "sparsemax"] = Field(
        "sparsemax", description="grouping/selecting: how token scores become group weights")
    categorizer_hidden: int = Field(512, ge=1, le=MAX_HIDDEN,
                                    description="grouping/selecting: hidden units of the categorising FFN")
    include_current: bool | None = Field(
        None, description="add the current sentence's own representation to the context (default: aggregating reprs)")
    integration: Literal["sequential", "parallel", "concat"] = Field(
        "sequential", description="context attention after cross-attention, beside it, or context joined to the "
        "encoder output")
    gate: bool = Field(False, description="sigmoid gate on the context-attention branch (eq. 5)")
    encoder: Literal["shared", "separate"] = Field(
        "shared", description="separate = unshared context encoder (multi-encoder)")
    grad_context_sentences: int = Field(
        0, ge=0, le=MAX_CONTEXT, description="nearest context sentences whose *encoder* pass gets gradient; 0 (the "
        "paper's code): every context sentence is encoded without autograd, the encoder learns from the current "
        "sentence only")
    shortening_grad_context_sentences: int | None = Field(
        None, ge=0, le=MAX_CONTEXT, description="pooling/grouping/selecting: nearest context sentences whose "
        "shortening gets gradient, detached beyond (the paper: 2 for grouping, 1 for selecting); null = every context "
        "sentence")
    shortening_dropout: float = Field(
        0.0, ge=0.0, lt=1.0, description="dropout on the attention branch of eq. 2 (the paper's code has none)")
    segment_embeddings: bool = Field(True, description="learned embedding of each context sentence's slot")
    context_positions: bool = Field(True, description="learned positions of the tokens inside each context sentence")
    bilingual: bool = Field(False, description="the target side of the same context sentences is cached too, each "
                            "sentence in a slot of its own beyond the source side's (Yang et al.'s bilingual Dual "
                            "Encoder baseline, Table 2), from a first pass when translating; documents are then "
                            "translated window by window, not from a memory (needs a joint vocabulary)")

    @property
    def context_slots(self) -> int:
        """Context sentences a window holds at most: the source side's, and as many target ones when bilingual."""
        return self.src_context_sentences * (2 if self.bilingual else 1)

    @property
    def current_in_context(self) -> bool:
        """Whether the current sentence's own representation joins the context."""
        return self.repr in AGGREGATING if self.include_current is None else self.include_current

    @model_validator(mode="after")
    def _check_caching(self) -> CachingConfig:
        if (self.repr == "pooling") != (self.pooling is not None):
            raise ValueError("repr: pooling needs pooling: max | avg | linear (and pooling is only for repr: pooling)")
        if (self.repr in ("grouping", "selecting")) != (self.groups is not None):
            raise ValueError(f"repr: {self.repr} {'needs' if self.groups is None else 'does not use'} groups "
                             "(the number of groups K, only for grouping/selecting)")
        if self.integration == "concat" and self.gate:
            raise ValueError("gate applies to a context-attention branch; integration: concat has none")
        self.fill_target_context(self.bilingual, "set bilingual: true")
        if self.bilingual and self.src_context_sentences == 0:
            raise ValueError("bilingual caches the target side of the context sentences, but src_context_sentences "
                             "is 0: set it >= 1")
        self._check_gradient()
        return self

    def _check_gradient(self) -> None:
        """Cross-field checks of the two gradient-blocking options."""
        n_enc, n_short = self.grad_context_sentences, self.shortening_grad_context_sentences
        if self.encoder == "separate" and n_enc == 0 and not self.current_in_context:
            raise ValueError("the separate context encoder would never get a gradient: set "
                             "grad_context_sentences >= 1 (or include_current: true)")
        for name, n in (("grad_context_sentences", n_enc), ("shortening_grad_context_sentences", n_short)):
            if n is not None and n > self.context_slots:
                raise ValueError(f"{name} ({n}) exceeds the context sentences a window holds ({self.context_slots}: "
                                 "src_context_sentences, twice with bilingual)")
        if n_short is not None and self.repr not in SHORTENING:
            raise ValueError(f"shortening_grad_context_sentences applies to repr {' | '.join(SHORTENING)} (a "
                             f"shortening module); repr: {self.repr} has none: set it to null")
        if n_short is not None and n_enc > n_short:
            raise ValueError(f"grad_context_sentences ({n_enc}) exceeds shortening_grad_context_sentences "
                             f"({n_short}): a detached entry passes no gradient back to the encoder")
        if self.shortening_dropout > 0 and self.repr not in SHORTENING:
            raise ValueError(f"shortening_dropout applies to repr {' | '.join(SHORTENING)} (eq. 2); "
                             f"repr: {self.repr} has no eq. 2: set it to 0")

