"""Every sequence-shortening recipe (recipes/shortening2023/) trains and translates through the CLI on tiny dims.

As tests/integration/test_recipes_cli.py: the recipes keep everything that changes
the code path (family, context size, representation, pooling kind and size, group
count, normaliser, integration, gate, encoder sharing, gradient blocking, current
sentence in the context, segment embeddings, context positions); only dimensions,
step counts, batch budget, accumulation and the decoding length are overridden.
The categorising FFN of grouping/selecting shrinks to 16 hidden units.

A dry run at full size also checks the parameter counts of the sequence-shortening paper's Table 5 (with
separate ~19.8k vocabularies per side, what its sentence-level 64.42M implies).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxmt_cli.config import load_recipe
from tests.integration.conftest import assert_trains_and_translates, dry_run_parameters, prepare_recipe_corpus

pytest.importorskip("ctxmt_cli.train.trainer")
pytest.importorskip("ctxmt_cli.decode.translator")

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "recipes" / "shortening2023"
RECIPES = sorted(FOLDER.glob("*.yaml"))
TINY = [
    "model.preset=null", "model.d_model=32", "model.ffn_dim=64", "model.heads=4",
    "model.encoder_layers=1", "model.decoder_layers=1", "train.max_steps=3", "train.valid_every=3",
    "train.warmup_steps=2", "train.update_freq=2", "data.max_tokens=400", "train.average_checkpoints=0",
    "decode.max_len_a=1.5", "decode.max_len_b=10", "train.threads=1",
]
#: Table 5 of the sequence-shortening paper (parameters per system; the same for every context size)
TABLE5 = {
    "sentence": 64.42e6, "single_encoder": 64.42e6, "multi_encoder": 83.33e6, "caching_tokens": 71.25e6,
    "caching_sentence": 71.26e6, "max_pooling": 72.83e6, "avg_pooling": 72.83e6, "linear_pooling": 73.35e6,
    "grouping": 72.58e6, "selecting": 72.58e6,
}
#: per-side vocabulary that gives Table 5's sentence-level 64.42M with Transformer-base and tied decoder
#: embeddings (20k SentencePiece pieces, minus those fairseq's dictionary never saw)
VOCAB = 19_806


def rel(path: Path) -> str:
    return path.stem


def tiny_overrides(recipe: Path, data: Path) -> list[str]:
    sets = [f"data.path={data}", *TINY]
    if getattr(load_recipe(recipe).model, "repr", None) in ("grouping", "selecting"):
        sets.append("model.categorizer_hidden=16")
    return [arg for s in sets for arg in ("--set", s)]


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory) -> tuple[Path, Path]:
    """A tiny synthetic corpus prepared through the CLI, and a 2-document input file (4 lines each)."""
    return prepare_recipe_corpus(tmp_path_factory.mktemp("shortening"), 4)


@pytest.mark.parametrize("recipe", RECIPES, ids=rel)
def test_recipe_trains_and_translates(recipe, synthetic, tmp_path):
    data, docs = synthetic
    assert_trains_and_translates(recipe, tiny_overrides(recipe, data), docs, tmp_path)


def _system(path: Path) -> str:
    stem = path.stem.split("_", 2)[2]  # drop the pair
    return stem.rsplit("_c", 1)[0] if stem != "sentence" else stem


#: one recipe per system (counts do not depend on the pair here, and barely on the context size)
COUNTED = [p for p in RECIPES if p.stem == "en_de_sentence" or (p.stem.startswith("en_de_") and p.stem.endswith("_c1"))]


@pytest.mark.parametrize("recipe", COUNTED, ids=rel)
def test_dry_run_parameter_count_matches_table5(recipe, tmp_path):
    """Full-size models, counted on a vocabulary like the paper's: within 1.5% of the paper's Table 5."""
    params = dry_run_parameters(recipe, tmp_path, VOCAB, (21.9, 21.9))
    paper = TABLE5[_system(recipe)]
    assert abs(params - paper) / paper < 0.015, f"{recipe.stem}: {params:,} parameters, Table 5: {paper:,.0f}"
