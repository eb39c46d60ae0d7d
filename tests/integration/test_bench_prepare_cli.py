"""`ctxmt benchmark prepare`: the output's shape on the --quick sizes (no timing or memory value asserted)."""

from __future__ import annotations

import re

import pytest

from ctxmt_cli.benchmarks.bench_util import shared_data
from tests.integration.conftest import assert_user_error, run_cli

RATIO = re.compile(r"^ratio: (prepare-(europarl|synthetic) prepare/raw-encode|loader-small loader/trainer) "
                   r"= \d+\.\d\d$")


def test_prepare_benchmark_refuses_options_it_does_not_read():
    assert_user_error(run_cli("benchmark", "prepare", "--preset", "base"), "benchmark prepare does not read --preset",
                      "--quick, --threads, --repeats")


@pytest.mark.slow
def test_prepare_benchmark_quick_smoke():
    if not (shared_data("europarl_enfr") / "train.en.xz").is_file():
        pytest.skip("no ../shared/data/europarl_enfr: the prepare benchmark reads the Europarl training set")
    result = run_cli("benchmark", "prepare", "--quick", "--repeats", 1)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    ratios = [line for line in lines if line.startswith("ratio:")]
    assert len(ratios) == 3 and all(RATIO.match(line) for line in ratios), ratios
    assert lines[-3:] == ratios
    for figure in ("prepare-europarl-trained:", "prepare-europarl:", "prepare-synthetic:", "first-step:",
                   "loader-small:", "trainer-small:"):
        assert any(line.startswith(figure) for line in lines), figure
