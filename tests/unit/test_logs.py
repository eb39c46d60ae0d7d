"""ctxmt_cli.logs: the log format a stream gets, durations and ETAs, strict JSON lines, counted progress."""

from __future__ import annotations

import io
import json

import pytest

from ctxmt_cli.logs import CountLog, duration, eta_seconds, json_line, resolve_log_format


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _strict(line: str) -> dict:
    """Parse like a strict JSON reader: NaN and Infinity are errors."""
    def refuse(name):
        raise ValueError(f"non-standard JSON constant {name}")
    return json.loads(line, parse_constant=refuse)


def test_default_format_follows_the_stream():
    assert resolve_log_format(None, Terminal()) == "rich"
    assert resolve_log_format(None, io.StringIO()) == "plain"          # a file or a pipe
    closed = io.StringIO()
    closed.close()
    assert resolve_log_format(None, closed) == "plain"
    for name in ("plain", "rich", "json"):                               # an explicit choice wins either way
        assert resolve_log_format(name, Terminal()) == resolve_log_format(name, io.StringIO()) == name
    with pytest.raises(ValueError, match="csv"):
        resolve_log_format("csv", io.StringIO())


def test_duration_and_eta():
    assert duration(3725.2) == "1:02:05" and duration(59.6) == "0:01:00" and duration(0) == "0:00:00"
    assert duration(None) == "-" and duration(float("nan")) == "-"
    assert eta_seconds(25, 100, 10.0) == pytest.approx(30.0)             # 25 in 10 s: 75 more take 30 s
    assert eta_seconds(60, 100, 10.0, start=50) == pytest.approx(40.0)   # a resumed run: only its own rate counts
    assert eta_seconds(50, 100, 10.0, start=50) is None                  # no progress yet: no rate
    assert eta_seconds(100, 100, 10.0) == 0.0


def test_json_lines_are_strict():
    record = _strict(json_line({"loss": float("nan"), "lr": float("inf"), "step": 3, "text": "ü"}))
    assert record == {"loss": None, "lr": None, "step": 3, "text": "ü"}


@pytest.mark.parametrize("fmt", ["plain", "json"])
def test_count_log_lines(fmt):
    stream = io.StringIO()
    log = CountLog(fmt, "documents", stream)
    log.update("test.fp", 2, 8)                  # a resumed task: the baseline
    log.message("a note", extra=1)
    for done in (4, 6, 8):
        log.update("test.fp", done, 8)
    log.close()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 5
    if fmt == "json":
        records = [_strict(line) for line in lines]
        assert records[1] == {"kind": "message", "text": "a note", "extra": 1}
        progress = [r for r in records if r["kind"] == "progress"]
        assert [r["done"] for r in progress] == [2, 4, 6, 8] and {r["total"] for r in progress} == {8}
        assert progress[0]["eta_s"] is None and progress[-1]["eta_s"] == 0.0
        assert all(r["elapsed_s"] >= 0 and r["task"] == "test.fp" and r["unit"] == "documents" for r in progress)
    else:
        assert lines[1] == "a note"
        assert lines[0].startswith("test.fp: 2/8 documents  elapsed 0:00:00  eta -")
        assert lines[-1].startswith("test.fp: 8/8 documents  elapsed ") and lines[-1].endswith("eta 0:00:00")


def test_count_log_throttles_but_keeps_the_first_and_last_line():
    stream = io.StringIO()
    log = CountLog("plain", "rows", stream, every=3600.0)
    for done in range(0, 101, 10):
        log.update("scoring", done, 100)
    assert [line.split()[1] for line in stream.getvalue().splitlines()] == ["0/100", "100/100"]


def test_count_log_rich_draws_a_bar_on_its_stream():
    stream = Terminal()
    log = CountLog("rich", "documents", stream)
    log.update("valid.fp", 0, 4)
    log.message("note above the bar")
    log.update("valid.fp", 4, 4)
    log.close()
    text = stream.getvalue()
    assert "note above the bar" in text and "valid.fp" in text and "4/4" in text


@pytest.mark.parametrize("fmt", ["plain", "json"])
def test_count_log_with_an_unknown_total_reports_counts_without_an_eta(fmt):
    """Documents arriving on stdin: no total, so each line says what is done and for how long, and no ETA."""
    stream = io.StringIO()
    log = CountLog(fmt, "sentences", stream)
    for done in (0, 4, 9):
        log.update("translate", done, None)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 3
    if fmt == "json":
        last = _strict(lines[-1])
        assert (last["done"], last["total"], last["eta_s"], last["unit"]) == (9, None, None, "sentences")
    else:
        assert lines[-1].startswith("translate: 9 sentences  elapsed ") and "eta" not in lines[-1]


def test_a_periodic_log_is_silent_for_a_short_task_and_reports_a_long_one(monkeypatch):
    """``CountLog.periodic``: the first line waits for the interval, so a task done sooner prints nothing (its
    command's stderr keeps its own lines alone); a longer one prints every interval and its end."""
    import ctxmt_cli.logs as logs

    clock = [100.0]
    monkeypatch.setattr(logs.time, "monotonic", lambda: clock[0])
    assert CountLog.periodic("plain", "rows").every == logs.REPORT_EVERY
    for fmt in ("plain", "json"):
        short, long = io.StringIO(), io.StringIO()
        quick, slow = CountLog(fmt, "rows", short, every=30.0, first=False), CountLog(fmt, "rows", long, every=30.0,
                                                                                       first=False)
        quick.update("cxmi", 0, 10)
        clock[0] += 5
        quick.update("cxmi", 10, 10)
        assert short.getvalue() == ""
        for done in (0, 2, 4, 6, 8, 10):
            slow.update("cxmi", done, 10)
            clock[0] += 20                                               # 20 s a step: a line every other step
        lines = long.getvalue().splitlines()
        assert len(lines) == 3                                           # at 40 s, 80 s, and the end at 100 s
        last = _strict(lines[-1]) if fmt == "json" else lines[-1]
        assert (last["done"], last["total"]) == (10, 10) if fmt == "json" else last.startswith("cxmi: 10/10 rows")
