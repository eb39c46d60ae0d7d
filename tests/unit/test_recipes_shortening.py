"""The recipes of "Sequence Shortening for Context-Aware MT" (2023), Tables 2 (En-De) and 3 (En-Fr).

One file per table cell: ``PAIR_sentence`` (the sentence-level row) and
``PAIR_SYSTEM_cK`` for the nine context-aware rows x context sizes 1-3. The
tests only validate the recipes (no model is built): each file loads, names its
table row and the paper's numbers, its settings match its name, and the shared
hyper-parameters of Table 4 are the same everywhere.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest
import yaml

from ctxmt_cli.config import load_recipe
from tests.unit.test_recipes import header

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "recipes" / "shortening2023"
FILES = sorted(FOLDER.glob("*.yaml"))

PAIRS = {"en_de": ("En-De", 2, 6), "en_fr": ("En-Fr", 3, 7)}  # pair -> (title, results table, COMET table)
ROWS = {
    "single_encoder": "Single-encoder", "multi_encoder": "Multi-encoder", "caching_tokens": "Caching Tokens",
    "caching_sentence": "Caching Sentence", "max_pooling": "Shortening - Max Pooling",
    "avg_pooling": "Shortening - Avg Pooling", "linear_pooling": "Shortening - Linear Pooling",
    "grouping": "Shortening - Grouping", "selecting": "Shortening - Selecting",
}
NAME = re.compile(r"^(?P<pair>en_de|en_fr)_(?:sentence|(?P<system>[a-z_]+)_c(?P<k>[123]))$")

# The paper's cells: BLEU and contrastive accuracy (Tables 2, 3), COMET (Tables 6, 7); sentence-level first,
# then each system at context sizes 1, 2, 3.
TABLES = {
    "en_de": {
        "sentence": [("28.11", "43.67%", "0.7778")],
        "single_encoder": [("28.31", "47.42%", "0.7831"), ("27.95", "48.18%", "0.7789"), ("27.88", "48.88%", "0.7758")],
        "multi_encoder": [("28.67", "44.93%", "0.7831"), ("28.50", "46.65%", "0.7871"), ("28.26", "45.00%", "0.7856")],
        "caching_tokens": [("28.35", "54.06%", "0.7806"), ("28.50", "54.13%", "0.7776"), ("29.08", "51.23%", "0.7821")],
        "caching_sentence": [("28.38", "45.72%", "0.7712"), ("26.73", "45.26%", "0.7640"),
                             ("26.70", "44.91%", "0.7673")],
        "max_pooling": [("27.62", "51.67%", "0.7743"), ("27.88", "55.08%", "0.7772"), ("28.26", "50.89%", "0.7799")],
        "avg_pooling": [("28.09", "53.37%", "0.7774"), ("27.85", "54.81%", "0.7770"), ("28.38", "50.54%", "0.7844")],
        "linear_pooling": [("27.62", "52.71%", "0.7757"), ("28.03", "52.13%", "0.7745"), ("28.18", "51.27%", "0.7823")],
        "grouping": [("28.21", "56.98%", "0.7842"), ("28.70", "54.51%", "0.7828"), ("28.49", "51.16%", "0.7811")],
        "selecting": [("28.15", "54.48%", "0.7774"), ("28.55", "54.21%", "0.7826"), ("28.01", "51.95%", "0.7836")],
    },
    "en_fr": {
        "sentence": [("37.64", "75.92%", "0.7943")],
        "single_encoder": [("37.25", "77.27%", "0.7930"), ("37.18", "78.98%", "0.7979"), ("37.12", "80.87%", "0.7913")],
        "multi_encoder": [("37.44", "75.72%", "0.7968"), ("37.12", "77.23%", "0.7934"), ("37.34", "75.76%", "0.7934")],
        "caching_tokens": [("36.88", "79.67%", "0.7923"), ("37.29", "80.14%", "0.7935"), ("37.73", "79.90%", "0.7945")],
        "caching_sentence": [("36.50", "77.33%", "0.7845"), ("34.21", "76.25%", "0.7654"),
                             ("34.78", "75.71%", "0.7737")],
        "max_pooling": [("37.48", "79.51%", "0.7911"), ("36.72", "80.59%", "0.7913"), ("37.85", "79.71%", "0.7974")],
        "avg_pooling": [("37.13", "77.75%", "0.7920"), ("37.12", "80.16%", "0.7924"), ("38.18", "80.41%", "0.7952")],
        "linear_pooling": [("37.02", "80.47%", "0.7933"), ("37.12", "79.37%", "0.7951"), ("37.42", "79.64%", "0.7927")],
        "grouping": [("37.05", "79.91%", "0.7933"), ("37.98", "81.13%", "0.7976"), ("37.18", "79.54%", "0.7921")],
        "selecting": [("37.38", "80.89%", "0.7951"), ("37.83", "80.32%", "0.7945"), ("37.81", "80.09%", "0.7935")],
    },
}
#: sec. 5.2: "selected 9 and 10 respectively for English-German translation and 11 (for both models) for
#: English-French"
GROUPS = {"en_de": {"grouping": 9, "selecting": 10}, "en_fr": {"grouping": 11, "selecting": 11}}
#: sec. 5.2: gradient into the shortening from two (Grouping) and one (Selecting) context sentences
GRAD = {"grouping": 2, "selecting": 1}
POOLING = {"max_pooling": "max", "avg_pooling": "avg", "linear_pooling": "linear"}
#: every caching option, spelled out in each caching recipe (house style: no silent defaults)
CACHING_KEYS = {
    "src_context_sentences", "repr", "pooling", "pool_size", "groups", "normalizer", "categorizer_hidden",
    "include_current", "integration", "gate", "encoder", "grad_context_sentences", "segment_embeddings",
    "context_positions", "shortening_grad_context_sentences", "shortening_dropout",
}
ARCH_KEYS = {"preset", "d_model", "ffn_dim", "heads", "encoder_layers", "decoder_layers", "dropout",
             "attention_dropout", "activation_dropout", "normalize_before", "share_embeddings", "max_positions"}


def rel(path: Path) -> str:
    return path.stem


@cache
def recipe(path: Path):
    return load_recipe(path)


@cache
def raw(path: Path) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def parse(path: Path) -> tuple[str, str, int]:
    """(pair, system, context size) from the file name; the sentence-level system has context 0."""
    m = NAME.match(path.stem)
    assert m, f"{path.name}: expected PAIR_sentence or PAIR_SYSTEM_cK"
    if m["system"] is None:
        return m["pair"], "sentence", 0
    assert m["system"] in ROWS, f"{path.name}: unknown system {m['system']}"
    return m["pair"], m["system"], int(m["k"])


def test_every_table_cell_has_one_recipe():
    expected = {f"{pair}_sentence" for pair in PAIRS}
    expected |= {f"{pair}_{system}_c{k}" for pair in PAIRS for system in ROWS for k in (1, 2, 3)}
    assert len(expected) == 2 * (1 + len(ROWS) * 3) == 56
    assert {p.stem for p in FILES} == expected


@pytest.mark.parametrize("path", FILES, ids=rel)
def test_header_names_the_table_cell(path):
    pair, system, k = parse(path)
    title, table, comet_table = PAIRS[pair]
    bleu, acc, comet = TABLES[pair][system][max(k - 1, 0)]
    row = "Sentence-level" if system == "sentence" else ROWS[system]
    text = header(path)
    assert "Sequence Shortening for Context-Aware Machine Translation" in text
    expected = f"Reproduces: Table {table} ({title}) row '{row}', Context: {k} → BLEU {bleu}, Accuracy {acc}"
    assert expected in text, f"{path.name}: the header lacks {expected!r}"
    assert re.search(rf"Table {comet_table}: COMET {re.escape(comet)}\b", text)
    assert f"--out {recipe(path).data.path}" in text, "the header gives the `ctxmt prepare` command for data.path"
    assert "--separate --vocab-size 20000 --spm-type bpe" in text
    assert "Deliberate differences" in text


@pytest.mark.parametrize("path", FILES, ids=rel)
def test_settings_match_file_name(path):
    pair, system, k = parse(path)
    r = recipe(path)
    m = r.model
    assert r.name == f"shortening2023_{path.stem}"
    assert r.train.save_dir == f"runs/shortening2023/{path.stem}"
    assert r.data.path == f"data/{pair}_iwslt17_spm20k"
    # source-side context only (Tables 2-3 captions)
    assert m.src_context_sentences == k and m.tgt_context_sentences == 0
    if system == "sentence":
        assert m.family == "sentence"
        return
    if system == "single_encoder":
        assert m.family == "concat"
        assert (m.src_context_sentences, m.tgt_context_sentences, m.cd) == (k, 0, 1.0)
        assert m.shift is None and m.segment is None and m.pse is None and not m.persistent
        return
    assert m.family == "caching" and m.src_context_sentences == k
    assert set(raw(path)["model"]) >= CACHING_KEYS | ARCH_KEYS | {"family"}, "every caching key is spelled out"
    separate = system == "multi_encoder"
    assert m.encoder == ("separate" if separate else "shared")
    assert m.integration == {"multi_encoder": "concat", "caching_sentence": "parallel"}.get(system, "sequential")
    assert m.gate is (system == "caching_sentence")
    assert m.repr == {"multi_encoder": "tokens", "caching_tokens": "tokens", "caching_sentence": "sentence",
                      **{s: "pooling" for s in POOLING}, "grouping": "grouping", "selecting": "selecting"}[system]
    assert m.pooling == POOLING.get(system)
    if m.repr == "pooling":
        assert m.pool_size == 2
    assert m.groups == GROUPS[pair].get(system)
    if m.repr in ("grouping", "selecting"):
        assert m.normalizer == "sparsemax" and m.categorizer_hidden == 512
    # aggregating models include the current sentence, given explicitly, not left to the schema default
    aggregating = m.repr in ("sentence", "pooling", "grouping", "selecting")
    assert raw(path)["model"]["include_current"] is aggregating and m.current_in_context is aggregating
    # gradient: blocked for tokens/sentence/pooling; 2 (grouping) / 1 (selecting) capped at the context size;
    # the separate context encoder of the multi-encoder trains from every context sentence
    # gradient as the paper's code (sec. 5.2): no context sentence trains the shared encoder; the shortening of
    # Grouping / Selecting learns from the nearest 2 / 1 context sentences (capped at the context size), the pooling
    # shortening from all; the separate context encoder of the multi-encoder trains from every context sentence
    assert m.grad_context_sentences == (k if separate else 0)
    shortening = m.repr in ("pooling", "grouping", "selecting")
    assert m.shortening_grad_context_sentences == (min(GRAD[system], k) if system in GRAD else None)
    assert m.shortening_dropout == 0.0                                      # eq. 2 has no dropout on its branch
    # learned positions for shortened tokens only (sec. 4.3; the paper's code): none for tokens, the mean, or the
    # multi-encoder (Table 5 shows no position table there)
    assert m.segment_embeddings is True and m.context_positions is shortening


@pytest.mark.parametrize("path", FILES, ids=rel)
def test_table4_shared_settings(path):
    r = recipe(path)
    m, t, d = r.model, r.train, r.decode
    assert (m.d_model, m.ffn_dim, m.heads, m.encoder_layers, m.decoder_layers) == (512, 2048, 8, 6, 6)
    assert m.dropout == 0.3 and m.normalize_before is False and m.share_embeddings == "decoder"
    assert t.betas == (0.9, 0.98) and t.adam_eps == 1e-8 and t.lr == 5e-4 and t.warmup_steps == 2500
    assert t.weight_decay == 1e-4 and t.label_smoothing == 0.1 and t.clip_norm == 0.1
    assert r.data.max_tokens == 4096 and t.update_freq == 8
    assert t.patience == 5 and t.early_stop_on == "window_loss" and t.seed == 42
    assert t.average_checkpoints == 0
    assert d.beam == 5
    assert (r.data.train_split, r.data.valid_split) == ("train", "valid")


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_one_validation_interval_per_pair(pair):
    """Patience counts validations: every system of a table validates at the same interval."""
    intervals = {recipe(p).train.valid_every for p in FILES if p.stem.startswith(pair + "_")}
    assert len(intervals) == 1


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_grouping_and_selecting_group_counts(pair):
    for system, groups in GROUPS[pair].items():
        for k in (1, 2, 3):
            m = recipe(FOLDER / f"{pair}_{system}_c{k}.yaml").model
            assert (m.repr, m.groups) == (system, groups)
            assert m.shortening_grad_context_sentences == min(GRAD[system], k) and m.grad_context_sentences == 0
            if GRAD[system] > k:  # the cap is said in the header
                assert f"min({GRAD[system]}, {k}) = {k}" in header(FOLDER / f"{pair}_{system}_c{k}.yaml")
