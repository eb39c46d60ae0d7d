"""Rebuilding a model from a checkpoint file alone: what translation, scoring, evaluation and training share.

The checkpoint format itself (atomic writes, payloads, pruning, averaging) lives in
:mod:`ctxmt_cli.train.checkpoint`; reading one back needs no training code.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ctxmt_cli.config import Recipe, validate_recipe
from ctxmt_cli.core.model import VocabInfo
from ctxmt_cli.device import resolve_device
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.models import build_model
from ctxmt_cli.paths import check_input_file


def read_checkpoint(path: Path, device: str | torch.device = "cpu") -> dict:
    """Load a checkpoint file; a missing, truncated or foreign file is a one-line CtxmtError."""
    path = check_input_file(Path(path), "checkpoint", "give the path to a checkpoint_*.pt written by ctxmt train")
    try:
        ckpt = torch.load(path, map_location=device, weights_only=True)
    except Exception as err:  # noqa: BLE001 - any unpickling failure means "not our file"
        raise CtxmtError(f"{path} is not a readable ctxmt checkpoint ({type(err).__name__}); "
                         "it may be truncated or from another tool") from None
    if not isinstance(ckpt, dict) or "model" not in ckpt or "recipe" not in ckpt:
        raise CtxmtError(f"{path} is not a ctxmt checkpoint (no model/recipe inside)")
    return ckpt


def load_state_strict(model: nn.Module, state: dict, path: Path) -> None:
    """``load_state_dict`` with a one-line error when the recipe's dimensions differ from the checkpoint's."""
    try:
        model.load_state_dict(state)
    except RuntimeError as err:
        first = str(err).strip().splitlines()
        detail = first[1].strip() if len(first) > 1 else first[0]
        raise CtxmtError(f"{path} does not fit the recipe's model ({detail[:160]}); "
                         "use the recipe it was trained with") from None


@dataclass
class LoadedModel:
    """A model rebuilt from a checkpoint alone, with everything needed to use it."""

    model: nn.Module
    recipe: Recipe
    tokenizer: Any
    vocab: VocabInfo
    meta: dict


def torch_device(name: str | torch.device = "auto") -> torch.device:
    """The device a ``--device`` value names (:func:`ctxmt_cli.device.resolve_device`: ``auto`` is CUDA when
    present); a CUDA device the machine lacks is a one-line error."""
    return resolve_device(name)


def load_model(path: Path, device: str | torch.device = "cpu") -> LoadedModel:
    """Rebuild the model of a checkpoint (eval mode, on ``device``) without the prepared data."""
    from ctxmt_cli.data.tokenize import Tokenizer

    path = Path(path)
    ckpt = read_checkpoint(path)
    recipe = validate_recipe(ckpt["recipe"], f"{path} (stored recipe)")
    vocab = VocabInfo(**ckpt["vocab"])
    model = build_model(recipe.model, vocab)
    load_state_strict(model, ckpt["model"], path)
    model.to(torch_device(device)).eval()
    tokenizer = Tokenizer.from_state(ckpt["tokenizer"])
    return LoadedModel(model, recipe, tokenizer, vocab, dict(ckpt.get("meta") or {}))
