"""Typed recipe schema: one YAML file describes one system completely.

A recipe has four sections — ``data``, ``model``, ``train``, ``decode`` — each a
pydantic model with ``extra="forbid"``, so a misspelt key is an error that names
the file and the key path. ``--set a.b=c`` overrides go through the same schema.
The model section is a union discriminated by ``family``: one config class per line of the family catalog
(:mod:`ctxmt_cli.family_catalog`), each in its family's folder (``ctxmt_cli/models/<family>/config.py``).

This module must not import torch: ``ctxmt --help`` and ``--dry-run`` stay fast.
"""

from __future__ import annotations

import difflib
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Union

import yaml
from pydantic import BaseModel, Field, ValidationError, model_validator
from pydantic.fields import FieldInfo

from ctxmt_cli import family_catalog
from ctxmt_cli.config_base import (  # noqa: F401 (re-exported)
    DEFAULT_MAX_TOKENS,
    MAX_BATCH_TOKENS,
    MAX_CHECKPOINTS,
    MAX_COUNT,
    MAX_POSITIONS,
    MAX_SEED,
    PRESETS,
    ModelBase,
    Section,
)
from ctxmt_cli.errors import CtxmtError, named, option
from ctxmt_cli.recipe_catalog import read_recipe_text, resolve_recipe
from ctxmt_cli.yaml_loader import (  # noqa: F401 (re-exported)
    MAX_DEPTH,
    DuplicateKeyError,
    UniqueKeyLoader,
    YamlLimitError,
    check_text_size,
)


class DataConfig(Section):
    """Where the prepared data lives and how batches are formed."""

    path: str = Field("data/prepared", description="prepared dataset directory (ctxmt prepare)")
    train_split: str = Field("train", description="prepared split trained on")
    valid_split: str = Field("valid", description="prepared split validated on (loss, early stopping, best checkpoint)")
    max_tokens: int = Field(DEFAULT_MAX_TOKENS, ge=16, le=MAX_BATCH_TOKENS, description="token budget per batch: rows "
                            "x the widest row of the side data.max_tokens_of names, padding included")
    max_tokens_of: Literal["longer", "source", "target"] = Field(
        "longer", description="the side data.max_tokens counts: longer (each row's longer side, as fairseq's "
        "max_tokens does), source (the source windows) or target (the target windows: a paper's 'N target tokens')")
    max_window_tokens: int = Field(
        1024, ge=8, le=MAX_POSITIONS, description="windows longer than this lose their oldest context sentences"
    )
    bucket_width: int = Field(1, ge=1, le=MAX_POSITIONS, description="length bucketing granularity in tokens (1: "
                              "exact lengths, random order among equals)")
    input_noise: float = Field(0.0, ge=0.0, lt=1.0, description="share of source tokens (special tokens aside) "
                               "replaced by a random subword in every training batch, drawn from the seed, epoch "
                               "and position (Voita et al. 2019's DocRepair: 0.1); validation and translation read "
                               "clean sources")


#: family name -> its config class (a view of the family catalog): the model section is the one its ``family`` names
FAMILY_CONFIGS: Mapping[str, type[ModelBase]] = family_catalog.classes_of("config")
#: the family of a recipe that names none
DEFAULT_FAMILY = "sentence"


def _model_config():
    """The model section's type: a union of the family configs, discriminated by ``family``."""
    # a union of a tuple built at run time has no `X | Y` spelling
    return Annotated[Union[tuple(FAMILY_CONFIGS.values())], Field(discriminator="family")]  # noqa: UP007


def _default_model() -> ModelBase:
    return FAMILY_CONFIGS[DEFAULT_FAMILY]()


#: The model section: one config class per family, chosen by ``family``.
ModelConfig = _model_config()


#: one of Adam's betas: a decay rate in [0, 1)
_Beta = Annotated[float, Field(ge=0.0, lt=1.0)]


class TrainConfig(Section):
    """Optimisation, validation, checkpointing."""

    save_dir: str = Field("runs/model", description="run directory: checkpoints, metrics.jsonl, the resolved recipe")
    seed: int = Field(1, ge=0, le=MAX_SEED, description="seed of the initialisation, the batch order and dropout "
                      "(0 to 2^32 - 1: what Python's, numpy's and torch's generators all accept)")
    init_from: str | None = Field(
        None, min_length=1, description="start from this checkpoint's weights (.pt or .safetensors, any family): its "
        "architecture replaces the recipe's, tensors are matched by name and shape, what the family adds is "
        "initialised as in a fresh run; the optimiser, schedule and step start fresh (two-step training)")
    lr: float = Field(7e-4, gt=0.0, le=10.0, description="peak learning rate (inverse square-root schedule)")
    warmup_steps: int = Field(4000, ge=0, le=MAX_COUNT, description="updates of linear warm-up to lr")
    betas: tuple[_Beta, _Beta] = Field((0.9, 0.98), description="Adam's beta1, beta2 (each in [0, 1))")
    adam_eps: float = Field(1e-9, gt=0.0, le=1.0, description="Adam's epsilon")
    weight_decay: float = Field(0.0, ge=0.0, le=1.0, description="decoupled weight decay (AdamW) when > 0")
    label_smoothing: float = Field(0.1, ge=0.0, lt=1.0, description="label smoothing of the token loss")
    clip_norm: float = Field(0.0, ge=0.0, le=1e6, description="0 disables gradient clipping")
    update_freq: int = Field(1, ge=1, le=MAX_POSITIONS, description="gradient accumulation steps")
    max_steps: int = Field(100_000, ge=1, le=MAX_COUNT, description="stop after N updates")
    max_epochs: int = Field(1000, ge=1, le=MAX_COUNT, description="stop after N passes over the training split")
    max_minutes: float | None = Field(None, gt=0.0, le=1e7, description="stop (and validate) after this wall time "
                                         "(at most 10^7: 19 years)")
    valid_every: int = Field(1000, ge=1, le=MAX_COUNT, description="validate and checkpoint every N updates")
    patience: int = Field(12, ge=0, le=MAX_COUNT,
                          description="stop after N validations without improvement (0 = never)")
    early_stop_on: Literal["window_loss", "discounted_loss", "current_loss"] = Field(
        "window_loss", description="validation loss that picks the best checkpoint and counts patience: the whole "
        "target window's, the context-discounted objective, or the current sentence's alone")
    keep_checkpoints: int = Field(10, ge=1, le=MAX_CHECKPOINTS, description="step checkpoints kept on disk")
    average_checkpoints: int = Field(0, ge=0, le=MAX_CHECKPOINTS,
                                     description="average the best and the N following checkpoints")
    average_last: int = Field(0, ge=0, le=MAX_CHECKPOINTS, description="average the last N step checkpoints "
                              "(Morishita et al. 2021: saved every 200 updates, the last 8); excludes "
                              "average_checkpoints")
    amp: Literal["off", "bf16", "fp16"] = Field(
        "off", description="mixed precision (autocast); fp16 adds a grad scaler")
    compile: bool = Field(False, description="torch.compile the training forward and loss (inductor, dynamic shapes); "
                                            "the first updates spend a minute or more compiling")
    log_every: int = Field(50, ge=1, le=MAX_COUNT, description="log the training loss and tokens/s every N updates")
    threads: int | None = Field(None, ge=1, le=4096, description="torch CPU threads (default: torch's choice)")

    @model_validator(mode="after")
    def _check_averaging(self) -> TrainConfig:
        if self.average_last and self.average_checkpoints:
            raise ValueError(f"average_last ({self.average_last}) and average_checkpoints "
                             f"({self.average_checkpoints}) are two ways to average: set one of them to 0")
        if self.average_last > self.keep_checkpoints:
            raise ValueError(f"average_last ({self.average_last}) needs that many step checkpoints kept: set "
                             f"keep_checkpoints >= {self.average_last} (it is {self.keep_checkpoints})")
        return self


class DecodeConfig(Section):
    """Defaults for translation; command-line flags override them."""

    beam: int = Field(4, ge=1, le=1024, description="beam size (1 = greedy; at most 1,024: past a few hundred beams "
                      "BLEU only drops, the beam search curse)")
    lenpen: float = Field(0.6, ge=0.0, le=5.0, description="length penalty: scores divided by length ** lenpen "
                          "(at most 5, where 65,536 ** lenpen still fits a float32 score; 0.6-2 in practice)")
    max_len_a: float = Field(1.5, ge=0.0, le=100.0,
                             description="longest output: max_len_a * source length + max_len_b tokens")
    max_len_b: int = Field(10, ge=1, le=MAX_POSITIONS, description="see max_len_a")
    target_mode: Literal["prefix", "generate"] = Field(
        "prefix", description="target context of a window-reading model: its own earlier outputs forced as a prefix, "
        "or the whole window generated and its last sentence kept")
    batch_docs: int = Field(64, ge=1, le=MAX_POSITIONS, description="documents (or pieces of documents, for a model "
                            "reading no target context) decoded in parallel")
    warmup_sentences: int | None = Field(
        None, ge=0, le=64, description="a model reading its earlier translations: None translates each document "
        "sentence after sentence (exact); N cuts documents into pieces that translate side by side, each piece "
        "first translating (and dropping) the N sentences before it, at least the model's context, so that their "
        "translations stand as its target context (faster on a few long documents; see the translate page)")


class Recipe(Section):
    """A complete, validated system description."""

    #: the model field's description (kept when a family joins the catalog and the schema follows: :func:`_rebuild`)
    MODEL_HELP: ClassVar[str] = "the family (model.family) and its options"

    name: str = Field("model", description="the system's name (reports, quickstart tables)")
    description: str = Field("", description="one line on the system")
    data: DataConfig = Field(default_factory=DataConfig, description="prepared data and batching")
    model: ModelConfig = Field(default_factory=_default_model, description=MODEL_HELP)
    train: TrainConfig = Field(default_factory=TrainConfig, description="optimisation, validation, checkpoints")
    decode: DecodeConfig = Field(default_factory=DecodeConfig, description="translation defaults")


def _rebuild() -> None:
    """The recipe schema with the model union of the catalog as it now is (a family joined or left at run time:
    :func:`ctxmt_cli.models.families.add_family`); pydantic rebuilds the validator."""
    global ModelConfig
    ModelConfig = _model_config()
    Recipe.model_fields["model"] = FieldInfo.from_annotated_attribute(
        ModelConfig, Field(default_factory=_default_model, description=Recipe.MODEL_HELP))
    Recipe.model_rebuild(force=True)


family_catalog.when_changed(_rebuild)


#: recipe keys that were renamed: old name -> new name (an old recipe gets told the new one)
RENAMED = {"context_sentences": "src_context_sentences", "batch_sentences": "batch_docs"}
#: keys that moved to a new name and are still read under the old one, with a one-line note: (section, old) -> new
MOVED = {("decode", "target_context"): "target_mode", ("model", "target_context"): "target_context_from"}
#: names other tools or descriptions use for a key ctxmt names otherwise (one name per concept here)
KNOWN_AS = {"context_prev": "src_context_sentences", "context_next": "src_next_sentences"}


def _suggest(key: str, loc: tuple, raw: dict) -> str:
    """'did you mean' hint for an unknown key, from the keys its section allows."""
    if key in RENAMED:
        return f" (renamed to '{RENAMED[key]}')"
    if key in KNOWN_AS:
        return f" (ctxmt calls it '{KNOWN_AS[key]}')"
    node: Any = Recipe
    for part in loc[:-1]:
        field = node.model_fields.get(part) if isinstance(part, str) else None
        if field is None:
            return ""
        node = field.annotation
        if not (isinstance(node, type) and issubclass(node, BaseModel)):  # the family union
            family = (raw.get("model") or {}).get("family") if isinstance(raw.get("model"), dict) else None
            node = FAMILY_CONFIGS.get(family)
            if node is None:
                return ""
    match = difflib.get_close_matches(key, list(node.model_fields), n=1)
    return f" (did you mean '{match[0]}'?)" if match else ""


def _override_source(loc: tuple, source: str, overrides: list[str]) -> str:
    """Who gave the value at ``loc``: the ``--set`` that wrote it (or into it), else the recipe file."""
    inside = None
    for text in reversed(overrides):                   # the last --set of a key is the one that holds
        parts = tuple(text.split("=", 1)[0].strip().split("."))
        if loc[: len(parts)] == parts:
            return f"{option('overrides')} {text!r}"
        if inside is None and parts[: len(loc)] == loc:
            inside = text
    return source if inside is None else f"{source} with {option('overrides')} {inside!r}"


#: pydantic's error types for a value of the wrong type (a union's members that do not fit it)
_MISFIT = ("literal_error", "model_type", "int_type", "int_parsing", "float_type", "float_parsing", "string_type",
           "dict_type", "list_type", "tuple_type", "int_from_float")


def _first_error(err: ValidationError) -> tuple[dict, tuple, int]:
    """The error to report, its location and how many errors it stands for. A union field (``shift: auto | int |
    {src, tgt}``) fails once per member, each under the member's name: the member that fits the value's type says
    what is wrong (``-3``: less than 0), under the field's own location."""
    errors = err.errors()
    first, loc = errors[0], errors[0]["loc"]
    n = len(loc)
    members = [e for e in errors if len(e["loc"]) >= n and e["loc"][:n - 1] == loc[:-1]]
    if n < 2 or first["type"] not in _MISFIT or len({e["loc"][n - 1] for e in members}) < 2:
        return first, loc, 1
    chosen = next((e for e in members if e["type"] not in _MISFIT), first)
    return chosen, loc[:-1] + chosen["loc"][n:], len(members)


def _format_error(err: ValidationError, source: str, raw: dict, overrides: list[str]) -> str:
    first, where, counted = _first_error(err)
    # pydantic puts the union tag (family name) into the location; users never wrote it
    loc = tuple(p for i, p in enumerate(where) if not (i == 1 and where[0] == "model" and p in FAMILY_CONFIGS))
    path = ".".join(str(p) for p in loc) or "(top level)"
    source = _override_source(tuple(str(p) for p in loc), source, overrides)
    if first["type"] == "extra_forbidden":
        return f"{source}: unknown key '{path}'{_suggest(str(loc[-1]), loc, raw)}; remove or rename it"
    msg = first["msg"].removeprefix("Value error, ")
    given = first.get("input")
    shown = "" if isinstance(given, (dict, list)) or given is None else \
        f" (got {str(given).lower() if isinstance(given, bool) else repr(given)})"
    more = f" [+{len(err.errors()) - counted} more]" if len(err.errors()) > counted else ""
    return f"{source}: {path}: {msg}{shown}{more}"


def _shown(text: str, limit: int = 60) -> str:
    """``text`` quoted for an error line, cut to ``limit`` characters (a --set value may be a megabyte)."""
    return repr(text if len(text) <= limit else text[:limit] + "...")


def parse_override(text: str) -> tuple[list[str], Any]:
    """Split ``a.b.c=value`` into a key path and a YAML-parsed value."""
    if "=" not in text:
        raise CtxmtError(f"{option('overrides')} {text!r}: expected KEY.PATH=VALUE, e.g. "
                         f"{option('overrides')} train.lr=5e-4")
    key, value = text.split("=", 1)
    parts = [p for p in key.strip().split(".") if p]
    if not parts:
        raise CtxmtError(f"{option('overrides')} {text!r}: empty key; expected KEY.PATH=VALUE")
    if len(parts) > MAX_DEPTH:
        raise CtxmtError(f"{option('overrides')} {_shown(text)}: a key path of {len(parts)} parts, more than the "
                         f"{MAX_DEPTH} any recipe has; give the key path of a recipe field, e.g. train.lr")
    if not value.strip():
        return parts, None
    try:
        check_text_size(len(value.encode("utf-8", "surrogatepass")))
        return parts, yaml.load(value, Loader=UniqueKeyLoader)
    except YamlLimitError as err:
        raise CtxmtError(f"{option('overrides')} {_shown(text)}: the value is {err.what}, beyond what ctxmt reads; "
                         "give a recipe field's value (a number, a word, a short list)") from None
    except yaml.YAMLError as err:
        problem = " ".join(str(getattr(err, "problem", None) or type(err).__name__).split())
        raise CtxmtError(f"{option('overrides')} {text!r}: the value is not valid YAML ({problem}); quote it, "
                         f"e.g. {option('overrides')} 'name=\"a: b\"'") from None


def apply_overrides(raw: dict, overrides: list[str]) -> dict:
    """Apply ``--set`` overrides to a raw recipe dict (validated later by the schema)."""
    for text in overrides:
        parts, value = parse_override(text)
        if len(parts) == 2 and tuple(parts) in MOVED:                  # an old name sets the new key
            new = MOVED[tuple(parts)]
            warnings.warn(named(f"{option('overrides')} {text!r}: {'.'.join(parts)} is now called {parts[0]}.{new} "
                                "(read as such)"), FutureWarning, stacklevel=2)
            parts = [parts[0], new]
        node = raw
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise CtxmtError(f"{option('overrides')} {text!r}: '{part}' is a value, not a section")
            node = child
        node[parts[-1]] = value
    return raw


def read_moved(raw: dict, source: str, quiet: bool = False) -> dict:
    """``raw`` with each key of :data:`MOVED` under its new name, and a warning line naming both (none when
    ``quiet``: a recipe ctxmt stored itself); both names at once is an error."""
    out = dict(raw)
    for (section, old), new in MOVED.items():
        part = out.get(section)
        if not isinstance(part, dict) or old not in part:
            continue
        if new in part:
            raise CtxmtError(f"{source}: {section}.{old} is the old name of {section}.{new}, and both are given; "
                             f"keep {section}.{new}")
        out[section] = {(new if k == old else k): v for k, v in part.items()}
        if not quiet:
            warnings.warn(f"{source}: {section}.{old} is now called {section}.{new} (read as such; rename it)",
                          FutureWarning, stacklevel=3)
    return out


def validate_recipe(raw: Any, source: str = "recipe", overrides: list[str] | None = None,
                    stored: bool = False) -> Recipe:
    """Validate a raw dict; any problem becomes one CtxmtError line naming ``source`` (or the ``--set`` of
    ``overrides`` that gave the value) and the key path. Keys under an old name are read under the new one
    (:data:`MOVED`), with a warning unless the recipe is ``stored`` (one ctxmt wrote: a checkpoint's, an export's)."""
    if not isinstance(raw, dict):
        raise CtxmtError(f"{source}: a recipe must be a YAML mapping with sections data/model/train/decode "
                         f"(this file holds a {type(raw).__name__}); give a recipe file")
    raw = read_moved(raw, source, quiet=stored)
    try:
        return Recipe.model_validate(raw)
    except ValidationError as err:
        raise CtxmtError(_format_error(err, source, raw, list(overrides or []))) from None


def read_yaml_file(path: Path, kind: str = "recipe") -> Any:
    """The YAML content of a recipe file (or another typed YAML file: ``kind``, e.g. a corpus card); bad bytes, bad
    syntax and duplicate keys are one line each."""
    text = read_recipe_text(path, kind)
    try:
        return yaml.load(text, Loader=UniqueKeyLoader)
    except DuplicateKeyError as err:
        raise CtxmtError(f"{path}:{err.line}: key '{err.key}' is given twice (first at line {err.first}); "
                         "keep one (the second would silently replace the first)") from None
    except YamlLimitError as err:
        where = "" if err.line is None else f"{err.line}:"
        raise CtxmtError(f"{path}:{where} the YAML is {err.what}, beyond what a {kind} needs; give the right file "
                         "(a recipe is a few KB, 3 or 4 levels deep)") from None
    except yaml.YAMLError as err:
        where = getattr(err, "problem_mark", None)
        line = f" line {where.line + 1}" if where is not None else ""
        problem = " ".join(str(getattr(err, "problem", None) or type(err).__name__).split())
        raise CtxmtError(f"{path}:{line} is not valid YAML ({problem}); fix the syntax (quote a value holding "
                         "{ } [ ] or ': ')") from None


def load_recipe(path: str | Path, overrides: list[str] | None = None) -> Recipe:
    """Read, override and validate a recipe: a YAML file, or the name of a packaged recipe (``ctxmt recipes list``)."""
    path = resolve_recipe(path)
    raw = read_yaml_file(path)
    if raw is None:                   # an empty file, or comments only: most likely the wrong file, not "defaults"
        raise CtxmtError(f"{path}: the recipe is empty (no data/model/train/decode sections); give the right file, "
                         "or start from a packaged one: ctxmt recipes copy quickstart/concat -o DIR")
    overrides = list(overrides or [])
    if isinstance(raw, dict):          # overrides write into the mapping; anything else is refused just below
        raw = apply_overrides(raw, overrides)
    return validate_recipe(raw, str(path), overrides)


def recipe_to_dict(recipe: Recipe) -> dict:
    """Plain-python (JSON/YAML-safe) form of a recipe, as stored in checkpoints."""
    return recipe.model_dump(mode="json")


def dump_recipe(recipe: Recipe) -> str:
    """YAML text of the resolved recipe."""
    return yaml.safe_dump(recipe_to_dict(recipe), sort_keys=False)
