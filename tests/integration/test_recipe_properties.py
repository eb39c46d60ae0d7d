"""Generated recipes and ``--set`` overrides (Hypothesis): each one either validates, or ``ctxmt train --dry-run``
exits 2 with one line naming the file or the ``--set`` (or, for dimensions that cannot fit, what to lower), never a
traceback, quickly, and writing nothing.

The recipes are the quickstart's, perturbed: keys of every section and random ones set to random values (huge,
negative and non-finite numbers, strings, lists, nested mappings), and the YAML text itself pushed past the loader's
bounds (deep nesting, alias bombs, self-referring aliases). ``CTXMT_MEMORY_LIMIT`` keeps a valid recipe's model
small, so a generated ``d_model: 9000`` is refused by the memory check instead of being built.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxmt_cli.config import FAMILY_CONFIGS, DataConfig, DecodeConfig, TrainConfig
from tests.integration.conftest import QUICKSTART, run_cli

BASE = yaml.safe_load(QUICKSTART.read_text(encoding="utf-8"))
#: every key a recipe section has, as (section, key); the model's of every family
KEYS = sorted({("data", k) for k in DataConfig.model_fields} | {("train", k) for k in TrainConfig.model_fields}
              | {("decode", k) for k in DecodeConfig.model_fields}
              | {("model", k) for cls in FAMILY_CONFIGS.values() for k in cls.model_fields})
#: seconds one example may take (a dry run of a small model on a loaded CI machine takes one or two)
QUICK = 30.0

names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12)
scalars = st.one_of(
    st.integers(min_value=-2**70, max_value=2**70), st.sampled_from([0, 1, -1, 2**31, 2**32, 2**63, 2**65, 10**9]),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([float("nan"), float("inf"), 1e308, -0.0]),
    st.booleans(), st.none(), st.text(max_size=16), st.sampled_from(["auto", "off", "1e9", "small", "concat"]))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(names, inner, max_size=3),
                      max_leaves=12)
paths = st.one_of(st.sampled_from(KEYS).map(list), st.lists(names, min_size=1, max_size=4))


def _perturbed(changes: list) -> dict:
    """The quickstart recipe with each (key path, value) of ``changes`` written in (None value: the key removed)."""
    raw = yaml.safe_load(yaml.safe_dump(BASE))
    for path, value, remove in changes:
        node = raw
        for part in path[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                break
            node = child
        else:
            if remove:
                node.pop(path[-1], None)
            else:
                node[path[-1]] = value
    return raw


@st.composite
def recipe_texts(draw) -> str:
    """YAML text of a perturbed recipe, sometimes pushed past the loader's bounds."""
    changes = draw(st.lists(st.tuples(paths, values, st.booleans()), max_size=4))
    text = yaml.safe_dump(_perturbed(changes), sort_keys=False)
    kind = draw(st.sampled_from(["plain", "plain", "deep", "bomb", "self", "anchors"]))
    section = draw(st.sampled_from(["train", "model", "extra"]))
    if kind == "deep":
        depth = draw(st.integers(min_value=1, max_value=5000))
        text += f"{section}_deep: " + "[" * depth + "]" * depth + "\n"
    elif kind == "bomb":
        levels, fan = draw(st.integers(min_value=2, max_value=12)), draw(st.integers(min_value=2, max_value=12))
        text += f"b0: &b0 [{', '.join(['x'] * fan)}]\n" + "".join(
            f"b{i}: &b{i} [{', '.join([f'*b{i - 1}'] * fan)}]\n" for i in range(1, levels))
    elif kind == "self":
        text += "loop: &loop\n  again: [*loop]\n"
    elif kind == "anchors":                       # ordinary anchors and merges: a recipe may use them
        text = "_shared: &shared {lr: 0.001}\n" + text
    return text


def _override_texts():
    rendered = values.map(lambda v: yaml.safe_dump(v, default_flow_style=True).strip().removesuffix("..."))
    raw = st.text(alphabet="ab01.-e:[]{}&*!|>'\"#, \t", max_size=40)
    deep = st.integers(min_value=1, max_value=4000).map(lambda n: "[" * n + "]" * n)
    return st.tuples(paths.map(".".join) | st.text(max_size=12), st.one_of(rendered, raw, deep)).map(
        lambda kv: f"{kv[0]}={kv[1].strip()}")


def _snapshot(root: Path) -> dict:
    return {str(p): p.read_bytes() if p.is_file() else None for p in root.rglob("*")}


def _check(args: list, named: str, root: Path, keep: Path) -> None:
    """Run ``ctxmt ARGS``: exit 0, or exit 2 with one line naming ``named``; quick, no traceback, nothing written."""
    before = _snapshot(root)
    started = time.perf_counter()
    result = run_cli(*args)
    elapsed = time.perf_counter() - started
    assert "Traceback" not in result.output, result.output
    assert result.exit_code in (0, 2), result.output
    if result.exit_code == 2:
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("ctxmt: error: "), result.stderr
        assert named in lines[0] or "needs about" in lines[0], lines[0]
    assert elapsed < QUICK, f"{elapsed:.1f} s: {args}"
    assert {k: v for k, v in _snapshot(root).items() if k != str(keep)} == \
        {k: v for k, v in before.items() if k != str(keep)}


@pytest.fixture
def place(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CTXMT_MEMORY_LIMIT", "64M")
    return tmp_path


@given(text=recipe_texts())
def test_a_generated_recipe_validates_or_is_one_line_naming_it(text, place):
    recipe = place / "recipe.yaml"
    recipe.write_text(text, encoding="utf-8")
    _check(["train", recipe, "--dry-run"], str(recipe), place, recipe)


@given(override=_override_texts())
def test_a_generated_set_validates_or_is_one_line_naming_it(override, place):
    _check(["train", QUICKSTART, "--dry-run", "--set", override], "--set", place, place / "none")


@pytest.mark.slow
@settings(max_examples=400)
@given(text=recipe_texts(), override=_override_texts())
def test_many_generated_recipes_and_sets(text, override, place):
    recipe = place / "recipe.yaml"
    recipe.write_text(text, encoding="utf-8")
    _check(["train", recipe, "--dry-run", "--set", override], "", place, recipe)
