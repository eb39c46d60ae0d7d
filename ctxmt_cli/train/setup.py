"""Everything the trainer builds before its first update: data, vocabulary, model, optimiser.

Also the pre-flight checks that must fail before anything is written: a missing
prepared directory, a save directory that already holds checkpoints (without
``--resume``), a checkpoint of another family or vocabulary (with it).
"""

from __future__ import annotations

import os
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ctxmt_cli.config import Recipe
from ctxmt_cli.core.batch import VocabInfo
from ctxmt_cli.data.windows import WindowDataset
from ctxmt_cli.errors import CtxmtError, option
from ctxmt_cli.models.loading import read_checkpoint
from ctxmt_cli.paths import check_output_dir
from ctxmt_cli.train.checkpoint import check_compatible, check_resumable, step_checkpoints
from ctxmt_cli.train.distributed import DistEnv, broadcast_object
from ctxmt_cli.train.resume import check_changes, recipe_changes


@dataclass
class TrainState:
    """Progress counters that a checkpoint saves and a resume restores."""

    step: int = 0                  # updates done
    epoch: int = 0                 # 0-based epoch of the next update
    position: int = 0              # this rank's micro-batches of ``epoch`` already consumed
    best: float = float("inf")     # best value of train.early_stop_on
    best_step: int | None = None
    bad: int = 0                   # validations since the last improvement
    last_valid_step: int = 0
    elapsed: float = 0.0           # training seconds before this process started
    history: list = field(default_factory=list)   # validation records
    recipe_history: list = field(default_factory=list)   # recipe changes accepted on --resume (--allow-changed)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> TrainState:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch (CPU and every CUDA device)."""
    random.seed(seed)
    np.random.seed(seed % (2 ** 32))
    torch.manual_seed(seed)


def open_prepared(recipe: Recipe):
    """The prepared dataset of ``data.path``; a missing directory is a one-line error."""
    from ctxmt_cli.data.store import PreparedData

    path = Path(recipe.data.path)
    if not path.is_dir():
        what = "is a file, not a directory" if path.exists() else "not found"
        raise CtxmtError(f"prepared data {what}: {path} (data.path); run ctxmt prepare to create it, "
                         "or point data.path at a prepared directory")
    return PreparedData(path)


def resolve_recipe(recipe: Recipe, meta: dict) -> Recipe:
    """The recipe with data-dependent model values filled in (e.g. ``shift: auto`` → a ShiftPair)."""
    from ctxmt_cli.models.families import resolve_model_config

    return recipe.model_copy(update={"model": resolve_model_config(recipe.model, meta)})


def init_source(recipe: Recipe, fingerprint: str, resume: bool = False) -> tuple[Recipe, Any | None, dict]:
    """(recipe, checkpoint, architecture changes) for ``train.init_from``: the checkpoint checked and its
    vocabulary compared with the prepared data's (``fingerprint``), the recipe given its architecture; without
    ``init_from`` the recipe as it is, None and no changes (:mod:`ctxmt_cli.train.init_from`). A run resumed from
    its own ``checkpoint_last.pt`` takes the architecture from there and needs the first checkpoint no more
    (None: nothing to load)."""
    if not recipe.train.init_from:
        return recipe, None, {}
    from ctxmt_cli.train.init_from import adopt_architecture, check_vocabulary, read_init_checkpoint

    last = Path(recipe.train.save_dir) / "checkpoint_last.pt"
    if resume and last.is_file():
        return adopt_architecture(recipe, read_init_checkpoint(last))[0], None, {}
    parent = read_init_checkpoint(recipe.train.init_from)
    check_vocabulary(parent, fingerprint, recipe.data.path)
    adopted, changes = adopt_architecture(recipe, parent)
    return adopted, parent, changes


def window_dataset(data, split: str, recipe: Recipe, vocab: VocabInfo, role: str) -> WindowDataset:
    """Context windows of ``split`` as the model family reads them (its inputs' windows: previous and, for a
    family reading them, next source sentences, a bilingual model's target concatenation); an empty split is an
    error. ``role``: "train" or "valid" (a family may cut training windows otherwise, e.g. random context)."""
    from ctxmt_cli.models.families import inputs_of

    ds = inputs_of(recipe.model).windows(data, split, recipe, vocab, role)
    if len(ds) == 0:
        raise CtxmtError(f"the {role} split {split!r} of {recipe.data.path} has no usable sentence pairs "
                         f"(all longer than data.max_window_tokens={recipe.data.max_window_tokens}?)")
    return ds


def _preflight(save_dir: Path, resume: bool, data: Path) -> tuple[str | None, Path | None]:
    """(error message, checkpoint to resume from) — decided on rank 0 only."""
    try:                               # a file or an unwritable place: say so before the first update
        if save_dir.is_dir() and Path(data).is_dir() and os.path.samefile(save_dir, data):
            raise CtxmtError(f"train.save_dir {save_dir} is the prepared dataset data.path {data}; checkpoints "
                             "go in a directory of their own: set another train.save_dir")
        check_output_dir(save_dir, "train.save_dir", inputs=[data])
    except CtxmtError as err:
        return str(err), None
    existing = step_checkpoints(save_dir) if save_dir.is_dir() else {}
    last = save_dir / "checkpoint_last.pt"
    has_any = bool(existing) or last.is_file() or (save_dir / "checkpoint_best.pt").is_file()
    if not resume:
        if has_any:
            return (f"{save_dir} already holds checkpoints; pass {option('resume')} to continue that run, "
                    "or set another train.save_dir (nothing was overwritten)"), None
        return None, None
    if last.is_file():
        return None, last
    if existing:                                   # killed between writing a step file and last
        return None, existing[max(existing)]
    return None, None


def _newest(save_dir: Path, path: Path) -> tuple[dict, Path]:
    """The checkpoint at ``path`` (``checkpoint_last.pt``), or the newest step file when that is further on: a
    kill between writing ``checkpoint_{step}.pt`` and copying it to ``checkpoint_last.pt`` left a complete
    step (its validation row already in ``metrics.jsonl``) that the resume continues from."""
    ckpt = read_checkpoint(path)
    steps = step_checkpoints(save_dir)
    newest = max(steps) if steps else None
    if newest is not None and path.name == "checkpoint_last.pt" and newest > (ckpt.get("state") or {}).get("step", 0):
        return read_checkpoint(steps[newest]), steps[newest]
    return ckpt, path


def _resume_from(save_dir: Path, path: Path, tokenizer, recipe: Recipe, allowed: tuple) -> dict:
    """Read and check the checkpoint to resume from (rank 0): resumable, same family and vocabulary, and a recipe
    that differs only in keys ``allowed`` names (the accepted changes go into ``ckpt["_changes"]``)."""
    ckpt, path = _newest(save_dir, path)
    check_resumable(ckpt, path)
    check_compatible(ckpt, path, recipe.model.family, tokenizer.fingerprint(), recipe.data.path)
    changes = recipe_changes(ckpt["recipe"], recipe, f"{path} (stored recipe)")
    check_changes(changes, allowed, path)
    ckpt["_path"], ckpt["_changes"] = str(path), changes
    return ckpt


def find_resume_checkpoint(save_dir: Path, resume: bool, env: DistEnv, tokenizer, recipe: Recipe,
                           allow_changed: tuple = ()) -> dict | None:
    """The checkpoint to resume from (read on rank 0, sent to every rank), or None for a fresh run; a recipe
    that differs from the stored one in a key not in ``allow_changed`` is refused (:mod:`~ctxmt_cli.train.resume`)."""
    decision = _preflight(save_dir, resume, Path(recipe.data.path)) if env.is_main else None
    error, path = broadcast_object(decision, env)
    if error:
        raise CtxmtError(error)
    ckpt, problem = None, None
    if env.is_main and path is not None:
        try:
            ckpt = _resume_from(save_dir, path, tokenizer, recipe, tuple(allow_changed))
        except CtxmtError as err:
            problem = str(err)
    problem = broadcast_object(problem, env)
    if problem:
        raise CtxmtError(problem)
    return broadcast_object(ckpt, env)


def rank_rng(ckpt: dict, env: DistEnv) -> Any | None:
    """This rank's saved RNG state when the checkpoint came from a job of the same size."""
    states = ckpt.get("rng") or []
    return states[env.rank] if len(states) == env.world else None
