"""The papers' aggregate formulas, recomputed from the per-subset columns of Lupo et al. 2023, Tables 10 and 11."""

import pytest

from ctxmt_cli.evaluate.aggregates import aggregates, contrapro_aggregates, voita_aggregates
from ctxmt_cli.evaluate.testsets import ContrastiveItem, TestSet

VOITA_SIZES = {"deixis": 2500, "lex_cohesion": 1500, "ellipsis_infl": 500, "ellipsis_vp": 500}
CP_SIZES = {"0": 2400, "1": 7075, "2": 1510, "3": 573, ">3": 442}

# Lupo et al. 2023, Table 10: deixis, lex co., ell. inf, ell. vp -> Voita, Voita_avg
TABLE_10 = [
    ((50.00, 45.87, 51.80, 27.00), (46.64, 43.67)),          # base
    ((85.80, 46.13, 79.60, 73.20), (72.02, 71.18)),          # s4to4
    ((88.76, 52.13, 83.00, 76.20), (75.94, 75.02)),          # s4to4+CD shift pers
    ((93.20, 47.40, 72.20, 64.40), (74.48, 69.30)),          # s4to4+CD lrn pers PSE
    ((86.84, 52.27, 84.60, 80.00), (75.56, 75.93)),          # s4to4+CD lrn pers
]
# Lupo et al. 2023, Table 11: d=0, 1, 2, 3, >3 -> CP_{d>0}, CP_avg, CP
TABLE_11 = [
    ((68.75, 32.89, 43.97, 47.99, 70.58), (37.27, 48.86, 43.57)),   # base
    ((75.20, 68.89, 74.96, 79.58, 87.78), (71.35, 77.80, 72.12)),   # s4to4
    ((76.66, 72.86, 75.96, 80.10, 84.38), (74.31, 78.33, 74.78)),   # s4to4+CD
    ((82.41, 80.66, 81.72, 84.29, 88.00), (81.38, 83.67, 81.59)),   # high resource s4to4
]


@pytest.mark.parametrize("columns,expected", TABLE_10)
def test_voita_aggregates_match_table_10(columns, expected):
    got = voita_aggregates(dict(zip(VOITA_SIZES, columns, strict=True)), VOITA_SIZES)
    assert got["voita"] == pytest.approx(expected[0], abs=0.006)
    assert got["voita_avg"] == pytest.approx(expected[1], abs=0.006)


@pytest.mark.parametrize("columns,expected", TABLE_11)
def test_contrapro_aggregates_match_table_11(columns, expected):
    got = contrapro_aggregates(dict(zip(CP_SIZES, columns, strict=True)), CP_SIZES)
    assert got["cp_d>0"] == pytest.approx(expected[0], abs=0.006)
    assert got["cp_avg"] == pytest.approx(expected[1], abs=0.006)
    assert got["cp"] == pytest.approx(expected[2], abs=0.006)


def test_aggregates_from_scored_sets_weight_by_subset_size():
    def voita_set(name, n, right):
        items = [ContrastiveItem([], "s", [], ["a", "b"], tags={"phenomenon": name}) for _ in range(n)]
        return TestSet(name, "voita", items), [i < right for i in range(n)]

    sets, decided = [], {}
    for name, n, right in (("deixis", 10, 5), ("lex_cohesion", 6, 6), ("ellipsis_infl", 2, 1), ("ellipsis_vp", 2, 0)):
        ts, ok = voita_set(name, n, right)
        sets.append(ts)
        decided[name] = ok
    got = aggregates(sets, decided)
    assert got["voita"] == pytest.approx(12 / 20)
    assert got["voita_avg"] == pytest.approx((0.5 + 1.0 + 0.5 + 0.0) / 4)
    assert aggregates(sets[:3], decided) == {}          # Voita needs all four phenomena
