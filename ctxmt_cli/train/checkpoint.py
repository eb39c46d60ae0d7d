"""Checkpoints: atomic writes, self-contained payloads, pruning, averaging, loading.

A checkpoint carries everything needed to (a) resume training bit for bit —
model, optimiser, grad scaler, step/epoch/position, best metric, patience
counter, history, every rank's RNG states — and (b) rebuild the model with no
prepared data at hand: the resolved recipe, the tokenizer's state (its
SentencePiece models), the :class:`VocabInfo`, a subset of ``meta.json``, the
family name and the ctxmt version. Files are written through :mod:`ctxmt_cli.outputs`
(a temp file in the same directory, renamed over the target), so a crash never
leaves a half-written checkpoint behind a valid name; each carries the hash of every tensor in it
(:mod:`ctxmt_cli.models.tensor_hashes`), so a file damaged later is refused when read.

Payloads hold only tensors and plain Python values, so they load with
``torch.load(weights_only=True)`` (no arbitrary unpickling).
"""

from __future__ import annotations

import random
import re
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
from torch import nn

import ctxmt_cli
from ctxmt_cli.core.batch import VocabInfo
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.models.checkpoint_check import CHECKPOINT_FORMAT
from ctxmt_cli.models.loading import read_checkpoint
from ctxmt_cli.models.tensor_hashes import with_tensor_hashes
from ctxmt_cli.outputs import copy_atomic, remove_stale, torch_save, write_atomic

STEP_FILE = re.compile(r"^checkpoint_(\d+)\.pt$")
TMP_PREFIX = ".tmp-"          # the temp files of earlier ctxmt builds (removed when found)
#: meta.json keys a checkpoint keeps (no local paths, no file names of the prepared dir)
META_KEYS = ("src_lang", "tgt_lang", "joint", "moses", "vocab_size", "specials", "max_sentence_tokens",
             "mean_sentence_length", "tokenizer_fingerprint", "splits", "docrepair")


# ---- writing ------------------------------------------------------------------------------------
def save_checkpoint(payload: dict, path: Path) -> Path:
    """Write a checkpoint atomically: safetensors when ``path`` ends in ``.safetensors`` (weights, recipe and
    tokenizer only: :mod:`ctxmt_cli.models.safetensors_file`), else ``torch.save``. Either carries the hash of
    every tensor it holds (:mod:`ctxmt_cli.models.tensor_hashes`), checked when it is read."""
    if Path(path).suffix == ".safetensors":
        from ctxmt_cli.models.safetensors_file import safetensors_bytes

        data = safetensors_bytes(payload)
        return write_atomic(path, data)
    return torch_save(with_tensor_hashes(payload), path)


# ---- RNG state -----------------------------------------------------------------------------------
def capture_rng() -> dict:
    """This process's RNG states (torch CPU/CUDA, numpy, python) as weights_only-safe values."""
    np_state = np.random.get_state()
    state = {
        "torch": torch.get_rng_state(),
        "numpy": (np_state[0], torch.from_numpy(np.asarray(np_state[1], dtype=np.int64)), *np_state[2:]),
        "python": random.getstate(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }
    return state


def restore_rng(state: dict) -> None:
    """Inverse of :func:`capture_rng`."""
    torch.set_rng_state(state["torch"])
    name, keys, *rest = state["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), *rest))
    py = state["python"]
    random.setstate((py[0], tuple(py[1]), py[2]))
    if state.get("cuda") and torch.cuda.is_available() and len(state["cuda"]) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(state["cuda"])


# ---- payloads ------------------------------------------------------------------------------------
def model_payload(recipe_dict: dict, tokenizer, vocab: VocabInfo, meta: dict, model: nn.Module) -> dict:
    """The part of a checkpoint that rebuilds the model (shared by training and averaged checkpoints)."""
    return {
        "format": CHECKPOINT_FORMAT,
        "version": ctxmt_cli.__version__,
        "family": recipe_dict["model"]["family"],
        "recipe": recipe_dict,
        "tokenizer": tokenizer.to_state(),
        "vocab_fingerprint": tokenizer.fingerprint(),
        "vocab": asdict(vocab),
        "meta": {k: meta[k] for k in META_KEYS if k in meta},
        "model": {k: v.detach().cpu() for k, v in model.state_dict().items()},
    }


def check_resumable(ckpt: dict, path: Path) -> None:
    """A checkpoint ``--resume`` can continue from: it carries the optimiser and the training counters (an averaged
    or exported checkpoint does not)."""
    optimizer = ckpt.get("optimizer")
    if not isinstance(optimizer, dict) or not {"state", "param_groups"} <= set(optimizer) or not ckpt.get("state"):
        raise CtxmtError(f"{path} holds no optimiser state or training counters (an averaged or exported "
                         "checkpoint?); --resume continues only from a checkpoint_*.pt that ctxmt train wrote, "
                         "or start a fresh run in another train.save_dir")


def check_compatible(ckpt: dict, path: Path, family: str, fingerprint: str, data_dir: str) -> None:
    """Refuse to resume from a checkpoint of another family or vocabulary than the recipe's."""
    if ckpt.get("family") != family or ckpt.get("vocab_fingerprint") != fingerprint:
        raise CtxmtError(
            f"{path} was trained with family {ckpt.get('family')} / vocabulary fingerprint "
            f"{str(ckpt.get('vocab_fingerprint'))[:12]}; the recipe asks for family {family} / "
            f"{data_dir} has fingerprint {fingerprint[:12]}; use the recipe and data it was trained with, "
            "or another train.save_dir")


# ---- step checkpoints on disk ---------------------------------------------------------------------
def step_checkpoints(save_dir: Path) -> dict[int, Path]:
    """``{step: path}`` of the ``checkpoint_{step}.pt`` files in ``save_dir``."""
    found = {}
    for p in Path(save_dir).glob("checkpoint_*.pt"):
        m = STEP_FILE.match(p.name)
        if m:
            found[int(m.group(1))] = p
    return dict(sorted(found.items()))


def remove_stale_temps(save_dir: Path) -> list[Path]:
    """Delete the temp files a killed run left behind (a kill -9 skips every cleanup): ctxmt's own naming
    (:func:`ctxmt_cli.outputs.remove_stale`) and the ``.tmp-checkpoint_*`` files of earlier versions."""
    stale = sorted(Path(save_dir).glob(f"{TMP_PREFIX}checkpoint_*")) if Path(save_dir).is_dir() else []
    for path in stale:
        path.unlink(missing_ok=True)
    return stale + remove_stale(save_dir)


def restore_copies(save_dir: Path, resumed_from: Path, best_step: int | None) -> list[Path]:
    """Finish the best/last copies that a kill between writing ``checkpoint_{step}.pt`` and copying it prevented.

    A run resumed from a step file (``checkpoint_last.pt`` missing) gets ``checkpoint_last.pt`` from it; a
    missing ``checkpoint_best.pt``, or one that the step file it was resumed from should have replaced, is
    copied from ``checkpoint_{best_step}.pt``. Without this a run whose validations never improve again
    would report a ``checkpoint_best.pt`` that does not exist. Returns the files written.
    """
    save_dir, resumed_from = Path(save_dir), Path(resumed_from)
    last, best = save_dir / "checkpoint_last.pt", save_dir / "checkpoint_best.pt"
    from_step = resumed_from.resolve() != last.resolve()
    written = []
    if best_step is not None:
        source = step_checkpoints(save_dir).get(best_step)
        # resumed from the best step's own file: the copy to best may have been cut off mid-way
        stale = from_step and source is not None and source.resolve() == resumed_from.resolve()
        if source is not None and (stale or not best.is_file()):
            written.append(copy_atomic(source, best))
    if from_step:
        written.append(copy_atomic(resumed_from, last))
    return written


def averaging_steps(steps: list[int], best_step: int | None, n: int) -> list[int]:
    """The best step and the (up to) ``n`` step checkpoints that follow it, as Lupo et al. (2022, 2023) average."""
    if best_step is None:
        return []
    return [best_step] + [s for s in sorted(steps) if s > best_step][:n]


def last_steps(steps: list[int], n: int) -> list[int]:
    """The (up to) ``n`` newest step checkpoints, as Morishita et al. (2021, App. A.2) average the last eight."""
    return sorted(steps)[-n:] if n > 0 else []


def prune_checkpoints(save_dir: Path, keep: int, best_step: int | None, average_n: int) -> list[Path]:
    """Delete old step checkpoints beyond the newest ``keep``, sparing the best and those averaging needs."""
    found = step_checkpoints(save_dir)
    steps = sorted(found)
    protected = set(steps[-keep:]) | set(averaging_steps(steps, best_step, average_n))
    removed = []
    for step in steps:
        if step not in protected:
            found[step].unlink(missing_ok=True)
            removed.append(found[step])
    return removed


# ---- averaging ------------------------------------------------------------------------------------
def average_checkpoints(paths: list[Path], out: Path) -> Path:
    """Average the model weights of ``paths`` (same family, vocabulary and shapes) into ``out``.

    Floating-point tensors are averaged in float64 and cast back; other tensors
    (integer buffers) and every non-model field come from the first checkpoint.
    The result has no optimiser state: it is for inference, not for resuming.
    """
    paths = [Path(p) for p in paths]
    if not paths:
        raise CtxmtError("no checkpoints to average; give at least one checkpoint_*.pt")
    first = read_checkpoint(paths[0])
    sums = {k: v.double() if v.is_floating_point() else v for k, v in first["model"].items()}
    for path in paths[1:]:
        ckpt = read_checkpoint(path)
        _check_same_model(first, ckpt, paths[0], path)
        for key, value in ckpt["model"].items():
            if value.is_floating_point():
                sums[key] += value.double()
    n = len(paths)
    averaged = {k: (v / n).to(first["model"][k].dtype) if v.is_floating_point() else v for k, v in sums.items()}
    keep = ("format", "version", "family", "recipe", "tokenizer", "vocab_fingerprint", "vocab", "meta", "init_from")
    payload = {k: first[k] for k in keep if k in first}
    payload.update(model=averaged, averaged_from=[str(p) for p in paths], state=first.get("state"))
    return save_checkpoint(payload, Path(out))


def _check_same_model(a: dict, b: dict, path_a: Path, path_b: Path) -> None:
    if a.get("family") != b.get("family") or a.get("vocab_fingerprint") != b.get("vocab_fingerprint"):
        raise CtxmtError(f"cannot average {path_b} with {path_a}: different family or vocabulary")
    shapes_a = {k: tuple(v.shape) for k, v in a["model"].items()}
    shapes_b = {k: tuple(v.shape) for k, v in b["model"].items()}
    if shapes_a != shapes_b:
        raise CtxmtError(f"cannot average {path_b} with {path_a}: the models' parameters differ")


def averages(*, best_step: int | None, around_best: int, last: int) -> bool:
    """Whether a run's recipe averages checkpoints: around a best step it has, or its last ones."""
    return (around_best > 0 and best_step is not None) or last > 0


def average_run(save_dir: Path, *, best_step: int | None, around_best: int, last: int) -> tuple | None:
    """A run's ``checkpoint_avg.pt``: from the best and the ``around_best`` step checkpoints after it
    (``train.average_checkpoints``), or from the ``last`` step checkpoints (``train.average_last``). Returns
    (the file, the steps averaged), or None when the recipe averages nothing."""
    if not averages(best_step=best_step, around_best=around_best, last=last):
        return None
    found = step_checkpoints(save_dir)
    steps = last_steps(list(found), last) if last else averaging_steps(list(found), best_step, around_best)
    paths = [found.get(s, save_dir / "checkpoint_best.pt") for s in steps]
    return average_checkpoints(paths, save_dir / "checkpoint_avg.pt"), steps
