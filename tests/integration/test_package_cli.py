"""The command-line conventions and the package's own commands: --version, -h, python -m ctxmt_cli, completion,
``ctxmt recipes list|show|copy``, recipe names in ``ctxmt train``, and ``ctxmt inspect``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import ctxmt_cli
from ctxmt_cli.cli import app
from ctxmt_cli.models.checkpoint_info import checkpoint_info
from ctxmt_cli.recipe_catalog import RECIPES_DIR, packaged_recipes
from tests.integration.conftest import ROOT, assert_user_error, run_cli

NAME = "lupo2022_focused_concat/en_de_s4to4_shift_cd"


def _python(*args: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120, cwd=cwd,
                          env={**os.environ, **(env or {})})


def test_version_is_the_package_version_and_pyproject_reads_it():
    result = run_cli("--version")
    assert result.exit_code == 0 and result.stdout == f"ctxmt {ctxmt_cli.__version__}\n"
    tomllib = pytest.importorskip("tomllib", reason="Python 3.11+ reads TOML")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "ctxmt_cli.__version__"}
    assert project["project"]["license"] == "MIT" and (ROOT / "LICENSE").read_text().startswith("MIT License")
    assert {"Homepage", "Repository", "Issues"} <= set(project["project"]["urls"])


def _commands(group, path=()):
    """Every command path of the app: ('train',), ('recipes',), ('recipes', 'list'), ..."""
    for name, command in group.commands.items():
        yield (*path, name)
        if hasattr(command, "commands"):
            yield from _commands(command, (*path, name))


def test_dash_h_is_help_everywhere():
    import typer.main

    paths = [(), *_commands(typer.main.get_command(app))]
    assert ("recipes", "copy") in paths and ("inspect",) in paths and len(paths) > 15
    for path in paths:
        short, long = run_cli(*path, "-h"), run_cli(*path, "--help")
        assert short.exit_code == long.exit_code == 0, path
        assert short.stdout == long.stdout and "Usage:" in short.stdout, path


def test_python_dash_m_runs_the_cli(tmp_path):
    result = _python("-m", "ctxmt_cli", "--version", cwd=tmp_path)
    assert result.returncode == 0 and result.stdout == f"ctxmt {ctxmt_cli.__version__}\n", result.stderr
    usage = _python("-m", "ctxmt_cli", "recipes", "-h", cwd=tmp_path)
    assert usage.returncode == 0 and "Usage: python -m ctxmt_cli recipes" in usage.stdout


def test_shell_completion_completes_commands_and_choices(tmp_path):
    assert "--install-completion" in run_cli("--help").stdout
    complete = "import sys; from ctxmt_cli.cli import app; sys.exit(app(prog_name='ctxmt'))"
    words = _python("-c", complete, cwd=tmp_path, env={"_CTXMT_COMPLETE": "complete_bash",
                                                       "COMP_WORDS": "ctxmt rec", "COMP_CWORD": "1"})
    assert words.stdout.split() == ["recipes"], words.stderr
    line = {"_CTXMT_COMPLETE": "complete_bash", "COMP_WORDS": "ctxmt recipes list --family ", "COMP_CWORD": "4"}
    choices = _python("-c", complete, cwd=tmp_path, env=line)
    assert set(choices.stdout.split()) == {"sentence", "concat", "caching", "mbe", "hanoit"}


def test_the_family_choices_are_the_schemas():
    from typing import get_args

    from ctxmt_cli.cli.package import Family
    from ctxmt_cli.config import ModelConfig

    configs = get_args(get_args(ModelConfig)[0])                    # Annotated[Union[...], discriminator]
    assert {f.value for f in Family} == {get_args(c.model_fields["family"].annotation)[0] for c in configs}


def test_recipes_list_names_every_recipe_once():
    result = run_cli("recipes", "list")
    assert result.exit_code == 0, result.output
    names = [line.split()[0] for line in result.stdout.splitlines()]
    assert names == [r.name for r in packaged_recipes()] and len(names) == len(list(RECIPES_DIR.rglob("*.yaml")))
    assert result.stderr.startswith(f"{len(names)} recipes;")
    hanoit = run_cli("recipes", "list", "--family", "hanoit").stdout.splitlines()
    assert hanoit and all(line.split()[1] == "hanoit" for line in hanoit)
    assert {line.split()[0] for line in hanoit} == {r.name for r in packaged_recipes() if r.family() == "hanoit"}
    quick = run_cli("recipes", "list", "quickstart", "--family", "mbe").stdout.splitlines()
    assert [line.split()[0] for line in quick] == ["quickstart/mbe", "quickstart/mbe_nogate"]
    assert_user_error(run_cli("recipes", "list", "nope"), "no recipe folder 'nope'", "quickstart")
    assert_user_error(run_cli("recipes", "list", "--family", "big"), "recipes list: --family", "'hanoit'")


def test_recipes_show_and_copy(tmp_path):
    shown = run_cli("recipes", "show", NAME)
    assert shown.exit_code == 0 and shown.stdout == (RECIPES_DIR / f"{NAME}.yaml").read_text(encoding="utf-8")
    assert_user_error(run_cli("recipes", "show", "quickstart/concatt"), "did you mean quickstart/concat?",
                      "ctxmt recipes list")
    copied = run_cli("recipes", "copy", NAME + ".yaml", "-o", tmp_path / "mine")
    target = tmp_path / "mine" / "en_de_s4to4_shift_cd.yaml"
    assert copied.exit_code == 0 and copied.stdout == f"wrote {target}\n"
    target.write_text("edited", encoding="utf-8")
    assert_user_error(run_cli("recipes", "copy", NAME, "-o", tmp_path / "mine"), str(target), "already exists")
    assert target.read_text(encoding="utf-8") == "edited"


def test_train_takes_a_name_and_the_checkout_paths_from_anywhere(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)                                      # no recipes/ here
    for recipe, name in ((NAME, "lupo2022_en_de_s4to4_shift_cd"), ("recipes/quickstart/concat.yaml",
                                                                     "quickstart_s4to4_shift_cd")):
        result = run_cli("train", recipe, "--dry-run")
        assert result.exit_code == 0, result.output
        assert f"name: {name}" in result.stdout and "# parameters:" in result.stdout
    assert_user_error(run_cli("train", "quickstart/nothing", "--dry-run"), "recipe not found: quickstart/nothing",
                      "ctxmt recipes list")


def test_inspect_prints_the_table_and_the_resolved_recipe(concat_checkpoint):
    info = checkpoint_info(concat_checkpoint)
    result = run_cli("inspect", "-c", concat_checkpoint)
    assert result.exit_code == 0, result.output
    table, recipe_text = result.stdout.split("recipe (resolved):\n")
    for needle in ("family", "concat", f"{info['parameters']:,}", "step / epoch", "world size", "src → tgt",
                   f"ctxmt {info['ctxmt_version']}"):
        assert needle in table, needle
    assert yaml.safe_load(recipe_text) == info["recipe"]
    as_json = run_cli("inspect", "-c", concat_checkpoint, "--json")
    assert as_json.exit_code == 0 and json.loads(as_json.stdout) == info


@pytest.mark.parametrize("content,needle", [(None, "checkpoint not found"), (b"\x00junk" * 20, "not a readable")])
def test_inspect_a_missing_or_corrupt_file_is_one_line(content, needle, tmp_path):
    path = tmp_path / "model.pt"
    if content is not None:
        path.write_bytes(content)
    assert_user_error(run_cli("inspect", "-c", path), needle, str(path))
    assert_user_error(run_cli("inspect", "-c", path, "--json"), needle)
