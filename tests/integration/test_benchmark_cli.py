"""`ctxmt benchmark`: the context-scaling benchmark runs end to end on tiny dims.

A smoke test of the output's shape only: benchmarks are not tests, so no timing or memory value is asserted.
"""

from __future__ import annotations

import importlib.util
import json
import re

import pytest

from tests.integration.conftest import assert_user_error, run_cli

MODELS = ("concat", "caching-tokens", "grouping", "sentence")
RATIO = re.compile(r"^ratio: (time-per-sentence|time-per-sentence-per-document|memory) K2/K1 "
                   r"(concat|caching-tokens|grouping|sentence) = \d+\.\d\d$")


@pytest.mark.slow
def test_context_scaling_smoke(tmp_path):
    out = tmp_path / "cs"
    result = run_cli("benchmark", "context-scaling", "--contexts", "1,2", "--docs", 1, "--sentences", 3,
                     "--preset", "tiny", "--repeats", 1, "--out", out)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    ratios = [line for line in lines if line.startswith("ratio:")]
    assert len(ratios) == 12 and all(RATIO.match(line) for line in ratios), ratios
    assert lines[-12:] == ratios                                           # the ratio lines close the output
    assert {(m.group(1), m.group(2)) for m in map(RATIO.match, ratios)} == {
        (kind, name) for kind in ("time-per-sentence", "time-per-sentence-per-document", "memory")
        for name in MODELS}
    assert sum("caching-tokens / sentence time per sentence at K=" in line for line in lines) == 2
    payload = json.loads((out / "context_scaling.json").read_text())
    cells = {(r["model"], r["k"]) for r in payload["results"]}
    assert cells == {(name, k) for name in MODELS for k in (1, 2)}
    for r in payload["results"]:
        assert r["sentences"] == 3 and r["ms_per_sentence"] > 0 and r["op_memory_mb"] >= 0 and r["weights_mb"] > 0
        assert r["ms_per_sentence_per_document"] > 0 and r["cpu_ms_per_sentence_per_document"] > 0
    if importlib.util.find_spec("matplotlib") is not None:
        assert (out / "context_scaling.png").stat().st_size > 0
    else:
        assert "matplotlib is not installed" in result.stdout


def test_unknown_benchmark_is_one_line(tmp_path):
    assert_user_error(run_cli("benchmark", "nope", "--out", tmp_path), "'nope' is not one of", "context-scaling")


def test_bad_contexts_is_one_line(tmp_path):
    assert_user_error(run_cli("benchmark", "context-scaling", "--contexts", "0,x", "--out", tmp_path), "--contexts")


def test_context_scaling_quick_defaults_and_explicit_options_win():
    from ctxmt_cli.cli.benchmark import _load_benchmark

    settings = _load_benchmark("context-scaling").Settings.make
    quick, full = settings(True, docs=None, sentences=3, threads=None), settings(False, "4,1", docs=None, threads=None)
    assert (quick.contexts, quick.docs, quick.sentences, quick.repeats) == ((1, 4, 8), 2, 3, 2)   # --sentences wins
    assert (full.contexts, full.docs, full.sentences, full.repeats, full.threads) == ((1, 4), 4, 32, 2, 1)
    assert settings(False).contexts == (1, 2, 4, 8, 16)
