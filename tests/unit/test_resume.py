"""ctxmt_cli.train.resume: which recipe values a --resume compares, how a difference is refused or allowed."""

from __future__ import annotations

import pytest

from ctxmt_cli.config import recipe_to_dict, validate_recipe
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.train.resume import NOT_COMPARED, check_changes, describe, flatten, parse_allowed, recipe_changes

BASE = {"data": {"path": "prepared"}, "model": {"family": "concat", "shift": {"src": 3, "tgt": 2}},
        "train": {"save_dir": "runs/a", "lr": 1e-3}}


def recipe(**sections):
    raw = {k: dict(v) for k, v in BASE.items()}
    for section, values in sections.items():
        if isinstance(values, dict):
            raw.setdefault(section, {}).update(values)
        else:                                                       # name, description
            raw[section] = values
    return validate_recipe(raw)


def test_flatten_gives_dotted_leaves():
    assert flatten({"a": {"b": 1, "c": {"d": [1, 2]}}, "e": {}}) == {"a.b": 1, "a.c.d": [1, 2], "e": {}}


def test_every_training_value_is_compared_and_nothing_else():
    stored = recipe_to_dict(recipe())
    changed = recipe(train={"lr": 2e-3, "max_steps": 9, "seed": 4, "label_smoothing": 0.2},
                     model={"dropout": 0.3, "shift": {"src": 3, "tgt": 1}}, data={"max_tokens": 99})
    assert recipe_changes(stored, changed, "ck") == {
        "data.max_tokens": (4096, 99), "model.dropout": (0.1, 0.3), "model.shift.tgt": (2, 1),
        "train.label_smoothing": (0.1, 0.2), "train.lr": (1e-3, 2e-3), "train.max_steps": (100000, 9),
        "train.seed": (1, 4)}
    # where files go, what is logged or kept, machine settings and decoding defaults never matter for resuming
    same = recipe(train={"save_dir": "elsewhere", "log_every": 7, "keep_checkpoints": 2, "threads": 3,
                         "compile": True}, decode={"beam": 9}, name="renamed", description="moved")
    assert recipe_changes(stored, same, "ck") == {}
    assert {"train.save_dir", "decode", "name"} <= set(NOT_COMPARED)


def test_data_path_is_compared_as_a_place(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "prepared").mkdir()
    (tmp_path / "other").mkdir()
    stored = recipe_to_dict(recipe())
    assert recipe_changes(stored, recipe(data={"path": str(tmp_path / "prepared")}), "ck") == {}
    assert recipe_changes(stored, recipe(data={"path": "other"}), "ck") == {"data.path": ("prepared", "other")}


def test_a_stored_recipe_without_a_newer_default_is_no_change():
    stored = recipe_to_dict(recipe())
    del stored["train"]["weight_decay"]                      # written before the key existed: its default applies
    assert recipe_changes(stored, recipe(), "ck") == {}


def test_refusal_names_each_change_and_the_option_and_allowing_a_section_covers_its_keys():
    changes = {"model.shift.tgt": (2, 1), "train.lr": (0.001, 0.002)}
    with pytest.raises(CtxmtError) as err:
        check_changes(changes, ["train.lr"], "run/checkpoint_last.pt")
    assert str(err.value).startswith("run/checkpoint_last.pt was trained with other recipe values: "
                                     "model.shift.tgt 2 → 1;")
    assert "`allow_changed` model.shift.tgt" in str(err.value) and "train.lr" not in str(err.value)
    check_changes(changes, ["train.lr", "model.shift"], "ck")            # a section allows every key under it
    assert describe({"name": ("a", "b")}) == 'name "a" → "b"'


def test_allowed_keys_are_comma_separated_and_checked_against_the_recipe():
    r = recipe()
    assert parse_allowed(["train.lr,train.max_steps", "model"], r) == ("train.lr", "train.max_steps", "model")
    assert parse_allowed(["model.shift.src"], r) == ("model.shift.src",)
    with pytest.raises(CtxmtError, match=r"allow_changed='train.lrr': the recipe has no such key"):
        parse_allowed(["train.lrr"], r)
    with pytest.raises(CtxmtError, match=r"did you mean train.max_steps"):
        parse_allowed(["max_steps"], r)
