"""Rebuilding a model from a checkpoint file alone: what translation, scoring, evaluation and training share.

The checkpoint format itself (atomic writes, payloads, pruning, averaging) lives in
:mod:`ctxmt_cli.train.checkpoint`; reading one back needs no training code. A checkpoint is a ``.pt`` file
(``torch.load(weights_only=True)``) or a ``.safetensors`` file (:mod:`ctxmt_cli.models.safetensors_file`),
told apart by their first bytes; both are checked by :mod:`ctxmt_cli.models.checkpoint_check` before use.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ctxmt_cli.config import Recipe
from ctxmt_cli.core.batch import VocabInfo
from ctxmt_cli.device import resolve_device
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.models.checkpoint_check import CheckedCheckpoint, check_checkpoint
from ctxmt_cli.models.families import build_model
from ctxmt_cli.paths import check_input_file


def _load(path: Path, device: str | torch.device) -> Any:
    """The file's contents: a safetensors checkpoint, or a torch one unpickled with ``weights_only=True`` (the one
    ``torch.load`` of ctxmt: a pickle that would run code is refused, never run)."""
    from ctxmt_cli.models.safetensors_file import is_safetensors, read_safetensors

    if is_safetensors(path):
        return read_safetensors(path, device)
    try:
        with warnings.catch_warnings():     # torch's own warning about a foreign file would be a second line
            warnings.simplefilter("ignore")
            return torch.load(path, map_location=device, weights_only=True)
    except PermissionError:             # unreadable is not damaged: the CLI words it as a permission problem
        raise
    except Exception as err:  # noqa: BLE001 - any unpickling failure means "not our file"
        raise CtxmtError(f"{path} is not a readable ctxmt checkpoint ({type(err).__name__}); "
                         "it may be truncated or from another tool") from None


def open_checkpoint(path: Path, device: str | torch.device = "cpu") -> CheckedCheckpoint:
    """Read a checkpoint file (``.pt`` or ``.safetensors``) and check its structure
    (:func:`~ctxmt_cli.models.checkpoint_check.check_checkpoint`): a missing, truncated, foreign or malformed file
    is a one-line CtxmtError naming it; every command that loads a checkpoint comes through here."""
    path = check_input_file(Path(path), "checkpoint", "give a checkpoint_*.pt written by ctxmt train (or a "
                            ".safetensors written by ctxmt export safetensors)")
    return check_checkpoint(_load(path, device), path)


def read_checkpoint(path: Path, device: str | torch.device = "cpu") -> dict:
    """The checked contents of a checkpoint file (see :func:`open_checkpoint`) as a dict."""
    return open_checkpoint(path, device).raw


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
    checked = open_checkpoint(path)
    model = build_model(checked.recipe.model, checked.vocab)
    load_state_strict(model, checked.raw["model"], checked.path)
    model.to(torch_device(device)).eval()
    return LoadedModel(model, checked.recipe, checked.tokenizer, checked.vocab, dict(checked.raw.get("meta") or {}))
