"""The recipe schema of the ``mbe`` family (Morishita et al. 2021). No torch."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from ctxmt_cli.config_base import MAX_BATCH_TOKENS, ModelBase


class MbeConfig(ModelBase):
    """Mini-batch Embedding (Morishita et al. 2021): a summary z of the sentences of one document group."""

    family: Literal["mbe"] = Field("mbe", description="the family this section configures")
    placement: Literal["encoder", "decoder", "both"] = Field(
        "encoder", description="where z is an extra input position (eq. 3): encoder, decoder or both")
    gate: bool = Field(True, description="z~ = P(same document | z) * z (eqs. 5-8); false = MBE w/o Gate")
    gate_classifier: Literal["linear", "mean_spread"] = Field(
        "linear", description="the gate's classifier: linear = softmax(W z), the paper's eq. 5 (it cannot tell "
        "same- from mixed-document groups: their mean z is the same in expectation); mean_spread = a small MLP over "
        "z and the spread (standard deviation) of the group's sentence vectors, which can")
    prefix_norm: bool = Field(False, description="the public code's LayerNorm over every input position of the side "
                              "z is placed on, z's and the tokens' (its doc-encoder/decoder-layer-norm; not in the "
                              "paper): it cancels the gate's scale alpha")
    classifier_weight: float = Field(1.0, ge=0.0, le=1000.0, description="lambda of eq. 7: L = L_NMT + lambda * L_MB")
    classifier_loss: Literal["per_sentence", "per_group"] = Field(
        "per_sentence", description="the classifier's loss per sentence, label-smoothed (the public code), or per "
        "group")
    classifier_label_smoothing: float = Field(0.1, ge=0.0, lt=1.0, description="per_sentence: label smoothing")
    mixed_groups: float = Field(
        0.5, ge=0.0, lt=1.0, description="gate: share of the training groups that mix documents (the paper's 'same "
        "ratio' of the two kinds of mini-batch: 1:1 = 0.5)")
    group_tokens: int = Field(3000, ge=8, le=MAX_BATCH_TOKENS, description="a training group's budget (padded "
                              "tokens); larger documents are length-sorted and split into several groups")
    summary_dropout: float | None = Field(None, ge=0.0, lt=1.0, description="dropout on z (default: dropout)")

    @model_validator(mode="after")
    def _check_mbe(self) -> MbeConfig:
        if not self.gate and self.gate_classifier != "linear":
            raise ValueError("gate_classifier is the gate's classifier; with gate: false there is none")
        if not self.gate and self.mixed_groups > 0 and "mixed_groups" in self.model_fields_set:
            raise ValueError("mixed_groups trains the gate's classifier; with gate: false there is none (set 0)")
        return self

