"""``ctxmt benchmark ctranslate2`` end to end on a tiny random checkpoint of the synthetic corpus: the report's lines
(no timing value is asserted: benchmarks are not tests), greedy float32 CTranslate2 translating every sentence as
ctxmt does, and its one-line refusals."""

from __future__ import annotations

import re

import pytest

from tests.integration.conftest import assert_user_error, run_cli
from tests.unit.ct2_fixtures import CONCAT, write_checkpoint

pytest.importorskip("ctranslate2")
FIGURE = "translate-concat-beam1"


@pytest.mark.slow
def test_the_report_and_greedy_float32_equal_ctxmt(synthetic_dir, tmp_path):
    ckpt = write_checkpoint(synthetic_dir, tmp_path / "concat.pt", CONCAT)
    result = run_cli("benchmark", "ctranslate2", "--checkpoint", ckpt, "--repeats", 1, "--threads", 1, "--device",
                     "cpu")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("ctranslate2: concat.pt (concat, d_model 32), synthetic test split: ")
    for engine in ("ctxmt-float32", "ctxmt-int8", "ct2-float32", "ct2-int8"):
        assert re.search(rf"^{FIGURE}\t{engine}\t\d+\.\d\t", result.stdout, re.M), result.stdout   # a table row
        assert any(re.fullmatch(rf"bleu: {FIGURE} {engine} = \d+\.\d\d", line) for line in lines), lines
    same = [re.fullmatch(rf"same-output: {FIGURE} (ctxmt-int8|ct2-float32|ct2-int8) = (\d+)/(\d+) sentences", line)
            for line in lines if line.startswith("same-output:")]
    assert [m.group(1) for m in same] == ["ctxmt-int8", "ct2-float32", "ct2-int8"]
    assert same[1].group(2) == same[1].group(3) and int(same[1].group(3)) > 20     # greedy float32: ctxmt's own
    assert any(line == f"bleu-change: {FIGURE} ct2-float32-ctxmt-float32 = +0.00" for line in lines), lines
    ratios = [line for line in lines if line.startswith("ratio:")]
    ratio = re.compile(rf"ratio: {FIGURE} (ctxmt-int8|ct2-float32|ct2-int8)/ctxmt-float32 = \d+\.\d\d")
    assert lines[-3:] == ratios and all(ratio.fullmatch(line) for line in ratios), ratios


def test_refusals(synthetic_dir, tmp_path):
    assert_user_error(run_cli("benchmark", "ctranslate2", "--preset", "tiny"),
                      "benchmark ctranslate2 does not read --preset")
    assert_user_error(run_cli("benchmark", "decode", "--checkpoint", tmp_path / "x.pt"),
                      "benchmark decode does not read --checkpoint")
    shifted = write_checkpoint(synthetic_dir, tmp_path / "shift.pt", {**CONCAT, "shift": 4})
    assert_user_error(run_cli("benchmark", "ctranslate2", "--checkpoint", shifted, "--device", "cpu"),
                      "model.shift=4")
