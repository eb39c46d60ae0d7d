"""The recipe schema's base classes: a section, the architecture presets and the model fields every family shares.

Split from :mod:`ctxmt_cli.config` (which re-exports them) so a family's config class can live in a module of its
own (:mod:`ctxmt_cli.models.hanoit.config`). No torch here either.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

#: stream name of ``ctxmt first-pass`` when none is given (``--name``)
FIRST_PASS_STREAM = "first-pass"
#: Architecture presets: (d_model, ffn_dim, heads, encoder_layers, decoder_layers).
PRESETS: dict[str, tuple[int, int, int, int, int]] = {
    "tiny": (128, 512, 4, 2, 2),
    "small": (256, 1024, 4, 3, 3),
    "base": (512, 2048, 8, 6, 6),
    "big": (1024, 4096, 16, 6, 6),
}
#: the fields a preset fills, in the order of its tuple
PRESET_FIELDS = ("d_model", "ffn_dim", "heads", "encoder_layers", "decoder_layers")

# Upper bounds of the schema's numbers, each far above any system the papers (or the largest GPU) train, and low
# enough that a typo (1e9, a few extra zeros) is refused as one line instead of exhausting memory in a constructor
# or a loop. A command-line option that sets a recipe field takes the field's bounds (ctxmt_cli.cli.options).
#: model widths (d_model, a segment code): GPT-3's 12,288 fits
MAX_WIDTH = 16_384
#: hidden units of a feed-forward block (ffn_dim, a classifier's hidden layer): 8 x MAX_WIDTH
MAX_HIDDEN = 131_072
#: attention heads
MAX_HEADS = 1_024
#: layers of a stack (DeepNet trained 1,000)
MAX_LAYERS = 1_024
#: context sentences a window holds on each side (the papers: up to 3; Morishita et al.: 8)
MAX_CONTEXT = 64
#: tokens of a window, a position table, a shift, an output (the papers' windows: 250-1,024)
MAX_POSITIONS = 65_536
#: tokens of a batch or a training group (a large GPU's batches: ~100,000)
MAX_BATCH_TOKENS = 10_000_000
#: a batch's token budget where none is given: ``data.max_tokens``' default, and the scorer's and analyses'
DEFAULT_MAX_TOKENS = 4096
#: SentencePiece pieces of a vocabulary (NLLB's 256,000 fit)
MAX_VOCAB = 1_048_576
#: updates, epochs, intervals and other counts of a run
MAX_COUNT = 1_000_000_000
#: checkpoints kept or averaged
MAX_CHECKPOINTS = 100_000
#: seeds: what every generator ctxmt seeds (Python's, numpy's, torch's) accepts, 0 to 2^32 - 1
MAX_SEED = 2**32 - 1


def _mentions(annotation: Any, kind: type) -> bool:
    """Whether a field's type names ``kind`` anywhere (``Optional[int]``, ``tuple[float, float]``, a union)."""
    return annotation is kind or any(_mentions(arg, kind) for arg in get_args(annotation))


def _holds_bool(value: Any) -> bool:
    """``value`` is a boolean, or a list or tuple with one inside (``betas: [true, 0.98]``)."""
    return isinstance(value, bool) or (isinstance(value, (list, tuple)) and any(_holds_bool(v) for v in value))


class Section(BaseModel):
    """Base of every recipe section: unknown keys are errors, values are re-validated on assignment, and a
    boolean is never taken for a number."""

    # allow_inf_nan: no number of a recipe is meant infinite or undefined (`lr: .inf`, `betas: [.nan, .9]`)
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _no_bool_as_number(cls, data: Any) -> Any:
        # pydantic's lax mode reads true as 1 and false as 0 (`threads: true` would mean one thread, `dropout: true`
        # would be refused as "less than 1"); strict mode would also refuse the YAML list a tuple field gets
        if not isinstance(data, dict):
            return data
        errors = []
        for key, value in data.items():
            field = cls.model_fields.get(key) if isinstance(key, str) else None
            if field is None or not _holds_bool(value) or _mentions(field.annotation, bool):
                continue
            what = "an integer" if _mentions(field.annotation, int) else "a number"
            if _mentions(field.annotation, int) or _mentions(field.annotation, float):
                errors.append(InitErrorDetails(type=PydanticCustomError(
                    "bool_not_number", "expected {what}, not true/false", {"what": what}), loc=(key,), input=value))
        if errors:
            raise ValidationError.from_exception_data(cls.__name__, errors)
        return data


class ModelBase(Section):
    """Transformer dimensions shared by every family; ``preset`` fills the ones left unset."""

    preset: Literal["tiny", "small", "base", "big"] | None = Field(
        "small", description="dimensions (d_model, ffn_dim, heads, encoder/decoder layers): tiny 128/512/4/2+2, small "
        "256/1024/4/3+3, base 512/2048/8/6+6, big 1024/4096/16/6+6; fields given explicitly win")
    d_model: int | None = Field(None, ge=8, le=MAX_WIDTH, description="model width (default: the preset's)")
    ffn_dim: int | None = Field(None, ge=8, le=MAX_HIDDEN, description="feed-forward inner width (default: the "
                                   "preset's)")
    heads: int | None = Field(None, ge=1, le=MAX_HEADS, description="attention heads; must divide d_model "
                                 "(default: the preset's)")
    encoder_layers: int | None = Field(None, ge=1, le=MAX_LAYERS, description="encoder layers (default: the "
                                          "preset's)")
    decoder_layers: int | None = Field(None, ge=1, le=MAX_LAYERS, description="decoder layers (default: the "
                                          "preset's)")
    dropout: float = Field(0.1, ge=0.0, lt=1.0, description="dropout on embeddings and every sub-layer's output")
    attention_dropout: float = Field(0.0, ge=0.0, lt=1.0, description="dropout on attention probabilities")
    activation_dropout: float = Field(0.0, ge=0.0, lt=1.0, description="dropout after the feed-forward activation")
    normalize_before: bool = Field(True, description="pre-norm (true) or post-norm as in Vaswani et al. (false)")
    share_embeddings: Literal["auto", "all", "decoder", "none"] = Field(
        "auto", description="auto: tie all three when the vocabulary is joint, else decoder in/out"
    )
    max_positions: int = Field(1024, ge=16, le=MAX_POSITIONS,
                               description="longest window in tokens the position table covers")

    @model_validator(mode="after")
    def _fill_preset(self) -> ModelBase:
        if self.preset is not None:
            for key, value in zip(PRESET_FIELDS, PRESETS[self.preset], strict=True):
                if getattr(self, key) is None:
                    object.__setattr__(self, key, value)
        missing = [k for k in PRESET_FIELDS if getattr(self, k) is None]
        if missing:
            raise ValueError(f"set a preset or give {', '.join(missing)}")
        if self.d_model % self.heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by heads ({self.heads})")
        return self

    @classmethod
    def fit_architecture(cls, section: dict) -> dict:
        """The model section (a plain dict) fitted to dimensions another checkpoint imposed (``train.init_from``):
        a family whose options count layers adapts them here; by default nothing changes."""
        return section

    src_context_sentences: Literal[0] = Field(0, description="previous source sentences the model reads (none here)")
    tgt_context_sentences: Literal[0] = Field(0, description="previous target sentences the model reads (none here)")
    src_next_sentences: Literal[0] = Field(0, description="next source sentences the model reads (none here)")
    # the architecture options of imported models (Marian / OPUS-MT, `ctxmt import marian`); each default is the
    # plain Transformer's, so a recipe or checkpoint without them builds the very model it always did
    activation: Literal["relu", "gelu", "swish"] = Field(
        "relu", description="feed-forward activation: relu (Vaswani et al.), gelu (exact, erf), or swish (SiLU, "
        "as Marian / OPUS-MT models)")
    scale_embeddings: bool = Field(
        True, description="multiply token embeddings by sqrt(d_model) (Vaswani et al.); false: as they are "
        "(Marian's scale_embedding: false)")
    sinusoid: Literal["tensor2tensor", "marian"] = Field(
        "tensor2tensor", description="sinusoidal position frequencies, sin in the first half and cos in the second: "
        "tensor2tensor 10000^(-i/(d/2-1)) | marian 10000^(-2i/d) (Marian and Hugging Face MarianMTModel)")
    output_bias: bool = Field(
        False, description="a learned bias on the output logits (Marian's final_logits_bias)")


class TargetContextOptions(Section):
    """Where a model reading the target side of its context sentences gets it (the fields of every family that can:
    a first pass written by ``ctxmt first-pass``, or the split's reference); ``None`` in a recipe that leaves them
    out, filled by :meth:`fill_target_context` for a model that reads them. Every section with these options declares
    its own ``bilingual`` field (each family words what it caches or concatenates)."""

    target_context_from: Literal["first_pass", "reference"] | None = Field(
        None, description="a model reading target context: where its target context comes from in training and "
        "validation: first_pass (sentence-level translations of the context sentences, a stream written by `ctxmt "
        "first-pass`; Yang et al.'s setting) | reference (the split's own target side, for ablations) "
        "[default first_pass]")
    first_pass_stream: str | None = Field(
        None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]*$", description="target_context_from first_pass: the name of the "
        f"stream beside the train and valid splits (`ctxmt first-pass --name`) [default {FIRST_PASS_STREAM}]")

    @property
    def reads_target_context(self) -> bool:
        """The model reads the target side of its context sentences (``bilingual``; a family with another way to
        read them overrides this)."""
        return self.bilingual

    def fill_target_context(self, reads: bool, fix: str) -> None:
        """Fill the defaults of a model that ``reads`` target context; refuse the fields on one that does not
        (``fix``: how a recipe turns the reading on), and a stream name beside ``reference``."""
        if not reads:
            stray = [k for k in ("target_context_from", "first_pass_stream") if getattr(self, k) is not None]
            if stray:
                raise ValueError(f"{', '.join(stray)}: for a model reading target context; {fix}, or remove "
                                 f"{'it' if len(stray) == 1 else 'them'}")
            return
        if self.target_context_from is None:
            object.__setattr__(self, "target_context_from", "first_pass")
        if self.target_context_from == "reference" and self.first_pass_stream is not None:
            raise ValueError("first_pass_stream names the stream of target_context_from: first_pass; with reference "
                             "the split's own target side is read: remove it")
        if self.target_context_from == "first_pass" and self.first_pass_stream is None:
            object.__setattr__(self, "first_pass_stream", FIRST_PASS_STREAM)
