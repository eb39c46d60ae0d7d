"""``ctxmt plot RUN_DIR...``: training curves of real runs as PNGs, runs overlaid, nothing overwritten unasked."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ctxmt_cli.train.trainer import train
from tests.integration.conftest import assert_user_error, run_cli
from tests.unit.train_fixtures import prepare_tiny, recipe

pytest.importorskip("matplotlib", reason="matplotlib is in the test extra: pip install -e '.[test]'")
from matplotlib.image import imread  # noqa: E402

#: the figures of a concat run (the context curves need context tokens; lr and tokens/s come with every run)
CONCAT_FIGURES = {"objective", "window_loss", "current_loss", "context_loss", "current_context_ratio", "lr",
                  "tokens_per_s"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[Path, Path]:
    """Two tiny trained runs: concat s2to2 with CD = 0.01 and a sentence-level model."""
    root = tmp_path_factory.mktemp("plot")
    data = prepare_tiny(root)
    concat, sentence = root / "concat-cd", root / "sentence"
    settings = dict(max_steps=6, log_every=2, valid_every=3)
    train(recipe(data, concat, {"cd": 0.01}, **settings), show_progress=False)
    train(recipe(data, sentence, {"family": "sentence"}, **settings), show_progress=False)
    return concat, sentence


def written(result) -> list[Path]:
    return [Path(line) for line in result.stdout.splitlines() if line.endswith(".png")]


def test_plot_overlays_runs_into_one_png_per_quantity(runs, tmp_path):
    out = tmp_path / "figs"
    result = run_cli("plot", *runs, "--out", out)
    assert result.exit_code == 0, result.output
    files = written(result)
    assert {p.stem for p in files} == CONCAT_FIGURES and all(p.parent == out for p in files)
    assert result.stdout.strip().endswith(f"{len(files)} figures from 2 run(s)")
    for path in files:
        pixels = imread(path)
        assert pixels.shape[0] > 100 and pixels.shape[1] > 100


def test_plot_writes_into_the_first_run_by_default_and_never_overwrites_unasked(runs, tmp_path):
    concat, _ = runs
    result = run_cli("plot", concat)
    assert result.exit_code == 0, result.output
    files = written(result)
    assert files and all(p.parent == concat / "plots" for p in files)
    before = {p: p.read_bytes() for p in files}
    assert_user_error(run_cli("plot", concat), "already exists", "--force")
    assert {p: p.read_bytes() for p in files} == before
    again = run_cli("plot", concat, "--force")
    assert again.exit_code == 0, again.output
    assert written(again) == files


def test_a_run_without_metrics_is_one_line_and_nothing_is_written(runs, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    out = tmp_path / "figs"
    assert_user_error(run_cli("plot", runs[0], empty, "--out", out), "no metrics.jsonl in", str(empty))
    assert not out.exists()


def test_out_naming_a_file_is_one_line(runs, tmp_path):
    target = tmp_path / "file.png"
    target.write_text("keep")
    assert_user_error(run_cli("plot", runs[0], "--out", target), "is a file, not a directory")
    assert target.read_text() == "keep"


def test_without_matplotlib_plot_says_how_to_install_it(runs, tmp_path, monkeypatch):
    for name in ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, name, None)
    out = tmp_path / "figs"
    assert_user_error(run_cli("plot", runs[0], "--out", out), "matplotlib is not installed", "pip install")
    assert not out.exists()
