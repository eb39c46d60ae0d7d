"""--log-format through the CLI: a run whose output is no terminal (the test runner's, a log file's) prints plain
log lines, never a progress bar's frames; json prints one object per line; the streams stay separate."""

from __future__ import annotations

import json
import re

from tests.integration.conftest import QUICKSTART, run_cli, tiny_sets

TRAIN_LINE = re.compile(r"^train \| step (\d+)/(\d+)  loss \S+  .*tok/s \d+  lr \S+  elapsed \d+:\d\d:\d\d  "
                        r"eta (\d+:\d\d:\d\d|-)$")
VALID_LINE = re.compile(r"^valid \| step (\d+)/(\d+)  .*current \S+.*  elapsed \d+:\d\d:\d\d  eta (\d+:\d\d:\d\d|-)$")
BAR = "━"                                                   # rich's bar glyph


def _json_lines(text: str) -> list[dict]:
    return [json.loads(line, parse_constant=lambda c: f"invalid {c}") for line in text.splitlines()]


def test_train_logs_plain_lines_then_json_lines_on_resume(synthetic_dir, tmp_path):
    save = tmp_path / "run"
    once = ("--set", "train.valid_every=4")
    result = run_cli("train", QUICKSTART, *tiny_sets(synthetic_dir, save), *once)           # log_every 1
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert BAR not in result.output and "\x1b[" not in result.output
    train = [TRAIN_LINE.match(line) for line in lines if line.startswith("train |")]
    valid = [VALID_LINE.match(line) for line in lines if line.startswith("valid |")]
    assert all(train) and all(valid), lines
    assert [(m.group(1), m.group(2)) for m in train] == [(str(s), "4") for s in range(1, 5)]
    assert [m.group(1) for m in valid] == ["4"] and train[-1].group(3) == "0:00:00"
    assert lines[-1] == f"best checkpoint: {save / 'checkpoint_best.pt'}"

    result = run_cli("train", QUICKSTART, *tiny_sets(synthetic_dir, save), *once, "--set", "train.max_steps=6",
                     "--resume", "--allow-changed", "train.max_steps", "--log-format", "json")
    assert result.exit_code == 0, result.output
    records = _json_lines(result.stdout)                                # every stdout line is a JSON object
    kinds = [r["kind"] for r in records]
    assert kinds[0] == "message" and "resumed from" in records[0]["text"] and kinds[-1] == "result"
    steps = [(r["step"], r["max_steps"]) for r in records if r["kind"] == "train"]
    assert steps == [(5, 6), (6, 6)]
    metrics = [json.loads(line) for line in (save / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in metrics if r["kind"] == "train"] == [1, 2, 3, 4, 5, 6]      # one history
    timed = [r for r in records if r["kind"] in ("train", "valid")]
    assert all(r["elapsed_s"] > 0 and r["eta_s"] is not None and r["eta_s"] >= 0 for r in timed)
    assert timed[-1]["eta_s"] == 0.0 and records[-1]["best"] == str(save / "checkpoint_best.pt")


PROGRESS = re.compile(r"^(translate|cxmi|analyze-attention): (\d+)/(\d+) (sentences|rows|windows)  "
                      r"elapsed \d+:\d\d:\d\d  eta (\d+:\d\d:\d\d|-)$")


def _progress(stderr: str, task: str) -> list[tuple[int, int]]:
    """(done, total) of each plain progress line of ``task``; every line starting with the task must be one."""
    lines = [line for line in stderr.splitlines() if line.startswith(f"{task}: ")]
    found = [PROGRESS.match(line) for line in lines]
    assert found and all(found), lines
    return [(int(m.group(2)), int(m.group(3))) for m in found]


def test_translate_reports_progress_on_stderr_and_its_output_is_unchanged(concat_checkpoint, two_documents,
                                                                          tmp_path, monkeypatch):
    args = ("translate", two_documents, "-c", concat_checkpoint, "--beam", 1)
    quiet = run_cli(*args, "-o", tmp_path / "a.txt")                    # the runner's stderr is no terminal: plain
    assert quiet.exit_code == 0, quiet.output
    sentences = sum(1 for line in two_documents.read_text().splitlines() if line.strip())
    # done within the first interval (30 s): no progress line, only the closing one
    assert quiet.stderr.splitlines() == [line for line in quiet.stderr.splitlines() if line.startswith("translated ")]
    assert quiet.stderr.startswith(f"translated {sentences} sentences in ")

    monkeypatch.setattr("ctxmt_cli.logs.REPORT_EVERY", 0.0)             # every report: the periodic lines, all shown
    loud = run_cli(*args, "-o", tmp_path / "b.txt", "--log-format", "plain")
    assert loud.exit_code == 0, loud.output
    counts = _progress(loud.stderr, "translate")
    assert len(counts) > 2 and counts == sorted(counts) and counts[-1] == (sentences, sentences)
    assert (tmp_path / "b.txt").read_bytes() == (tmp_path / "a.txt").read_bytes()
    assert BAR not in loud.output and "\x1b[" not in loud.output

    piped = run_cli(*args, "--log-format", "json")                      # -o -: stdout holds the translations alone
    assert piped.exit_code == 0 and piped.stdout == (tmp_path / "a.txt").read_text()
    records = _json_lines(piped.stderr)
    assert {r["kind"] for r in records} == {"progress", "message"} and records[-1]["sentences"] == sentences
    # the closing object carries the counters a user checks a translation by, as evaluate's results.json does
    assert {"beam", "target_mode", "fallbacks", "tokens_written", "seconds"} <= records[-1].keys()
    assert records[-1]["beam"] == 1 and 0 <= records[-1]["fallbacks"] <= sentences


def test_cxmi_and_analyze_attention_report_progress_on_stderr(concat_checkpoint, synthetic_dir, tmp_path,
                                                              monkeypatch):
    monkeypatch.setattr("ctxmt_cli.logs.REPORT_EVERY", 0.0)             # a line per batch, however short the run
    cxmi = run_cli("cxmi", "-c", concat_checkpoint, "--data", synthetic_dir, "--log-format", "plain")
    assert cxmi.exit_code == 0, cxmi.output
    counts = _progress(cxmi.stderr, "cxmi")
    assert counts[0][0] == 0 and counts[-1][0] == counts[-1][1] > 0
    assert "cxmi:" not in cxmi.stdout and "CXMI" in cxmi.stdout

    attention = run_cli("analyze-attention", "-c", concat_checkpoint, "--data", synthetic_dir, "--no-plots",
                        "--max-sentences", 20, "-o", tmp_path / "att", "--log-format", "json")
    assert attention.exit_code == 0, attention.output
    records = [r for r in _json_lines(attention.stderr.split("wrote ")[0]) if r["kind"] == "progress"]
    assert records[0]["done"] == 0 and records[-1]["done"] == records[-1]["total"] == 20
    assert all(r["task"] == "analyze-attention" and r["unit"] == "windows" for r in records)


def test_prepare_reports_the_pairs_of_each_split_on_stderr(tmp_path, monkeypatch):
    quiet = run_cli("prepare", "synthetic", "-o", tmp_path / "quiet", "--docs", 41)
    assert quiet.exit_code == 0 and quiet.stderr == ""                  # done within the first interval: silent
    monkeypatch.setattr("ctxmt_cli.logs.REPORT_EVERY", 0.0)             # a line per chunk, however short the run
    result = run_cli("prepare", "synthetic", "-o", tmp_path / "data", "--docs", 41, "--log-format", "json")
    assert result.exit_code == 0, result.output
    records = _json_lines(result.stderr)
    progress = [r for r in records if r["kind"] == "progress"]
    assert {r["task"] for r in progress} == {"prepare train", "prepare valid", "prepare test"}
    for split in ("train", "valid", "test"):
        mine = [r for r in progress if r["task"] == f"prepare {split}"]
        assert mine[-1]["done"] == mine[-1]["total"] > 0 and mine[-1]["unit"] == "pairs"
    assert result.stdout.startswith("prepared ") or "prepared" in result.stdout      # the summary stays on stdout
    assert not [line for line in result.stdout.splitlines() if line.startswith("{")]
