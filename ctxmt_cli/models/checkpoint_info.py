"""What a checkpoint holds, read from the file alone: recipe, family, parameter count, vocabulary, training state.

``ctxmt inspect -c CKPT`` prints it. The parameter count is the model's own (:meth:`num_parameters`: trainable
parameters, tied weights once), the figure ``ctxmt train --dry-run`` prints, from the model rebuilt on
PyTorch's ``meta`` device: shapes only, so a large model is counted without allocating its weights.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch

from ctxmt_cli.config import Recipe, recipe_to_dict
from ctxmt_cli.core.batch import VocabInfo
from ctxmt_cli.models.families import build_model
from ctxmt_cli.models.loading import open_checkpoint


def count_parameters(recipe: Recipe, vocab: VocabInfo) -> int:
    """Trainable parameters of the recipe's model for ``vocab`` (tied weights once), built without weights."""
    with torch.device("meta"):
        model = build_model(recipe.model, vocab)
    return model.num_parameters()


def _finite(value: Any) -> float | None:
    """A metric as JSON can carry it: ``inf`` (no validation yet) becomes None."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def vocabulary_info(ckpt: dict) -> dict:
    """Sizes, sharing, Moses tokenization, languages and special ids of the checkpoint's vocabulary."""
    vocab, tok, meta = ckpt["vocab"], ckpt.get("tokenizer") or {}, ckpt.get("meta") or {}
    fingerprint = ckpt.get("vocab_fingerprint")
    return {
        "source_size": vocab["src_size"], "target_size": vocab["tgt_size"], "joint": bool(vocab.get("joint", True)),
        "moses": bool(tok.get("moses", meta.get("moses", False))),
        "source_language": tok.get("src_lang", meta.get("src_lang")),
        "target_language": tok.get("tgt_lang", meta.get("tgt_lang")),
        "special_ids": {k: vocab[k] for k in ("pad", "unk", "bos", "eos", "brk") if k in vocab},
        "fingerprint": fingerprint[:12] if isinstance(fingerprint, str) else None,
    }


def training_info(ckpt: dict, recipe: Recipe) -> dict:
    """Where training stood when the checkpoint was written (an averaged checkpoint keeps its first input's)."""
    state = ckpt.get("state") or {}
    history = state.get("history") or []
    return {
        "step": state.get("step"), "epoch": state.get("epoch"),
        "best": _finite(state.get("best")), "best_step": state.get("best_step"),
        "early_stop_on": recipe.train.early_stop_on, "validations": len(history),
        "elapsed_s": _finite(state.get("elapsed")), "world_size": ckpt.get("world_size"),
        "resumable": ckpt.get("optimizer") is not None,
        "recipe_changes": list(state.get("recipe_history") or []),       # accepted with --resume --allow-changed
        "averaged_from": list(ckpt.get("averaged_from") or []),
        "init_from": lineage(ckpt.get("init_from")),
    }


def lineage(record: dict | None) -> list[dict]:
    """The chain of checkpoints a model started from (``train.init_from``), nearest first: path, family, step and
    tensors loaded / new / skipped of each start; empty for a model trained from scratch."""
    chain = []
    while isinstance(record, dict) and len(chain) < 64:     # a crafted file cannot make it loop
        chain.append({"path": record.get("path"), "sha256": record.get("sha256"), "family": record.get("family"),
                      "step": record.get("step"),
                      "loaded": record.get("loaded"), "new": len(record.get("new") or []),
                      "skipped": len(record.get("skipped") or [])})
        record = record.get("parent")
    return chain


def container(path: Path) -> str:
    """``safetensors`` or ``torch``: the file format a checkpoint is stored in."""
    from ctxmt_cli.models.safetensors_file import is_safetensors

    return "safetensors" if is_safetensors(path) else "torch"


def checkpoint_info(path: Path) -> dict:
    """Everything ``ctxmt inspect`` reports about a checkpoint, as JSON-ready values.

    A missing, truncated, foreign or malformed file is a one-line :class:`~ctxmt_cli.errors.CtxmtError`; a
    ``.safetensors`` checkpoint is read like a ``.pt`` one (``container`` says which).
    """
    path = Path(path)
    checked = open_checkpoint(path)
    ckpt, recipe, vocab = checked.raw, checked.recipe, checked.vocab
    return {
        "path": str(path), "container": container(path), "format": ckpt.get("format"),
        "ctxmt_version": ckpt.get("version"),
        "tensor_hashes": len((ckpt.get("tensor_hashes") or {}).get("tensors") or {}) or None,   # checked at open
        "name": recipe.name, "family": recipe.model.family, "parameters": count_parameters(recipe, vocab),
        "vocabulary": vocabulary_info(ckpt), "training": training_info(ckpt, recipe),
        "imported_from": ckpt.get("imported_from"),                       # `ctxmt import`: the folder and its files
        "recipe": recipe_to_dict(recipe),
    }
