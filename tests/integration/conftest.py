"""Fixtures for CLI integration tests: a tiny synthetic dataset prepared through the CLI, and a trained model."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from ctxmt_cli.cli import app

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "recipes" / "quickstart" / "concat.yaml"

TINY_SETS = [
    "model.preset=null", "model.d_model=32", "model.ffn_dim=64", "model.heads=4",
    "model.encoder_layers=1", "model.decoder_layers=1", "train.max_steps=4", "train.valid_every=2",
    "train.warmup_steps=2", "data.max_tokens=400", "train.average_checkpoints=0", "train.log_every=1",
]


def run_cli(*args: str, input: str | None = None):
    """Invoke ``ctxmt ARGS`` in-process; returns click's Result."""
    return CliRunner().invoke(app, [str(a) for a in args], input=input)


def cli_commands() -> list[tuple[str, object]]:
    """(path, click command) of every command of the ``ctxmt`` app that runs (``export ctranslate2``, not
    ``export``), in the order ``--help`` lists them."""
    import typer

    found = []

    def walk(command, prefix: list[str]) -> None:
        if hasattr(command, "commands"):
            for name, sub in command.commands.items():
                walk(sub, prefix + [name])
            return
        found.append((" ".join(prefix), command))

    walk(typer.main.get_command(app), [])
    return found


#: parameter names that say "where the command writes" (the old ones too, so that one coming back is caught)
OUTPUT_NAMES = ("out", "output", "per_sentence", "dest", "out_dir")


def output_options() -> list[tuple[str, object, object]]:
    """(command path, command, parameter) of every option or argument that names where a command writes: by its
    name (:data:`OUTPUT_NAMES`), plus ``train --set`` (``train.save_dir=``) and ``first-pass --name`` (a stream
    written beside the split)."""
    return [(path, command, param) for path, command in cli_commands() for param in command.params
            if param.name in OUTPUT_NAMES or (path, param.name) in (("train", "set_"), ("first-pass", "name"))]


def assert_user_error(result, *needles: str) -> str:
    """Exit 2, one line on stderr, no traceback, mentions every needle."""
    assert result.exit_code == 2, result.output
    text = result.stderr.strip()
    assert len(text.splitlines()) == 1 and "Traceback" not in result.output, result.output
    for needle in needles:
        assert needle in text, text
    return text


def tiny_sets(data: Path, save_dir: Path) -> list[str]:
    """``--set`` arguments that shrink any recipe to a few steps on tiny dims."""
    sets = [f"data.path={data}", f"train.save_dir={save_dir}", *TINY_SETS]
    return [arg for s in sets for arg in ("--set", s)]


def prepare_recipe_corpus(root: Path, lines_per_document: int) -> tuple[Path, Path]:
    """A tiny synthetic corpus prepared through the CLI, and a 2-document input file from its test split."""
    data = root / "data"
    # --docs 41 is the generator's minimum (it keeps 20 documents each for valid and test)
    result = run_cli("prepare", "synthetic", "--out", data, "--docs", 41, "--seed", 1)
    assert result.exit_code == 0, result.output
    docs = (data / "raw" / "test.src").read_text(encoding="utf-8").split("\n\n")
    first_lines = ["\n".join(doc.strip().splitlines()[:lines_per_document]) for doc in docs[:2]]
    text = root / "docs.txt"
    text.write_text("\n\n".join(first_lines) + "\n", encoding="utf-8")
    return data, text


def assert_trains_and_translates(recipe: Path, overrides: list[str], docs: Path, tmp_path: Path) -> None:
    """``ctxmt train RECIPE --set ...`` then ``ctxmt translate``: one output line per input line, blank lines kept."""
    save = tmp_path / "model"
    result = run_cli("train", recipe, *overrides, "--set", f"train.save_dir={save}")
    assert result.exit_code == 0, result.output
    out = tmp_path / "out.txt"
    result = run_cli("translate", docs, "--checkpoint", save / "checkpoint_best.pt", "-o", out, "--beam", 2)
    assert result.exit_code == 0, result.output
    src, hyp = docs.read_text().splitlines(), out.read_text().splitlines()
    assert len(hyp) == len(src)
    assert [i for i, s in enumerate(src) if not s.strip()] == [i for i, h in enumerate(hyp) if not h.strip()]


def dry_run_parameters(recipe: Path, tmp_path: Path, vocab: int, mean_length: tuple[float, float]) -> int:
    """``ctxmt train RECIPE --dry-run``'s parameter count on a nominal prepared directory with ``vocab`` pieces
    per side (separate vocabularies) and the given mean sentence lengths (for ``shift: auto``)."""
    import json

    meta = tmp_path / "data"
    meta.mkdir()
    (meta / "meta.json").write_text(json.dumps({
        "vocab_size": {"src": vocab, "tgt": vocab}, "joint": False,
        "mean_sentence_length": {"src": mean_length[0], "tgt": mean_length[1]}}))
    result = run_cli("train", recipe, "--dry-run", "--set", f"data.path={meta}")
    assert result.exit_code == 0, result.output
    count = [line for line in result.output.splitlines() if line.startswith("# parameters:")]
    assert count, result.output
    return int(count[0].split(":")[1].split("(")[0].replace(",", ""))


@pytest.fixture(scope="session")
def synthetic_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cli") / "data"
    result = run_cli("prepare", "synthetic", "--out", out, "--docs", 60, "--seed", 1)
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="session")
def concat_checkpoint(synthetic_dir, tmp_path_factory) -> Path:
    save = tmp_path_factory.mktemp("cli") / "concat"
    result = run_cli("train", QUICKSTART, *tiny_sets(synthetic_dir, save))
    assert result.exit_code == 0, result.output
    return save / "checkpoint_best.pt"


@pytest.fixture(scope="session")
def sentence_level_checkpoint(synthetic_dir, tmp_path_factory) -> Path:
    """A tiny sentence-level model (reads no context) trained on ``synthetic_dir``."""
    save = tmp_path_factory.mktemp("cli") / "sentence"
    result = run_cli("train", ROOT / "recipes" / "lupo2022_focused_concat" / "en_de_base.yaml",
                     *tiny_sets(synthetic_dir, save), "--set", "train.early_stop_on=window_loss")
    assert result.exit_code == 0, result.output
    return save / "checkpoint_best.pt"


@pytest.fixture
def two_documents(synthetic_dir, tmp_path) -> Path:
    lines = (synthetic_dir / "raw" / "test.src").read_text().split("\n\n")
    path = tmp_path / "docs.txt"
    path.write_text("\n\n".join(doc.strip() for doc in lines[:2]) + "\n")
    return path
