"""What ``--resume`` may continue with: the recipe stored in the checkpoint against the recipe given now.

A resumed run that silently trained on with another learning rate, dropout, label smoothing, batch size, seed
or budget would no longer be the run its checkpoints and metrics describe. So every recipe value is compared
(after both recipes are validated and resolved the same way, so a default that a newer version added is not a
change), and a difference refuses the resume in one line listing each key as ``old → new`` — unless the user
names it in ``--allow-changed KEY[,KEY...]`` (a section, e.g. ``model.shift``, allows every key under it).
Accepted changes are printed, written to ``metrics.jsonl`` as a ``message`` row and kept in the checkpoint's
``state.recipe_history``.

Not compared, because they never change what is trained (:data:`NOT_COMPARED`): the recipe's ``name`` and
``description``; ``train.save_dir`` (the run may have been moved, and it is where the checkpoint was found);
what is logged and kept on disk (``train.log_every``, ``train.keep_checkpoints``); machine settings
(``train.threads``, ``train.compile``); and the ``decode`` section (defaults for translating, never read by
training). ``data.path`` is compared as a place: the same directory under another spelling is no change.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import Any

from ctxmt_cli.config import Recipe, recipe_to_dict, validate_recipe
from ctxmt_cli.errors import CtxmtError, OptionError, option

#: recipe keys (or sections) that are never compared; see the module docstring for why
NOT_COMPARED = ("name", "description", "train.save_dir", "train.log_every", "train.keep_checkpoints",
                "train.threads", "train.compile", "decode")


def flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    """``{"train": {"lr": 1}}`` → ``{"train.lr": 1}``; lists and other values are leaves."""
    if not isinstance(tree, dict) or (prefix and not tree):
        return {prefix: tree}
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        flat.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    return flat


def _under(key: str, sections: Iterable[str]) -> bool:
    """Whether ``key`` is one of ``sections`` or lies under one of them."""
    return any(key == s or key.startswith(s + ".") for s in sections)


def _same_place(old: Any, new: Any) -> bool:
    """``data.path``: the same directory, however it is spelled."""
    if old == new:
        return True
    try:
        return isinstance(old, str) and isinstance(new, str) and os.path.samefile(old, new)
    except OSError:
        return False


def recipe_changes(stored: dict, recipe: Recipe, source: str) -> dict[str, tuple[Any, Any]]:
    """``{key: (stored value, new value)}`` for every compared key that differs (see the module docstring)."""
    old = flatten(recipe_to_dict(validate_recipe(stored, source, stored=True)))
    new = flatten(recipe_to_dict(recipe))
    changes = {}
    for key in sorted(set(old) | set(new)):
        if _under(key, NOT_COMPARED):
            continue
        before, after = old.get(key), new.get(key)
        same = _same_place(before, after) if key == "data.path" else before == after
        if not same:
            changes[key] = (before, after)
    return changes


def describe(changes: dict[str, tuple[Any, Any]]) -> str:
    """``train.lr 0.001 → 0.002, model.dropout 0.1 → 0.3``."""

    def show(value: Any) -> str:                      # one spelling for every value
        return json.dumps(value, ensure_ascii=False)

    return ", ".join(f"{key} {show(a)} → {show(b)}" for key, (a, b) in changes.items())


def parse_allowed(values: Iterable[str], recipe: Recipe) -> tuple[str, ...]:
    """``--allow-changed`` values (repeatable, comma-separated) as recipe keys; a key the recipe does not have
    (a typo would otherwise allow nothing) is one line."""
    keys = tuple(k.strip() for v in values for k in str(v).split(",") if k.strip())
    known = flatten(recipe_to_dict(recipe))
    for key in keys:
        if not any(_under(k, (key,)) or _under(key, (k,)) for k in known):   # a section, a key, or below one
            near = sorted(k for k in known if k.split(".")[-1] == key.split(".")[-1])
            hint = f" (did you mean {near[0]}?)" if near else " (keys are dotted paths, e.g. train.lr)"
            raise OptionError("allow_changed", key, f"the recipe has no such key{hint}")
    return keys


def check_changes(changes: dict[str, tuple[Any, Any]], allowed: Iterable[str], path) -> None:
    """Refuse the changes ``allowed`` does not name, in one line with each ``old → new`` and the option to pass."""
    allowed = tuple(allowed)
    refused = {k: v for k, v in changes.items() if not _under(k, allowed)}
    if refused:
        raise CtxmtError(f"{path} was trained with other recipe values: {describe(refused)}; resume with the "
                         f"values it was trained with, or accept the change with {option('allow_changed')} "
                         f"{','.join(refused)} (recorded in the run)")


def record_changes(reporter, history: list, step: int, changes: dict) -> None:
    """Recipe changes accepted with ``--allow-changed`` at ``step``: printed, a ``message`` row in metrics.jsonl
    (through ``reporter``), and appended to ``history`` (the run's ``state.recipe_history``, so every later
    checkpoint carries them)."""
    if not changes:
        return
    changed = {k: list(v) for k, v in changes.items()}
    history.append({"step": step, "changed": changed})
    # a flag as data: the training log records the command line's permission
    reporter.record_message(step, f"resumed at step {step} with changed recipe values (--allow-changed): "
                                  f"{describe(changes)}", changed=changed)
