"""Training curves: reading metrics.jsonl, the context loss and the current / context ratio, which curves exist."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from ctxmt_cli.analysis import curves
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.train.trainer import train
from tests.unit.train_fixtures import recipe


def write_rows(run: Path, rows: list, tail: str = "") -> Path:
    run.mkdir(parents=True, exist_ok=True)
    text = "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows) + tail
    (run / "metrics.jsonl").write_text(text, encoding="utf-8")
    return run


def row(step: int, kind: str = "train", **fields) -> dict:
    return {"step": step, "kind": kind, "epoch": 0, **fields}


def by_name(quantities) -> dict:
    return {q.name: q for q in quantities}


def test_context_loss_follows_from_the_window_and_current_sums():
    # window: 10 tokens of mean 3.0 (sum 30); current: 4 tokens of mean 1.5 (sum 6) -> context: 24 / 6 = 4.0
    r = row(5, window_loss=3.0, current_loss=1.5, tokens=10.0, current_tokens=4.0, loss=3.0, lr=1e-3)
    q = by_name(curves.select({"run": [r]}))
    assert q["context_loss"].lines["run"]["train"] == ([5], [4.0])
    assert q["current_context_ratio"].lines["run"]["train"] == ([5], [1.5 / 4.0])


def test_a_logged_context_loss_term_is_read_as_is():
    r = row(1, window_loss=3.0, current_loss=1.5, tokens=10.0, current_tokens=4.0, context_loss=3.9)
    q = by_name(curves.select({"run": [r]}))
    assert q["context_loss"].lines["run"]["train"] == ([1], [3.9])
    assert "context_loss" not in [name for name in q if name not in {s.name for s in curves.CORE}]


def test_a_sentence_level_run_has_no_context_curves():
    r = row(1, window_loss=2.0, current_loss=2.0, tokens=8.0, current_tokens=8.0, loss=2.0)
    names = set(by_name(curves.select({"run": [r]})))
    assert {"objective", "window_loss", "current_loss"} <= names
    assert not names & {"context_loss", "current_context_ratio"}


def test_every_other_numeric_field_is_a_named_curve_and_bookkeeping_is_not():
    rows = [row(1, loss=2.0, gate_loss=0.7, tokens=5.0, current_tokens=5.0),
            row(2, "valid", discounted_loss=2.1, gate_loss=0.6, best=2.1, bad_validations=0, flag=True)]
    q = by_name(curves.select({"run": rows}))
    assert q["gate_loss"].lines["run"] == {"train": ([1], [0.7]), "valid": ([2], [0.6])}
    assert q["objective"].lines["run"] == {"train": ([1], [2.0]), "valid": ([2], [2.1])}
    assert not set(q) & {"best", "bad_validations", "tokens", "current_tokens", "epoch", "flag"}


def test_a_curve_with_no_finite_value_is_left_out_and_runs_without_it_are_absent():
    runs = {"a": [row(1, loss=float("nan"), lr=0.1)], "b": [row(1, loss=2.0)]}
    q = by_name(curves.select(runs))
    assert list(q["objective"].lines) == ["b"] and list(q["lr"].lines) == ["a"]


def test_read_metrics_sorts_by_step_and_skips_a_last_line_cut_short(tmp_path):
    run = write_rows(tmp_path / "run", [row(4, loss=1.0), row(2, loss=2.0), row(4, "valid", discounted_loss=1.5)],
                     tail='{"step": 6, "kind": "tr')
    assert [(r["step"], r["kind"]) for r in curves.read_metrics(run)] == [(2, "train"), (4, "train"), (4, "valid")]


def test_a_last_line_cut_short_is_a_warning_naming_the_line(tmp_path, caplog):
    run = write_rows(tmp_path / "run", [row(1, loss=1.0), row(2, loss=0.5)], tail='[1, 2')
    with caplog.at_level("WARNING", logger="ctxmt_cli"):
        rows = curves.read_metrics(run)
    assert [r["step"] for r in rows] == [1, 2]
    (warning,) = [r.getMessage() for r in caplog.records]
    assert "metrics.jsonl, line 3 (the last)" in warning and "skipped" in warning


@pytest.mark.parametrize("middle, problem", [
    ("garbage", "line 2: not a JSON object"),
    ("[1, 2, 3]", "line 2: a JSON list, not an object"),
    ('{"kind": "train", "loss": 1.0}', "line 2: no integer 'step'"),
    ('{"step": true, "kind": "train"}', "line 2: no integer 'step' (got true)"),
    ('{"step": 3, "kind": "test"}', "line 2: 'kind' is \"test\", not one of train, valid"),
])
def test_a_garbage_middle_line_is_an_error_naming_file_and_line(tmp_path, middle, problem):
    run = write_rows(tmp_path / "run", [row(1, loss=1.0), middle, row(2, loss=0.5)])
    with pytest.raises(CtxmtError) as err:
        curves.read_metrics(run)
    assert str(err.value).startswith(f"{run / 'metrics.jsonl'}, {problem}"), str(err.value)
    assert "\n" not in str(err.value) and "remove or repair that line" in str(err.value)


def test_metrics_that_are_not_utf8_are_one_line(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_bytes(json.dumps(row(1)).encode() + b"\n\xff\xfe\n")
    with pytest.raises(CtxmtError, match=r"metrics\.jsonl, line 2: not UTF-8"):
        curves.read_metrics(run)


@pytest.mark.parametrize("setup, needle", [
    (lambda p: None, "not found"),
    (lambda p: p.write_text("x"), "is a file"),
    (lambda p: p.mkdir(), "no metrics.jsonl in"),
    (lambda p: write_rows(p, ['{"step": 1', json.dumps(row(2, loss=1.0))]), "line 1: not a JSON object"),
    (lambda p: write_rows(p, [json.dumps({"note": "hello"})]), "holds no metric rows"),
])
def test_read_metrics_errors_are_one_line_naming_the_place(tmp_path, setup, needle):
    run = tmp_path / "run"
    setup(run)
    with pytest.raises(CtxmtError, match=needle) as err:
        curves.read_metrics(run)
    assert str(run) in str(err.value) and "\n" not in str(err.value)


def test_run_labels_are_directory_names_made_unique_by_their_parents(tmp_path):
    a, b, c = tmp_path / "x" / "run", tmp_path / "y" / "run", tmp_path / "y" / "other"
    assert curves.run_labels([a, c]) == ["run", "other"]
    assert curves.run_labels([a, b, c]) == ["x/run", "y/run", "y/other"]
    assert curves.run_labels([a, a]) == ["run (1)", "run (2)"]


def test_file_names_are_safe():
    assert curves.Quantity("a/b c", "", "").file_name == "a_b_c.png"


def test_on_a_real_concat_run_the_derived_context_loss_equals_the_logged_term(prepared, tmp_path):
    """The trainer's rows hold everything the curves need; deriving the context loss from the window and
    current sums gives the concat family's own context_loss term (Lupo et al. 2022, eq. 2) on every row."""
    save = tmp_path / "cd"
    train(recipe(prepared, save, {"cd": 0.01}, max_steps=6, log_every=2, valid_every=3), show_progress=False)
    rows = curves.read_metrics(save)
    assert {r["kind"] for r in rows} == {"train", "valid"}
    for r in rows:
        logged = r.pop("context_loss")
        assert math.isclose(curves._context_loss(r), logged, rel_tol=1e-5)
    q = by_name(curves.select({"cd": curves.read_metrics(save)}))
    assert {"objective", "window_loss", "current_loss", "context_loss", "current_context_ratio", "lr",
            "tokens_per_s"} <= set(q)
    steps, ratios = q["current_context_ratio"].lines["cd"]["valid"]
    assert steps == [3, 6] and all(0 < v < 10 for v in ratios)
    # CD = 0.01 discounts the context: the objective is far below the plain window loss
    objective, window = q["objective"].lines["cd"]["train"][1], q["window_loss"].lines["cd"]["train"][1]
    assert all(o < w for o, w in zip(objective, window, strict=True))
