"""Choosing the quickstart's systems and building their recipes: names, budgets, paths, the packaged recipes."""

from __future__ import annotations

import shutil

import pytest
import yaml

from ctxmt_cli.cli import quickstart as Q
from ctxmt_cli.config import load_recipe
from ctxmt_cli.errors import CtxmtError


def test_default_systems_and_every_recipe_file_is_a_system():
    assert Q.parse_systems(None) == ["concat", "sentence"]
    assert set(Q.available_systems()) == {p.stem for p in Q.RECIPE_DIR.glob("*.yaml")}
    assert {"concat", "sentence", "caching_tokens", "grouping"} <= set(Q.available_systems())
    assert Q.parse_systems(" grouping ,sentence,") == ["grouping", "sentence"]      # order kept, blanks dropped


@pytest.mark.parametrize("text,needle", [("concat,nope", "'nope'"), ("sentence,sentence", "twice"), (",", "empty")])
def test_bad_systems_are_one_line(text, needle):
    with pytest.raises(CtxmtError, match=needle) as err:
        Q.parse_systems(text)
    assert "\n" not in str(err.value)


def test_system_recipe_moves_paths_under_out_and_applies_seed_and_budget(tmp_path):
    for name in Q.available_systems():
        own = load_recipe(Q.RECIPE_DIR / f"{name}.yaml")
        recipe = Q.system_recipe(name, tmp_path, seed=5)
        assert recipe.data.path == str(tmp_path / "data") and recipe.train.save_dir == str(tmp_path / name)
        assert recipe.train.seed == 5 and recipe.train.max_steps == own.train.max_steps
        assert recipe.train.max_minutes is None and recipe.train.threads == own.train.threads
        assert recipe.model == own.model
        assert Q.system_recipe(name, tmp_path, updates=7).train.max_steps == 7


def test_a_wall_clock_budget_is_refused(tmp_path, monkeypatch):
    folder = tmp_path / "recipes"
    folder.mkdir()
    raw = yaml.safe_load((Q.RECIPE_DIR / "sentence.yaml").read_text(encoding="utf-8"))
    raw["train"]["max_minutes"] = 3.0
    (folder / "sentence.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")
    monkeypatch.setattr(Q, "RECIPE_DIR", folder)
    with pytest.raises(CtxmtError, match="max_minutes"):
        Q.system_recipe("sentence", tmp_path / "out")


def test_the_quickstart_recipes_are_the_packaged_ones():
    """The quickstart reads the packaged recipes (no copy of its own)."""
    from ctxmt_cli.recipe_catalog import RECIPES_DIR, packaged_recipes

    assert Q.RECIPE_DIR == RECIPES_DIR / "quickstart"
    assert Q.available_systems() == [r.name.split("/")[1] for r in packaged_recipes("quickstart")]


def test_a_system_without_a_recipe_is_refused_naming_the_known_ones(tmp_path, monkeypatch):
    folder = tmp_path / "recipes"
    folder.mkdir()
    shutil.copy(Q.RECIPE_DIR / "sentence.yaml", folder / "sentence.yaml")
    monkeypatch.setattr(Q, "RECIPE_DIR", folder)
    assert Q.available_systems() == ["sentence"]
    with pytest.raises(CtxmtError, match="'concat': no recipe at .*available: sentence$"):
        Q.system_recipe("concat", tmp_path)


def test_a_new_recipe_file_is_a_new_system(tmp_path, monkeypatch):
    folder = shutil.copytree(Q.RECIPE_DIR, tmp_path / "recipes")
    shutil.copy(folder / "sentence.yaml", folder / "sentence_big.yaml")
    monkeypatch.setattr(Q, "RECIPE_DIR", folder)
    assert "sentence_big" in Q.available_systems()
    assert Q.system_recipe("sentence_big", tmp_path).train.save_dir == str(tmp_path / "sentence_big")
