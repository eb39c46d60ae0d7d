"""The packaged recipes and how a recipe argument is found: names, paths, the checkout's old recipes/ paths, copies."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import ctxmt_cli
from ctxmt_cli import recipe_catalog as C
from ctxmt_cli.config import load_recipe
from ctxmt_cli.errors import CtxmtError

NAME = "lupo2022_focused_concat/en_de_s4to4_shift_cd"


def test_a_checkout_reads_its_top_level_recipes_and_every_file_is_listed():
    """In a checkout the recipes are the top-level recipes/ folder (a wheel carries them inside the package:
    tests/integration/test_wheel.py)."""
    assert C.RECIPES_DIR == Path(ctxmt_cli.__file__).resolve().parents[1] / "recipes"
    on_disk = sorted(p for p in C.RECIPES_DIR.rglob("*.yaml"))
    listed = C.packaged_recipes()
    assert [r.path for r in listed] == on_disk and len(listed) > 150
    assert [r.name for r in listed] == sorted(r.name for r in listed)
    assert {"quickstart", "lupo2022_focused_concat", "yang2023_hanoit"} <= set(C.recipe_folders())
    assert {r.folder for r in listed} == set(C.recipe_folders())


def test_a_folder_lists_only_its_recipes_and_an_unknown_folder_names_the_known():
    quick = C.packaged_recipes("quickstart")
    assert quick and all(r.name.startswith("quickstart/") for r in quick)
    with pytest.raises(CtxmtError, match="no recipe folder 'nope'; folders: .*quickstart"):
        C.packaged_recipes("nope")


def test_family_and_summary_come_from_the_file(tmp_path):
    by_name = {r.name: r for r in C.packaged_recipes()}
    for name, recipe in by_name.items():
        assert recipe.summary() == load_recipe(recipe.path).description, name     # every recipe describes itself
    for name, recipe in list(by_name.items())[::15]:
        assert recipe.family() == load_recipe(recipe.path).model.family, name
    text = by_name["yang2023_hanoit/table1_iwslt17_hanoit"].path.read_text(encoding="utf-8")
    (tmp_path / "a.yaml").write_text("\n".join(line for line in text.splitlines()
                                               if not line.startswith("description:")), encoding="utf-8")
    assert C.RecipeInfo("x/a", tmp_path / "a.yaml").summary().startswith("Reproduces: Table 1 row 'HanoiT")
    (tmp_path / "b.yaml").write_text("# First line.\n# Second.\nmodel: {family: concat}\n", encoding="utf-8")
    assert C.RecipeInfo("x/b", tmp_path / "b.yaml").summary() == "First line."
    assert C.RecipeInfo("x/b", tmp_path / "b.yaml").family() == "concat"


@pytest.mark.parametrize("text", [NAME, NAME + ".yaml", "recipes/" + NAME + ".yaml", "./recipes/" + NAME + ".yaml",
                                  "ctxmt_cli/recipes/" + NAME, "hanoit_6_0"])
def test_names_and_the_checkout_paths_find_the_packaged_file(text, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)                       # outside any checkout: nothing relative exists
    expected = C.RECIPES_DIR / (NAME if "/" in text else "quickstart/hanoit_6_0")
    assert C.resolve_recipe(text) == expected.with_suffix(".yaml")


def test_an_existing_file_wins_and_an_existing_directory_does_not(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    own = tmp_path / "quickstart" / "concat.yaml"
    own.parent.mkdir()
    own.write_text((C.RECIPES_DIR / "quickstart" / "sentence.yaml").read_text(encoding="utf-8"))
    assert C.resolve_recipe("quickstart/concat.yaml") == Path("quickstart/concat.yaml")
    assert load_recipe("quickstart/concat.yaml").model.family == "sentence"
    (tmp_path / "quickstart" / "concat").mkdir()      # what `ctxmt quickstart --out quickstart` writes
    assert C.resolve_recipe("quickstart/concat") == C.RECIPES_DIR / "quickstart" / "concat.yaml"


@pytest.mark.parametrize("text,needles", [
    ("quickstart/concatt", ["recipe not found: quickstart/concatt", "did you mean quickstart/concat?",
                            "ctxmt recipes list"]),
    ("nothing_like_it.yaml", ["recipe not found: nothing_like_it.yaml", "ctxmt recipes list"]),
    ("en_de_base", ["in several folders", "lupo2022_focused_concat/en_de_base",
                    "lupo2023_sentence_position/en_de_base", "FOLDER/NAME"]),
])
def test_an_unknown_or_ambiguous_name_is_one_line(text, needles, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CtxmtError) as err:
        load_recipe(text)
    message = str(err.value)
    assert "\n" not in message and all(n in message for n in needles), message


def test_copy_a_recipe_and_a_folder_and_never_overwrite(tmp_path):
    [copy] = C.copy_recipes(NAME, tmp_path / "mine")
    assert copy == tmp_path / "mine" / "en_de_s4to4_shift_cd.yaml"
    assert copy.read_bytes() == (C.RECIPES_DIR / f"{NAME}.yaml").read_bytes()
    folder = C.copy_recipes("yang2023_hanoit", tmp_path / "hanoit")
    assert sorted(p.name for p in folder) == sorted(p.name for p in (C.RECIPES_DIR / "yang2023_hanoit").iterdir()
                                                   if p.is_file())
    assert os.access(tmp_path / "hanoit" / "real_iwslt17.sh", os.R_OK)
    copy.write_text("edited", encoding="utf-8")
    with pytest.raises(CtxmtError, match="already exists; nothing copied"):
        C.copy_recipes(NAME, tmp_path / "mine")
    assert copy.read_text(encoding="utf-8") == "edited"
    (tmp_path / "part").mkdir()
    (tmp_path / "part" / "table1_iwslt17_hanoit.yaml").write_text("mine", encoding="utf-8")
    with pytest.raises(CtxmtError, match="table1_iwslt17_hanoit.yaml already exists"):
        C.copy_recipes("yang2023_hanoit", tmp_path / "part")
    assert [p.name for p in (tmp_path / "part").iterdir()] == ["table1_iwslt17_hanoit.yaml"]   # nothing written


def test_copy_into_a_file_is_refused(tmp_path):
    (tmp_path / "afile").write_text("x", encoding="utf-8")
    with pytest.raises(CtxmtError, match="is a file, not a directory"):
        C.copy_recipes(NAME, tmp_path / "afile")


@pytest.mark.parametrize("name", ["", "  "])
def test_an_empty_recipe_name_is_not_taken_for_the_current_directory(name):
    for call in (C.resolve_recipe, C.find_packaged, lambda n: C.copy_recipes(n, Path("never-made"))):
        with pytest.raises(CtxmtError, match="the recipe name is empty") as err:
            call(name)
        assert "directory" not in str(err.value)
    assert not Path("never-made").exists()


def test_a_device_or_fifo_is_not_read_as_a_recipe(tmp_path):
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/null")):
        with pytest.raises(CtxmtError, match=f"recipe is not a regular file: {path}"):
            C.resolve_recipe(str(path))


def test_recipe_text_that_is_not_utf8_names_the_line(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_bytes(b"name: a\n\x00\xff\x10binary\n")
    with pytest.raises(CtxmtError, match=r"r\.yaml:2: not UTF-8 text \(byte 0xff\)"):
        C.read_recipe_text(path)
