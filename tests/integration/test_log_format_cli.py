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
