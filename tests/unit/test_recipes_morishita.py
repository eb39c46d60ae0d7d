"""The recipes of Morishita et al. (2021), "Context-aware NMT with Mini-batch Embedding": Table 1's rows.

Only validation (no model is built): every file of recipes/morishita2021_mbe/ loads and names its Table 1
row with the BLEU it should reproduce; the baselines' settings are the paper's App. A.2 (Transformer big,
lr 1e-3, 4,000 warm-up steps, clipping at 1.0, ~280k tokens per update, 24,000 updates, a checkpoint every
200 and the average of the last 8, beam 6 with length-normalised scores).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ctxmt_cli.config import load_recipe
from tests.unit.test_recipes import header

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "recipes" / "morishita2021_mbe"
FILES = sorted(FOLDER.glob("*.yaml"))
#: Table 1 rows of the baselines: file -> (row, ASPEC, WMT, IWSLT BLEU)
BASELINES = {
    "baseline_6enc": ("Baseline 6 Enc-Layers", "26.2", "18.4", "12.0"),
    "baseline_7enc": ("Baseline 7 Enc-Layers", "26.9", "18.7", "11.9"),
    "two_to_one": ("2-to-1", "27.0", "19.2", "12.9"),
}
#: App. A.2: ~280k tokens per update on eight GPUs
TOKENS_PER_UPDATE, GPUS = 280_000, 8


def test_every_baseline_row_has_a_recipe():
    assert set(BASELINES) <= {p.stem for p in FILES}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_recipe_names_its_table1_row(path):
    load_recipe(path)
    text = header(path)
    assert "Morishita" in text and "(2021)" in text
    assert re.search(r"^# Reproduces: Table 1 row '[^']+'", text, re.M), f"{path.name}: no Table 1 row"
    assert load_recipe(path).data.path in text, "the header gives the `ctxmt prepare` command that writes data.path"


@pytest.mark.parametrize("stem", sorted(BASELINES))
def test_baselines_follow_the_papers_settings(stem):
    path = FOLDER / f"{stem}.yaml"
    r, text = load_recipe(path), header(path)
    row, *bleu = BASELINES[stem]
    assert f"Reproduces: Table 1 row '{row}': BLEU ASPEC {bleu[0]}" in text
    assert all(b in text.split("Reproduces:")[1].splitlines()[0] for b in bleu)
    m, t, d = r.model, r.train, r.decode
    assert (m.d_model, m.ffn_dim, m.heads, m.decoder_layers) == (1024, 4096, 16, 6)
    assert m.encoder_layers == (7 if stem == "baseline_7enc" else 6)
    assert m.dropout == 0.3 and m.normalize_before is False and m.share_embeddings == "none"
    assert (t.lr, t.betas, t.warmup_steps, t.clip_norm) == (1e-3, (0.9, 0.98), 4000, 1.0)
    assert (t.max_steps, t.valid_every, t.patience) == (24_000, 200, 0)
    assert (t.average_last, t.average_checkpoints) == (8, 0) and t.keep_checkpoints >= 8
    assert t.amp != "off"                                                   # mixed precision (App. A.2)
    assert (d.beam, d.lenpen) == (6, 1.0)
    effective = r.data.max_tokens * GPUS * t.update_freq
    assert abs(effective - TOKENS_PER_UPDATE) / TOKENS_PER_UPDATE < 0.05, effective
    assert f"update_freq={round(TOKENS_PER_UPDATE / r.data.max_tokens)}" in text  # the one-GPU equivalent


def test_two_to_one_draws_its_context_at_random():
    """Footnote 3: JParaCrawl's in-document order is lost, so the previous sentence is a random one."""
    m = load_recipe(FOLDER / "two_to_one.yaml").model
    assert m.family == "concat" and m.context_order == "random"
    assert (m.src_context_sentences, m.tgt_context_sentences) == (1, 0)
    for stem in ("baseline_6enc", "baseline_7enc"):
        assert load_recipe(FOLDER / f"{stem}.yaml").model.family == "sentence"
