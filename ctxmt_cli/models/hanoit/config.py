"""The recipe schema of the ``hanoit`` family (Yang et al., HanoiT), monolingual and bilingual: its section joins
the recipe schema by its line in :mod:`ctxmt_cli.family_catalog`. No torch.

The bilingual options are ``None`` in a recipe that leaves them out; for a bilingual model the validator fills
in their defaults, for a monolingual one any of them given is an error (an option that would be silently
ignored). A resolved recipe therefore round-trips: what it dumps validates to the same config.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from ctxmt_cli.config_base import MAX_CONTEXT, MAX_LAYERS, ModelBase, TargetContextOptions

#: the bilingual options and the value each takes when a bilingual recipe leaves it out
BILINGUAL_DEFAULTS = {"target_context_from": "first_pass", "share_encoder": True, "gate": "vector", "gate_scale": 1.0,
                      "alpha": 0.5}
#: what a one-stream model over the target context (``context_side: target``) reads of them: where it comes from
ONE_STREAM_DEFAULTS = {"target_context_from": "first_pass"}


class HanoiTConfig(ModelBase, TargetContextOptions):
    """HanoiT (Yang et al.): N1 unified self-attention layers over [context; current], then N2 selection layers
    that drop the context tokens the current sentence attends to below its average (eqs. 4-7); ``bilingual``:
    a second stream [target context; current source] and a gated second cross-attention (§2.3, eqs. 8-13)."""

    family: Literal["hanoit"] = Field("hanoit", description="the family this section configures")
    src_context_sentences: int = Field(1, ge=0, le=MAX_CONTEXT, description="previous source sentences in the window")
    src_next_sentences: int = Field(1, ge=0, le=MAX_CONTEXT, description="next source sentences in the window (offline "
                                    "context, the paper's default; 0 = online)")
    unified_layers: int | None = Field(None, ge=0, le=MAX_LAYERS, description="N1, the bottom encoder layers that "
                                       "read every token (default: 1, or encoder_layers - selection_layers)")
    selection_layers: int | None = Field(None, ge=0, le=MAX_LAYERS, description="N2, the top encoder layers that each "
                                         "select context tokens for the layers above (default: encoder_layers - N1)")
    q: float = Field(0.2, gt=0.0, le=1.0, description="eq. 7: a context token stays when at least q * p of the p "
                     "current-sentence tokens attend to it at or above their average (the paper: 0.1-0.5, "
                     "best 0.1-0.3, Figure 5)")
    selection_queries: Literal["current", "context"] = Field(
        "current", description="eq. 6's i: the current sentence's tokens, as the text says ('how many words in the "
        "current sentence'), or the context tokens, the range [p+1, m] the equation prints (an open choice)")
    selection_eos: bool = Field(True, description="the current sentence's </s> counts among its p tokens: in eq. 5's "
                                "average and as a query of eq. 6 (the paper does not say; an open choice)")
    selection_drops: bool = Field(True, description="false: measure only, a diagnostic outside the paper: every "
                                  "selection layer computes eqs. 5-7 and logs the share of the context they would "
                                  "keep, but no token is dropped (the criterion without the feedback of the hard "
                                  "selection; each layer's share is of all context tokens, not compounded)")
    bilingual: bool = Field(False, description="§2.3: also read the target side of the same context sentences, "
                            "as a second stream [target context; current source] with its own cross-attention and "
                            "a gate (needs a joint vocabulary)")
    context_side: Literal["source", "target"] = Field(
        "source", description="the language of the one stream's context (bilingual: false): source (§2.2) | target, "
        "the target side of the same context sentences in place of the source side, the stream [target context; "
        "current source] (§3.5's 'target mono-lingual context'; needs a joint vocabulary); bilingual: true reads both")
    share_encoder: bool | None = Field(None, description="bilingual: the target stream goes through the same "
                                          "encoder (true, the paper's default) or an encoder of its own [default true]")
    gate: Literal["scalar", "vector"] | None = Field(
        None, description="bilingual, eq. 9: one gate value per decoder position (scalar) or one per channel "
        "(vector: W_s and U_t are d x d matrices, as the paper names them) [default vector]")
    gate_scale: float | None = Field(None, ge=0.0, le=1.0, description="bilingual, eq. 9: c, the gate's upper "
                                        "bound (0: the monolingual model; the paper gives no value) [default 1]")
    alpha: float | None = Field(None, ge=0.0, le=1.0, description="bilingual, eq. 13: L = alpha L_m + (1 - alpha) "
                                   "L_b, trained by dropping the target stream of each training row with "
                                   "probability alpha [default 0.5, the paper's]")

    @classmethod
    def fit_architecture(cls, section: dict) -> dict:
        """Another encoder depth (``train.init_from``): N1 kept (at most the depth), the other layers select."""
        layers, n1, n2 = section["encoder_layers"], section.get("unified_layers"), section.get("selection_layers")
        if n1 is not None and n2 is not None and n1 + n2 == layers:
            return section
        n1 = min(1 if n1 is None else n1, layers)
        return {**section, "unified_layers": n1, "selection_layers": layers - n1}

    @model_validator(mode="after")
    def _check_hanoit(self) -> HanoiTConfig:
        n1, n2, layers = self.unified_layers, self.selection_layers, self.encoder_layers
        for name, n in (("unified_layers", n1), ("selection_layers", n2)):
            if n is not None and n > layers:
                raise ValueError(f"{name} ({n}) exceeds encoder_layers ({layers}); the encoder is N1 unified "
                                 "layers, then N2 selection layers")
        if n1 is None:
            n1 = min(1, layers) if n2 is None else layers - n2
        if n2 is None:
            n2 = layers - n1
        if n1 + n2 != layers:
            raise ValueError(f"unified_layers ({n1}) + selection_layers ({n2}) must equal encoder_layers ({layers}): "
                             f"set encoder_layers: {n1 + n2}, or change N1 or N2")
        object.__setattr__(self, "unified_layers", n1)
        object.__setattr__(self, "selection_layers", n2)
        self._check_bilingual()
        return self

    @property
    def reads_target_context(self) -> bool:
        """The model reads the target side of its context sentences (bilingual, or context_side: target)."""
        return self.bilingual or self.context_side == "target"

    def _check_bilingual(self) -> None:
        """Refuse bilingual options on a model that does not read them; fill the defaults of those it reads (a
        target-context model reads only where its target context comes from)."""
        if self.bilingual and self.context_side == "target":
            raise ValueError("context_side: target is the one-stream model over the target context; bilingual: true "
                             "reads both sides: set one of them")
        reads = BILINGUAL_DEFAULTS if self.bilingual else ONE_STREAM_DEFAULTS if self.reads_target_context else {}
        readable = {*reads, "first_pass_stream"} if reads else set()
        refused = [k for k in (*BILINGUAL_DEFAULTS, "first_pass_stream") if getattr(self, k) is not None
                   and k not in readable]
        if refused:
            either = all(k in ONE_STREAM_DEFAULTS or k == "first_pass_stream" for k in refused)
            whom, fix = (("a model reading target context", "set bilingual: true or context_side: target") if either
                         else ("the bilingual model only", "set bilingual: true"))
            raise ValueError(f"{', '.join(refused)}: for {whom}; {fix}, or remove "
                             f"{'it' if len(refused) == 1 else 'them'}")
        if not reads:
            return
        if self.src_context_sentences + self.src_next_sentences == 0:
            raise ValueError(f"{'bilingual' if self.bilingual else 'context_side: target'} reads the target side of "
                             "the context sentences, but src_context_sentences and src_next_sentences are 0: set one "
                             "of them >= 1")
        for key, value in reads.items():
            if getattr(self, key) is None:
                object.__setattr__(self, key, value)
        self.fill_target_context(True, "")
