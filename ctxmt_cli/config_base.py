"""The recipe schema's base classes: a section, the architecture presets and the model fields every family shares.

Split from :mod:`ctxmt_cli.config` (which re-exports them) so a family's config class can live in a module of its
own (:mod:`ctxmt_cli.config_hanoit`). No torch here either.
"""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, model_validator

#: Architecture presets: (d_model, ffn_dim, heads, encoder_layers, decoder_layers).
PRESETS: dict[str, tuple[int, int, int, int, int]] = {
    "tiny": (128, 512, 4, 2, 2),
    "small": (256, 1024, 4, 3, 3),
    "base": (512, 2048, 8, 6, 6),
    "big": (1024, 4096, 16, 6, 6),
}


class Section(BaseModel):
    """Base of every recipe section: unknown keys are errors, values are re-validated on assignment."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class ModelBase(Section):
    """Transformer dimensions shared by every family; ``preset`` fills the ones left unset."""

    preset: Optional[Literal["tiny", "small", "base", "big"]] = "small"
    d_model: Optional[int] = Field(None, ge=8)
    ffn_dim: Optional[int] = Field(None, ge=8)
    heads: Optional[int] = Field(None, ge=1)
    encoder_layers: Optional[int] = Field(None, ge=1)
    decoder_layers: Optional[int] = Field(None, ge=1)
    dropout: float = Field(0.1, ge=0.0, lt=1.0)
    attention_dropout: float = Field(0.0, ge=0.0, lt=1.0)
    activation_dropout: float = Field(0.0, ge=0.0, lt=1.0)
    normalize_before: bool = Field(True, description="pre-norm (true) or post-norm as in Vaswani et al. (false)")
    share_embeddings: Literal["auto", "all", "decoder", "none"] = Field(
        "auto", description="auto: tie all three when the vocabulary is joint, else decoder in/out"
    )
    max_positions: int = Field(1024, ge=16)

    @model_validator(mode="after")
    def _fill_preset(self) -> "ModelBase":
        if self.preset is not None:
            d, f, h, e, dl = PRESETS[self.preset]
            for key, value in (("d_model", d), ("ffn_dim", f), ("heads", h), ("encoder_layers", e), ("decoder_layers", dl)):
                if getattr(self, key) is None:
                    object.__setattr__(self, key, value)
        missing = [k for k in ("d_model", "ffn_dim", "heads", "encoder_layers", "decoder_layers") if getattr(self, k) is None]
        if missing:
            raise ValueError(f"set a preset or give {', '.join(missing)}")
        if self.d_model % self.heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by heads ({self.heads})")
        return self

    src_context_sentences: Literal[0] = Field(0, description="previous source sentences the model reads (none here)")
    tgt_context_sentences: Literal[0] = Field(0, description="previous target sentences the model reads (none here)")
    src_next_sentences: Literal[0] = Field(0, description="next source sentences the model reads (none here)")
