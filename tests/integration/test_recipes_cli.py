"""Every paper recipe trains and translates through the CLI, shrunk to tiny dims on a tiny synthetic corpus.

The recipes keep everything that changes the code path (family, context sizes, CD,
shift values, segment kind, persistence, PSE, decoding mode); only the dimensions,
step counts and batch budget are overridden. A PSE segment width that does not fit
the tiny d_model (d_se 128 of Lupo et al. 2023, Table 8) is scaled down to 16.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxmt_cli.config import load_recipe
from tests.integration.conftest import assert_trains_and_translates, prepare_recipe_corpus, run_cli

pytest.importorskip("ctxmt_cli.train.trainer")
pytest.importorskip("ctxmt_cli.decode.translator")

ROOT = Path(__file__).resolve().parents[2]
PAPER_DIRS = ("lupo2022_focused_concat", "lupo2023_sentence_position")
RECIPES = sorted(p for d in PAPER_DIRS for p in (ROOT / "recipes" / d).glob("*.yaml"))
TINY_D_MODEL = 32
TINY = [
    "model.preset=null", f"model.d_model={TINY_D_MODEL}", "model.ffn_dim=64", "model.heads=4",
    "model.encoder_layers=1", "model.decoder_layers=1", "train.max_steps=3", "train.valid_every=3",
    "train.warmup_steps=2", "data.max_tokens=400", "train.average_checkpoints=0",
]


def rel(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


def tiny_overrides(recipe: Path, data: Path) -> list[str]:
    sets = [f"data.path={data}", *TINY]
    pse = load_recipe(recipe).model.__dict__.get("pse")
    if pse is not None and pse.d_se >= TINY_D_MODEL:
        sets.append("model.pse.d_se=16")
    return [arg for s in sets for arg in ("--set", s)]


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory) -> tuple[Path, Path]:
    """A tiny synthetic corpus prepared through the CLI, and a 2-document input file (3 lines each)."""
    return prepare_recipe_corpus(tmp_path_factory.mktemp("recipes"), 3)


@pytest.mark.parametrize("recipe", RECIPES, ids=rel)
def test_recipe_trains_and_translates(recipe, synthetic, tmp_path):
    data, docs = synthetic
    assert_trains_and_translates(recipe, tiny_overrides(recipe, data), docs, tmp_path)


@pytest.mark.parametrize("recipe", RECIPES, ids=rel)
def test_dry_run_prints_parameter_count(recipe, tmp_path):
    result = run_cli("train", recipe, "--dry-run", "--set", f"data.path={tmp_path / 'not_prepared'}")
    assert result.exit_code == 0, result.output
    count = [line for line in result.output.splitlines() if line.startswith("# parameters:")]
    assert count, result.output
    params = int(count[0].split(":")[1].split("(")[0].replace(",", ""))
    assert 40_000_000 < params < 70_000_000  # Transformer-base: 44M + the tied embeddings of the vocabulary
