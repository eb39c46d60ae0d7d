"""Every recipe of Morishita et al. (2021) (recipes/morishita2021_mbe/) trains and translates through the CLI.

As tests/integration/test_recipes_cli.py: the recipes keep everything that changes the code path (family,
context size and order, averaging of the last checkpoints, precision, decoding); only the dimensions, step
counts, batch budget and accumulation are overridden. A dry run at full size checks the parameter counts that
each header quotes from the paper's Table 3 (separate 32k vocabularies per side, App. A.1).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ctxmt_cli.config import load_recipe
from ctxmt_cli.models.loading import read_checkpoint
from tests.integration.conftest import assert_trains_and_translates, dry_run_parameters, prepare_recipe_corpus

pytest.importorskip("ctxmt_cli.train.trainer")
pytest.importorskip("ctxmt_cli.decode.translator")

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "recipes" / "morishita2021_mbe"
RECIPES = sorted(FOLDER.glob("*.yaml"))
TINY = [
    "model.preset=null", "model.d_model=32", "model.ffn_dim=64", "model.heads=4", "model.encoder_layers=1",
    "model.decoder_layers=1", "train.max_steps=4", "train.valid_every=2", "train.warmup_steps=2",
    "train.update_freq=2", "data.max_tokens=400", "train.threads=1",
]
VOCAB = 32_000
#: "Table 3: 274M parameters" in a recipe's header
TABLE3 = re.compile(r"Table 3: (\d+)M parameters")


def rel(path: Path) -> str:
    return path.stem


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory) -> tuple[Path, Path]:
    """A tiny synthetic corpus prepared through the CLI, and a 2-document input file (4 lines each)."""
    return prepare_recipe_corpus(tmp_path_factory.mktemp("morishita"), 4)


@pytest.mark.parametrize("recipe", RECIPES, ids=rel)
def test_recipe_trains_averages_and_translates(recipe, synthetic, tmp_path):
    data, docs = synthetic
    overrides = [arg for s in [f"data.path={data}", *TINY] for arg in ("--set", s)]
    assert_trains_and_translates(recipe, overrides, docs, tmp_path)
    if load_recipe(recipe).train.average_last:
        averaged = read_checkpoint(tmp_path / "model" / "checkpoint_avg.pt")
        assert [Path(p).name for p in averaged["averaged_from"]] == ["checkpoint_2.pt", "checkpoint_4.pt"]


def _quoted(path: Path) -> int | None:
    m = TABLE3.search(path.read_text(encoding="utf-8"))
    return int(m.group(1)) if m else None


@pytest.mark.parametrize("recipe", [p for p in RECIPES if _quoted(p)], ids=rel)
def test_dry_run_parameter_count_matches_table3(recipe, tmp_path):
    """Full-size models on 32k pieces per side: within 1% of the count the header quotes from Table 3."""
    params = dry_run_parameters(recipe, tmp_path, VOCAB, (25.0, 30.0))
    paper = _quoted(recipe) * 1e6
    assert abs(params - paper) / paper < 0.01, f"{recipe.stem}: {params:,} parameters, Table 3: {paper:,.0f}"
