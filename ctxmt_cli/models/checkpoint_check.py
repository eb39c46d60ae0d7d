"""A checkpoint's structure, checked once when it is read, so that no loader meets a malformed one.

``torch.load(weights_only=True)`` and the safetensors reader guarantee that a file holds plain values and
tensors, not that it holds *ctxmt's* values: a file crafted or damaged by hand can lack its vocabulary, carry a
vocabulary of the wrong type, a corrupt SentencePiece model, a recipe this version no longer accepts, or
weights that do not fit the model its recipe builds, or weights whose bytes changed since ctxmt wrote them (each
tensor's hash, :mod:`ctxmt_cli.models.tensor_hashes`). Every command that reads a checkpoint goes through
:func:`check_checkpoint` (via :func:`ctxmt_cli.models.loading.read_checkpoint`), which turns each of these into
one line naming the file, what is missing or wrong, and what to do, before any of it is used.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import torch

from ctxmt_cli.config import Recipe, validate_recipe
from ctxmt_cli.core.batch import VocabInfo
from ctxmt_cli.core.layers import fuse_model_state
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.models.tensor_hashes import first_damaged

#: the checkpoint layout this version writes and reads (``format`` in the file)
CHECKPOINT_FORMAT = 1
#: what to do about a checkpoint that fails a check (it was damaged, or not written by ctxmt)
ADVICE = "use another checkpoint of the run (checkpoint_last.pt, checkpoint_N.pt) or one written by ctxmt"
#: the fields every checkpoint has, with what each is for (named in the error line)
REQUIRED = {"model": "the model weights", "recipe": "the resolved recipe", "vocab": "the vocabulary record",
            "tokenizer": "the SentencePiece model(s)"}
#: optional fields and the types they must have when present (None is always allowed)
OPTIONAL = {"format": int, "version": str, "family": str, "vocab_fingerprint": str, "meta": dict, "state": dict,
            "optimizer": dict, "scaler": dict, "rng": (list, tuple), "world_size": int, "averaged_from": (list, tuple),
            "init_from": dict, "tensor_hashes": dict, "imported_from": dict}
#: TrainState counters ``ctxmt inspect`` and ``--resume`` read, and their types
STATE_FIELDS = {"step": int, "epoch": int, "position": int, "best": numbers.Real, "best_step": int, "bad": int,
                "last_valid_step": int, "elapsed": numbers.Real, "history": (list, tuple),
                "recipe_history": (list, tuple)}
#: ``meta.json`` fields loaders read from a checkpoint (languages, DocRepair's group size), and their types
META_FIELDS = {"src_lang": str, "tgt_lang": str, "joint": bool, "moses": bool, "docrepair": dict}
TOKENIZER_FIELDS = {"src_model": bytes, "tgt_model": bytes, "moses": bool, "src_lang": str, "tgt_lang": str,
                    "user_symbols": (list, tuple)}


@dataclass
class CheckedCheckpoint:
    """A checkpoint that passed every check, with the parts every loader needs already built."""

    path: Path
    raw: dict
    recipe: Recipe
    vocab: VocabInfo
    tokenizer: Any


def _kind(value: Any) -> str:
    """How an error line names what a field holds instead: ``None``, ``a list``, ``an int``."""
    if value is None:
        return "None"
    name = type(value).__name__
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


def _is(value: Any, kind) -> bool:
    """isinstance that does not take a bool for a number (a crafted ``step: true`` is not a step)."""
    if isinstance(value, bool):
        return kind is bool
    return isinstance(value, kind)


def _fail(path: Path, what: str) -> CtxmtError:
    return CtxmtError(f"{path} is not a usable ctxmt checkpoint: {what}; {ADVICE}")


def _check_fields(path: Path, ckpt: dict) -> None:
    """Required fields present, optional ones of their type, a layout this version reads."""
    if not isinstance(ckpt, dict):
        raise CtxmtError(f"{path} is not a ctxmt checkpoint (it holds {_kind(ckpt)}, not ctxmt's fields); "
                         "give a checkpoint_*.pt written by ctxmt train or a .safetensors from ctxmt export")
    missing = [f"'{k}' ({why})" for k, why in REQUIRED.items() if k not in ckpt]
    if len(missing) == len(REQUIRED):
        raise CtxmtError(f"{path} is not a ctxmt checkpoint (none of model/recipe/vocab/tokenizer inside); "
                         "give a checkpoint_*.pt written by ctxmt train or a .safetensors from ctxmt export")
    if missing:
        raise _fail(path, f"no {', '.join(missing)}")
    for key, kind in OPTIONAL.items():
        if ckpt.get(key) is not None and not _is(ckpt[key], kind):
            raise _fail(path, f"'{key}' is {_kind(ckpt[key])}")
    if (ckpt.get("format") or CHECKPOINT_FORMAT) > CHECKPOINT_FORMAT:
        raise CtxmtError(f"{path} has checkpoint format {ckpt['format']} (ctxmt {ckpt.get('version')}); this ctxmt "
                         f"reads format {CHECKPOINT_FORMAT}: upgrade ctxmt to use it")
    for section, expected in (("state", STATE_FIELDS), ("meta", META_FIELDS)):
        for key, kind in expected.items():
            value = (ckpt.get(section) or {}).get(key)
            if value is not None and not _is(value, kind):
                raise _fail(path, f"'{section}.{key}' is {_kind(value)}")
    for entry in (ckpt.get("state") or {}).get("recipe_history") or ():
        changed = entry.get("changed") if isinstance(entry, dict) else None
        if not isinstance(changed, dict) or not all(isinstance(v, (list, tuple)) and len(v) == 2
                                                    for v in changed.values()):
            raise _fail(path, "'state.recipe_history' holds an entry other than {step, changed: {key: [old, new]}}")
    group = ((ckpt.get("meta") or {}).get("docrepair") or {}).get("group_size", 1)
    if not _is(group, int) or group < 1:
        raise _fail(path, f"'meta.docrepair.group_size' is {group!r}, not a sentence count")


def _check_recipe(path: Path, ckpt: dict) -> Recipe:
    """The stored recipe, validated by this version's schema, of the family the file says."""
    if not isinstance(ckpt["recipe"], dict):
        raise _fail(path, f"'recipe' is {_kind(ckpt['recipe'])}, not a recipe mapping")
    try:
        recipe = validate_recipe(ckpt["recipe"], f"{path} (stored recipe)", stored=True)
    except CtxmtError as err:
        import ctxmt_cli

        written = f"ctxmt {ckpt['version']}" if ckpt.get("version") else "another ctxmt"
        raise CtxmtError(f"{err}; the recipe {written} stored does not validate in ctxmt {ctxmt_cli.__version__}: "
                         "read it with that version, or use a checkpoint this version wrote") from None
    if ckpt.get("family") is not None and ckpt["family"] != recipe.model.family:
        raise _fail(path, f"'family' says {ckpt['family']} but its recipe builds {recipe.model.family}")
    return recipe


def _check_vocab(path: Path, ckpt: dict) -> VocabInfo:
    """The vocabulary record: known fields, integer sizes and ids inside the vocabulary."""
    vocab = ckpt["vocab"]
    if not isinstance(vocab, dict):
        raise _fail(path, f"'vocab' is {_kind(vocab)}, not a vocabulary record")
    known = {f.name for f in fields(VocabInfo)}
    unknown = sorted(str(k) for k in vocab if k not in known)
    if unknown or not {"src_size", "tgt_size"} <= set(vocab):
        what = f"unknown fields {unknown}" if unknown else "no src_size/tgt_size"
        raise _fail(path, f"its vocabulary record has {what}")
    for key, value in vocab.items():
        kind = bool if key == "joint" else int
        if not _is(value, kind) or (kind is int and value < 0):
            raise _fail(path, f"'vocab.{key}' is {value!r}, not a{' boolean' if kind is bool else 'n index'}")
    info = VocabInfo(**vocab)
    if min(info.src_size, info.tgt_size) < 1:
        raise _fail(path, f"its vocabulary record has sizes {info.src_size}/{info.tgt_size}")
    return info


def _check_tokenizer(path: Path, ckpt: dict, vocab: VocabInfo):
    """The SentencePiece model(s) rebuilt, and agreeing with the vocabulary record."""
    from ctxmt_cli.data.tokenize import Tokenizer

    state = ckpt["tokenizer"]
    if not isinstance(state, dict):
        raise _fail(path, f"'tokenizer' is {_kind(state)}, not the SentencePiece state")
    for key, kind in TOKENIZER_FIELDS.items():
        value = state.get(key)
        if (value is None and key in ("src_model", "moses", "src_lang", "tgt_lang")) or \
                (value is not None and not _is(value, kind)):
            raise _fail(path, f"'tokenizer.{key}' is {'missing' if value is None else _kind(value)}")
    if not all(isinstance(s, str) for s in state.get("user_symbols") or ()):
        raise _fail(path, "'tokenizer.user_symbols' holds something other than strings")
    try:
        tokenizer = Tokenizer.from_state(state)
    except CtxmtError as err:
        raise _fail(path, str(err).partition(";")[0]) from None
    except Exception:  # noqa: BLE001 - SentencePiece reports a bad proto as RuntimeError or OSError
        raise _fail(path, "its SentencePiece model is corrupt (it does not parse)") from None
    if VocabInfo.of(tokenizer) != vocab:
        got = VocabInfo.of(tokenizer)
        raise _fail(path, f"its vocabulary record ({vocab.src_size}/{vocab.tgt_size} pieces) does not match its "
                          f"SentencePiece model(s) ({got.src_size}/{got.tgt_size})")
    return tokenizer


def check_weights(path: Path, state: Any, recipe: Recipe, vocab: VocabInfo) -> None:
    """``state`` holds exactly the tensors, of exactly the shapes, of the model ``recipe`` builds for ``vocab``
    (built on PyTorch's ``meta`` device: shapes only, no memory). A checkpoint written before attention projections
    were fused (separate ``q_proj``/``k_proj``/``v_proj``) is rewritten in ``state`` to the fused layout first
    (:func:`~ctxmt_cli.core.layers.fuse_model_state`), so every reader of the checked checkpoint sees one layout."""
    from ctxmt_cli.models.families import build_model

    if not isinstance(state, dict) or not all(isinstance(k, str) and torch.is_tensor(v) for k, v in state.items()):
        raise _fail(path, "'model' is not a mapping of parameter names to tensors")
    try:
        with torch.device("meta"):
            model = build_model(recipe.model, vocab)
        expected = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    except CtxmtError as err:
        raise _fail(path, f"its recipe does not build a model ({err})") from None
    except (ValueError, RuntimeError, AssertionError, TypeError) as err:   # dims the layers cannot take
        raise _fail(path, f"its recipe does not build a model ({type(err).__name__}: {str(err)[:100]})") from None
    fuse_model_state(model, state)                                          # separate q/k/v of older checkpoints
    missing = [k for k in expected if k not in state]
    extra = [k for k in state if k not in expected]
    wrong = [f"{k} {tuple(state[k].shape)} instead of {shape}" for k, shape in expected.items()
             if k in state and tuple(state[k].shape) != shape]
    problems = ([f"missing {len(missing)} tensors (e.g. {missing[0]})"] if missing else []) + \
        ([f"{len(extra)} unexpected tensors (e.g. {extra[0]})"] if extra else []) + wrong[:1]
    if problems:
        raise _fail(path, f"its weights do not fit the {recipe.model.family} model its recipe builds: "
                          f"{'; '.join(problems)}")


def check_checkpoint(ckpt: Any, path: Path) -> CheckedCheckpoint:
    """Check everything a loader reads from a checkpoint (see the module docstring); the parts, built."""
    path = Path(path)
    _check_fields(path, ckpt)
    damage = first_damaged(ckpt)           # the numbers themselves, before any of them is used
    if damage is not None:
        raise _fail(path, f"it is damaged: {damage[1]}")
    recipe = _check_recipe(path, ckpt)
    vocab = _check_vocab(path, ckpt)
    tokenizer = _check_tokenizer(path, ckpt, vocab)
    check_weights(path, ckpt["model"], recipe, vocab)
    return CheckedCheckpoint(path, ckpt, recipe, vocab, tokenizer)
