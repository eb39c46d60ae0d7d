"""McNemar's test on paired decisions, and comparing two `contrastive --out` runs."""

import json
import math

import pytest

from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.evaluate.mcnemar import compare_runs, mcnemar


def test_exact_p_value_by_hand():
    # b = 1, c = 6 discordant pairs: p = 2 * P(X <= 1), X ~ Bin(7, 1/2) = 2 * 8 / 128
    a = [True] * 1 + [False] * 6 + [True] * 5
    b = [False] * 1 + [True] * 6 + [True] * 5
    got = mcnemar(a, b)
    assert (got["only_a"], got["only_b"], got["n"]) == (1, 6, 12)
    assert got["p_exact"] == pytest.approx(16 / 128)
    assert got["chi2"] == pytest.approx((5 - 1) ** 2 / 7)
    assert got["p_chi2"] == pytest.approx(math.erfc(math.sqrt(got["chi2"] / 2)))


def test_identical_and_symmetric():
    same = mcnemar([True, False, True], [True, False, True])
    assert same["p_exact"] == 1.0 and same["chi2"] == 0.0
    a, b = [True, True, False, True, False] * 40, [False, True, True, False, False] * 40
    assert mcnemar(a, b)["p_exact"] == pytest.approx(mcnemar(b, a)["p_exact"])
    big = mcnemar([True] * 3000 + [False] * 1000, [False] * 3000 + [True] * 1000)   # no underflow on large n
    assert 0.0 <= big["p_exact"] < 1e-100


def _run(path, name, oks, tags):
    path.mkdir()
    rows = [json.dumps({"correct": ok, "tags": tag}) for ok, tag in zip(oks, tags, strict=True)]
    (path / f"{name}.decisions.jsonl").write_text("\n".join(rows) + "\n")
    return path


def test_compare_runs_per_phenomenon(tmp_path):
    tags = [{"phenomenon": p} for p in "xxyy"]
    a = _run(tmp_path / "a", "set", [True, True, False, True], tags)
    b = _run(tmp_path / "b", "set", [False, True, True, True], tags)
    got = compare_runs(a, b)
    assert got["overall"]["only_a"] == 1 and got["overall"]["only_b"] == 1
    assert set(got["sets"]["set"]["by"]) == {"x", "y"}
    other = _run(tmp_path / "c", "set", [True, True, True], tags[:3])
    with pytest.raises(CtxmtError, match="different items"):
        compare_runs(a, other)
    with pytest.raises(CtxmtError, match="no \\*.decisions.jsonl"):
        compare_runs(a, tmp_path)
