"""A model's real scores, written by ctxmt, give the publishers' own rules ctxmt's accuracy.

A tiny concatenation model scores the real Voita sets (``../shared/data``) and
the ContraPro / Lopes fixtures through ``score_sets`` + ``write_outputs`` (what
``ctxmt contrastive --out`` runs); the reimplemented publisher scripts then
read ``OUT/SET.scores`` and must agree with ``results.json``, item by item.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from ctxmt_cli.config import validate_recipe
from ctxmt_cli.core.batch import VocabInfo
from ctxmt_cli.data.tokenize import Tokenizer, train_sentencepiece
from ctxmt_cli.evaluate.aggregates import aggregates
from ctxmt_cli.evaluate.contrastive_report import score_sets, write_outputs
from ctxmt_cli.evaluate.testsets import load_testsets
from ctxmt_cli.models.families import build_model
from tests.unit import test_testsets_contrapro as contrapro_rules
from tests.unit import test_testsets_lopes as lopes_rules
from tests.unit.test_testsets_voita import publisher_rule as voita_rule

ROOT = Path(__file__).resolve().parents[2]
VOITA = ROOT.parent / "shared" / "data" / "voita_consistency"
FIXTURES = ROOT / "tests" / "fixtures"


def tiny_model(testsets, tmp: Path):
    """A joint SentencePiece model on the sets' own text and a random s3to3 concatenation model."""
    text = {s for ts in testsets for item in ts.items
            for s in [*item.src_context, item.src, *item.candidates, *item.tgt_context,
                      *(x for ctx in item.candidate_contexts or [] for x in ctx)]}
    (tmp / "text.txt").write_text("\n".join(sorted(text)) + "\n", encoding="utf-8")
    tok = Tokenizer(train_sentencepiece(tmp / "text.txt", tmp / "spm", 1000).read_bytes())
    cfg = validate_recipe({"model": {"family": "concat", "preset": None, "d_model": 32, "ffn_dim": 64, "heads": 4,
                                     "encoder_layers": 1, "decoder_layers": 1, "shift": 3,
                                     "src_context_sentences": 3, "tgt_context_sentences": 3}}).model
    torch.manual_seed(0)
    model = build_model(cfg, VocabInfo(tok.src_vocab_size, tok.tgt_vocab_size, brk=tok.brk_id)).eval()
    return SimpleNamespace(model=model, tokenizer=tok)


def score_and_write(testsets, out: Path, tmp: Path) -> dict:
    loaded = tiny_model(testsets, tmp)
    scores, decided, summaries = score_sets(loaded, testsets)
    results = {"sets": summaries, "aggregates": aggregates(testsets, decided)}
    write_outputs(out, results, testsets, scores, decided)
    return json.loads((out / "results.json").read_text())


def decisions_file(out: Path, name: str) -> list[bool]:
    return [json.loads(line)["correct"] for line in (out / f"{name}.decisions.jsonl").read_text().splitlines()]


def test_voita_evaluate_consistency_agrees(tmp_path):
    if not VOITA.is_dir():
        pytest.skip(f"real Voita sets not found at {VOITA}")
    testsets = [ts for name in ("ellipsis_infl", "ellipsis_vp", "deixis_dev")
                for ts in load_testsets("voita", VOITA / f"{name}.json")]
    results = score_and_write(testsets, tmp_path / "out", tmp_path)
    for ts in testsets:
        winners, accuracy, by_dist = voita_rule(VOITA / f"{ts.name}.json", tmp_path / "out" / f"{ts.name}.scores")
        assert [bool(w) for w in winners] == decisions_file(tmp_path / "out", ts.name), ts.name
        assert results["sets"][ts.name]["accuracy"] == pytest.approx(accuracy)
        if ts.name == "deixis_dev":
            assert {str(d): a for d, a in by_dist.items()} == pytest.approx(results["sets"][ts.name]["by"]["ctx_dist"])


def test_contrapro_and_lopes_evaluate_py_agree(tmp_path):
    contrapro = load_testsets("contrapro", FIXTURES / "contrapro")
    lopes = load_testsets("lopes", FIXTURES / "lopes" / "extracted")
    results = score_and_write(contrapro + lopes, tmp_path / "out", tmp_path)
    for ts, rules in ((contrapro[0], contrapro_rules), (lopes[0], lopes_rules)):
        lines = (tmp_path / "out" / f"{ts.name}.scores").read_text().splitlines()
        publisher = rules.evaluate_py(rules.RECORDS, lines)
        assert publisher == decisions_file(tmp_path / "out", ts.name), ts.name
        assert results["sets"][ts.name]["accuracy"] == pytest.approx(sum(publisher) / len(publisher))
    assert {"cp", "cp_d>0", "cp_avg"} <= set(results["aggregates"])
