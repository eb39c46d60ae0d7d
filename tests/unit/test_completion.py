"""ctxmt_cli.cli.completion: recipe names, folders, quickstart systems and corpus cards complete from what ships;
a recipe argument that names no packaged recipe completes as a path. Also through the shell's own protocol
(``_CTXMT_COMPLETE=complete_bash`` with ``COMP_WORDS``/``COMP_CWORD``), in a real process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ctxmt_cli.cli.completion import (
    complete_card,
    complete_path,
    complete_recipe,
    complete_recipe_folder,
    complete_recipe_or_folder,
    complete_systems,
)
from ctxmt_cli.data.cards import card_files
from ctxmt_cli.recipe_catalog import RECIPES_DIR, packaged_recipes, recipe_folders

ROOT = Path(__file__).resolve().parents[2]


def test_recipe_names_complete_from_the_catalog():
    quickstart = sorted(p.stem for p in (RECIPES_DIR / "quickstart").glob("*.yaml"))
    assert complete_recipe("quickstart/c") == [f"quickstart/{n}" for n in quickstart if n.startswith("c")]
    assert "quickstart/concat" in complete_recipe("quickstart/c")
    assert complete_recipe("") == [r.name for r in packaged_recipes()]
    assert complete_recipe("quickstart/concat") == ["quickstart/concat"]


def test_a_recipe_that_is_no_name_completes_as_a_path(tmp_path, monkeypatch):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "big.yaml").write_text("model: {}\n")
    (tmp_path / "mine" / "notes.txt").write_text("not a recipe\n")
    (tmp_path / "my.yml").write_text("model: {}\n")
    (tmp_path / ".hidden.yaml").write_text("model: {}\n")
    monkeypatch.chdir(tmp_path)
    assert not [r for r in packaged_recipes() if r.name.startswith(("./", "mi", "my"))]
    assert complete_recipe("./m") == ["./mine/", "./my.yml"]
    assert complete_recipe("my") == ["my.yml"]
    assert complete_recipe("mine/") == ["mine/big.yaml"]                   # YAML files only
    assert complete_recipe("mi") == ["mine/", "mine/big.yaml"]             # a lone folder: its entries follow
    assert complete_recipe(f"{tmp_path}/my") == [f"{tmp_path}/my.yml"]
    assert complete_recipe(".h") == [".hidden.yaml"] and ".hidden.yaml" not in complete_recipe("")
    assert complete_recipe("nowhere/x") == []


def test_complete_path_lists_folders_and_chosen_files(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "ab.pt").write_bytes(b"")
    (tmp_path / "ac.txt").write_text("")
    base = f"{tmp_path}/a"
    assert complete_path(base) == [f"{base}/", f"{base}b.pt", f"{base}c.txt"]
    assert complete_path(base, (".pt",)) == [f"{base}/", f"{base}b.pt"]
    assert complete_path(f"{tmp_path}/ac.txt/x") == []                     # under a file: nothing, no error


def test_folders_systems_and_cards_complete():
    assert complete_recipe_folder("") == recipe_folders() and complete_recipe_folder("quick") == ["quickstart"]
    assert complete_recipe_or_folder("quickstart")[0] == "quickstart"
    assert "quickstart/concat" in complete_recipe_or_folder("quickstart")
    assert complete_systems("concat,s") == ["concat,sentence"]
    offered = complete_systems("concat,")
    assert offered and all(o.startswith("concat,") and o.count("concat") == 1 for o in offered)   # each system once
    assert complete_systems("") == sorted(p.stem for p in (RECIPES_DIR / "quickstart").glob("*.yaml"))
    assert complete_card("") == [p.stem for p in card_files()] and all(c.startswith("euro")
                                                                        for c in complete_card("euro"))


def _bash_complete(words: str, cwd: Path = ROOT) -> list[str]:
    """What bash's completion function gets for the command line ``words`` (the last word being completed)."""
    parts = words.split(" ")
    env = {**os.environ, "_CTXMT_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(len(parts) - 1),
           "PYTHONPATH": str(ROOT)}
    program = "import sys; from ctxmt_cli.cli import app; sys.exit(app(prog_name='ctxmt'))"   # as the ctxmt script
    run = subprocess.run([sys.executable, "-c", program], env=env, cwd=cwd, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    return run.stdout.split()


@pytest.mark.parametrize("words, expected", [
    ("ctxmt train quickstart/c", complete_recipe("quickstart/c")),
    ("ctxmt recipes show lupo2022_focused_concat/en_de_s4to4", complete_recipe("lupo2022_focused_concat/en_de_s4to4")),
    ("ctxmt recipes list yang", ["yang2023_hanoit"]),
    ("ctxmt quickstart --systems concat,sen", ["concat,sentence"]),
])
def test_the_shell_gets_the_names(words, expected):
    assert expected and _bash_complete(words) == expected


def test_the_shell_gets_paths_for_a_recipe_file_and_no_warning_for_an_old_spelling(tmp_path):
    (tmp_path / "rec.yaml").write_text("model: {}\n")
    assert _bash_complete("ctxmt train re", cwd=tmp_path) == ["rec.yaml"]
    assert _bash_complete("ctxmt inspect m.pt --j") == ["--json"]          # the old spelling: completion is silent
