"""Paired bootstrap / approximate randomisation: sacrebleu's numbers, seeded, p-values in [0, 1]."""

from __future__ import annotations

import os

import pytest
from sacrebleu.significance import PairedTest

from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.evaluate.bleu import make_metrics
from ctxmt_cli.evaluate.significance import check_seed, format_paired, paired_test, parse_tests

REFS = ["the cat sat on the mat", "a dog barked loudly at night", "we went to the market today",
        "she reads a book", "it is raining again"] * 3
BASE = ["the cat sat on a mat", "a dog barked at night", "we go to the market today",
        "she read a book", "it rains again"] * 3
BETTER = ["the cat sat on the mat", "the dog barked loudly at night", "we went to market",
          "she reads the book", "it is raining"] * 3
SYSTEMS = [("base", BASE), ("better", BETTER), ("copy", list(BASE))]


@pytest.mark.parametrize("test", ["bootstrap", "ar"])
def test_p_values_and_confidence_intervals(test):
    res = paired_test(SYSTEMS, REFS, make_metrics, test=test, samples=100, seed=7)
    assert res.samples == 100 and res.baseline == "base" and set(res.signatures) == {"BLEU", "chrF"}
    assert res.systems["base"]["BLEU"]["p_value"] is None
    for name in ("better", "copy"):
        for metric in ("BLEU", "chrF"):
            cell = res.systems[name][metric]
            assert 0.0 <= cell["p_value"] <= 1.0 and cell["ci95"] > 0
    # sacrebleu counts only strictly larger resampled differences: a copy of the baseline gets 1/(N+1)
    assert res.systems["copy"]["BLEU"]["p_value"] == pytest.approx(1 / 101)
    assert res.systems["copy"]["identical"] is True and "identical" not in res.systems["better"]
    assert "seed:7" in res.signatures["BLEU"]
    assert ("bs:100" if test == "bootstrap" else "ar:100") in res.signatures["BLEU"]


def test_deterministic_for_a_seed_and_environment_restored():
    os.environ.pop("SACREBLEU_SEED", None)
    first = paired_test(SYSTEMS[:2], REFS, make_metrics, test="bootstrap", samples=100, seed=3)
    again = paired_test(SYSTEMS[:2], REFS, make_metrics, test="bootstrap", samples=100, seed=3)
    other = paired_test(SYSTEMS[:2], REFS, make_metrics, test="bootstrap", samples=100, seed=4)
    assert first.systems == again.systems
    assert first.systems["better"]["BLEU"]["mean"] != other.systems["better"]["BLEU"]["mean"]
    assert "SACREBLEU_SEED" not in os.environ


def test_equal_to_sacrebleu_paired_test():
    ours = paired_test(SYSTEMS[:2], REFS, make_metrics, test="bootstrap", samples=100, seed=12345)
    os.environ["SACREBLEU_SEED"] = "12345"
    try:
        _, table = PairedTest(SYSTEMS[:2], make_metrics(), [REFS], test_type="bs", n_samples=100)()
    finally:
        os.environ.pop("SACREBLEU_SEED")
    theirs = table["BLEU"][1]
    assert ours.systems["better"]["BLEU"]["p_value"] == pytest.approx(theirs.p_value)
    assert ours.systems["better"]["BLEU"]["mean"] == pytest.approx(theirs.mean)
    assert ours.systems["better"]["chrF"]["score"] == pytest.approx(table["chrF2"][1].score)


def test_parse_tests_and_seed_checks():
    assert parse_tests(None, 1) == []
    assert parse_tests("both", 2) == ["bootstrap", "ar"]
    with pytest.raises(CtxmtError, match="choose bootstrap, ar or both"):
        parse_tests("t-test", 2)
    with pytest.raises(CtxmtError, match="1 was given"):
        parse_tests("ar", 1)
    with pytest.raises(CtxmtError, match="positive seed"):
        check_seed(0)


def test_format_paired_prints_p_values_and_ci():
    lines = format_paired(paired_test(SYSTEMS, REFS, make_metrics, test="ar", samples=50, seed=1))
    assert lines[0].startswith("paired approximate randomization (50 trials, seed 1), baseline base")
    assert any("better" in line and "p = " in line and "95% CI" in line for line in lines)
    assert any("identical to the baseline" in line for line in lines)
