"""ctxmt_cli.train.progress: the ETA from the update budget, and the plain / json log lines a run writes to stdout
when it is not a terminal (metrics.jsonl unchanged)."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import pytest

from ctxmt_cli.train.progress import Clock, MainReporter, make_reporter

TRAIN = {"step": 4, "kind": "train", "epoch": 1, "loss": 3.25, "context_loss": 3.5, "tokens": 800.0,
         "tokens_per_s": 1234.5, "lr": 5e-4}
VALID = {"step": 4, "kind": "valid", "epoch": 1, "discounted_loss": 3.0, "window_loss": 3.1, "current_loss": 2.9,
         "best": 2.9, "bad_validations": 0}
PLAIN_TRAIN = re.compile(r"^train \| step (\d+)/(\d+)  loss (\S+)  context_loss \S+  tok/s \d+  lr \S+  "
                         r"elapsed (\d+:\d\d:\d\d)  eta (\d+:\d\d:\d\d|-)$")


class FakeTime:
    """A monotonic clock the test moves by hand."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock_time(monkeypatch) -> FakeTime:
    fake = FakeTime()
    monkeypatch.setattr("ctxmt_cli.train.progress.time.monotonic", fake)
    return fake


def test_eta_from_the_update_budget_and_the_wall_limit(clock_time):
    clock = Clock(max_steps=110)
    clock.start(10, elapsed=100.0)                       # resumed at step 10 after 100 s
    assert clock.eta(10) is None                         # no update of this process yet: no rate
    clock_time.now += 20.0
    assert clock.elapsed() == pytest.approx(120.0)       # the earlier run's time counts
    assert clock.eta(20) == pytest.approx(180.0)         # 10 updates in 20 s: the 90 left take 180 s
    walled = Clock(max_steps=110, max_minutes=4.0)
    walled.start(10, elapsed=100.0)
    assert walled.eta(10) == pytest.approx(140.0)        # before a rate, the wall limit alone
    clock_time.now += 20.0
    assert walled.eta(20) == pytest.approx(120.0)        # 240 s limit - 120 s elapsed < 180 s of updates


def test_plain_lines(tmp_path, capsys, clock_time):
    reporter = MainReporter(tmp_path, max_steps=8, terms=("context_loss",), log_format="plain")
    reporter.start(0)
    clock_time.now += 10.0
    reporter.train(TRAIN)
    reporter.valid(VALID)
    reporter.message("stopped")
    reporter.close()
    train, valid, note = capsys.readouterr().out.splitlines()
    step, total, loss, elapsed, eta = PLAIN_TRAIN.match(train).groups()
    assert (step, total, loss, elapsed, eta) == ("4", "8", "3.25", "0:00:10", "0:00:10")
    assert valid.startswith("valid | step 4/8  ") and "current 2.9" in valid and valid.endswith("eta 0:00:10")
    assert note == "stopped"
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert rows == [TRAIN, VALID]                                        # the metrics file keeps its own schema


def test_json_lines(tmp_path, capsys, clock_time):
    reporter = MainReporter(tmp_path, max_steps=8, log_format="json")
    reporter.start(0)
    clock_time.now += 4.0
    reporter.train({**TRAIN, "loss": float("nan")})
    reporter.valid(VALID)
    reporter.message("stopped")
    reporter.close()
    lines = capsys.readouterr().out.splitlines()
    records = [json.loads(line, parse_constant=lambda c: pytest.fail(f"{c} in a JSON line")) for line in lines]
    train, valid, note = records
    assert train["loss"] is None and train["tokens_per_s"] == 1234.5 and train["lr"] == 5e-4
    assert (train["step"], train["max_steps"], train["elapsed_s"], train["eta_s"]) == (4, 8, 4.0, 4.0)
    assert valid["kind"] == "valid" and valid["current_loss"] == 2.9 and valid["max_steps"] == 8
    assert note == {"kind": "message", "text": "stopped"}


def test_no_progress_prints_nothing_but_keeps_metrics(tmp_path, capsys):
    reporter = MainReporter(tmp_path, max_steps=8, show=False, log_format="plain")
    reporter.start(0)
    reporter.train(TRAIN)
    reporter.message("stopped")
    reporter.close()
    assert capsys.readouterr().out == ""
    assert len((tmp_path / "metrics.jsonl").read_text().splitlines()) == 1


def test_default_is_plain_when_stdout_is_not_a_terminal(tmp_path, capsys):
    cfg = SimpleNamespace(max_steps=8, max_minutes=None)
    reporter = make_reporter(True, tmp_path, cfg, show=True, start_step=0, terms=("context_loss",))
    reporter.start(0)
    reporter.train(TRAIN)
    reporter.close()
    assert PLAIN_TRAIN.match(capsys.readouterr().out.strip())           # captured stdout is no terminal


def test_a_resume_keeps_rows_up_to_its_step_and_drops_its_own_earlier_notes(tmp_path):
    """truncate_metrics: rows past the resumed step go (their work is redone); a message row *at* the step came
    from an earlier resume from this same checkpoint, which this resume replaces with its own."""
    from ctxmt_cli.train.progress import truncate_metrics

    rows = [{**TRAIN, "step": 3}, {**VALID, "step": 3}, {"step": 3, "kind": "message", "text": "changed"},
            {**TRAIN, "step": 5}, {**VALID, "step": 6}, {"step": 1, "kind": "message", "text": "older"}]
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"step": 7, "kind": "tr')    # a cut line
    truncate_metrics(path, 3)
    kept = [json.loads(line) for line in path.read_text().splitlines()]
    assert kept == [rows[0], rows[1], rows[5]]


def test_a_validation_row_and_a_note_are_on_disk_when_written(tmp_path):
    reporter = MainReporter(tmp_path, max_steps=10, show=False)
    reporter.valid(VALID)
    reporter.record_message(4, "resumed with changes", changed={"train.lr": [0.1, 0.2]})
    # read through another handle before closing: nothing waits in the reporter's buffer
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert rows == [VALID, {"step": 4, "kind": "message", "text": "resumed with changes",
                            "changed": {"train.lr": [0.1, 0.2]}}]
    reporter.close()
