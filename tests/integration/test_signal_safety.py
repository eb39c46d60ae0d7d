"""SIGTERM and SIGHUP (what ``timeout``, Slurm, Docker and a closed terminal send) take Ctrl-C's path, in real
processes sent real signals mid-run: one line on stderr, exit 128 + the signal's number, no temp left, the
previous output back in place; training first saves a checkpoint that ``--resume`` continues bit for bit; and a
run killed with -9 mid-replacement loses nothing: the next run puts the previous output back.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from ctxmt_cli.models.loading import read_checkpoint
from ctxmt_cli.outputs import ASIDE_TAG, TEMP_TAG
from tests.integration.conftest import QUICKSTART, ROOT, TINY_SETS, assert_user_error, run_cli
from tests.integration.test_bad_inputs import snapshot

LINE = {signal.SIGINT: "ctxmt: interrupted", signal.SIGTERM: "ctxmt: interrupted (SIGTERM)",
        signal.SIGHUP: "ctxmt: interrupted (SIGHUP)"}


def stop_midway(args: list, ready: Callable[[], bool], signum: int, cwd: Path, timeout: float = 900.0):
    """Run ``ctxmt ARGS`` in a real process in ``cwd``, send it ``signum`` once ``ready()``; (exit code, stderr)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    process = subprocess.Popen([sys.executable, "-m", "ctxmt_cli", *map(str, args)], cwd=cwd, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + timeout
    try:
        while not ready():
            if process.poll() is not None:
                pytest.fail(f"ctxmt {' '.join(map(str, args))} ended before the signal: {process.stderr.read()}")
            assert time.monotonic() < deadline, "never got ready"
            time.sleep(0.02)
        process.send_signal(signum)
        _, err = process.communicate(timeout=timeout)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return process.returncode, err


def assert_stopped(code: int, err: str, signum: int, *needles: str) -> str:
    """Exit 128 + ``signum``, one line on stderr (the signal's), no traceback."""
    lines = err.strip().splitlines()
    assert code == 128 + signum and len(lines) == 1 and "Traceback" not in err, (code, err)
    assert lines[0].startswith(LINE[signum]), err
    for needle in needles:
        assert needle in lines[0], err
    return lines[0]


def litter(root: Path) -> list:
    """Temp and set-aside paths under ``root``; ``os.walk`` skips a folder the running process removes meanwhile."""
    return [Path(top, name) for top, dirs, files in os.walk(root) for name in dirs + files
            if TEMP_TAG in name or ASIDE_TAG in name]


def _exists(pattern: str, root: Path, nonempty: bool = False) -> Callable[[], bool]:
    def ready() -> bool:
        try:        # polled while the process renames and removes these paths: a vanished one is "not yet"
            return any((not nonempty) or (p.is_dir() and any(p.iterdir())) or (p.is_file() and p.stat().st_size)
                       for p in root.glob(pattern))
        except FileNotFoundError:
            return False
    return ready


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_translate_stopped_leaves_no_output_and_no_temp(signum, concat_checkpoint, tmp_path):
    docs = [" ".join(f"w{(d * 7 + s) % 23} ." for _ in range(6)) for d in range(40) for s in range(8)]
    (tmp_path / "in.txt").write_text("\n".join(docs) + "\n")
    code, err = stop_midway(["translate", "in.txt", "-c", concat_checkpoint, "-o", "out.txt", "--beam", "4",
                             "--device", "cpu"], _exists(f".out.txt{TEMP_TAG}*", tmp_path),
                            signum, tmp_path)
    assert_stopped(code, err, signum)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]


def test_prepare_force_stopped_keeps_the_previous_dataset(synthetic_dir, tmp_path):
    shutil.copytree(synthetic_dir, tmp_path / "data")
    before = snapshot(tmp_path)
    code, err = stop_midway(["prepare", "synthetic", "--out", "data", "--docs", "3000", "--force"],
                            _exists(f".data{TEMP_TAG}*/*", tmp_path), signal.SIGTERM, tmp_path)
    assert_stopped(code, err, signal.SIGTERM)
    assert snapshot(tmp_path) == before and litter(tmp_path) == []


QS = ["quickstart", "--out", "qs", "--docs", "41", "--updates", "2", "--systems", "concat", "--device", "cpu"]


def test_quickstart_force_stopped_or_killed_keeps_the_previous_output(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = run_cli(*QS)
    assert result.exit_code == 0, result.output
    before = snapshot(tmp_path)

    def training() -> bool:                         # the old output set aside, the new one training
        return bool(litter(tmp_path)) and _exists("qs/concat/*", tmp_path)()
    code, err = stop_midway([*QS, "--force"], training, signal.SIGHUP, tmp_path)
    assert_stopped(code, err, signal.SIGHUP)
    assert snapshot(tmp_path) == before and litter(tmp_path) == []
    # kill -9 skips every cleanup: the previous output waits aside (its only copy), and the next run puts it back
    code, _ = stop_midway([*QS, "--force"], training, signal.SIGKILL, tmp_path)
    aside = [p.name.partition(ASIDE_TAG)[0] for p in tmp_path.iterdir() if ASIDE_TAG in p.name]
    assert code == -signal.SIGKILL and aside == [".qs"]
    assert_user_error(run_cli(*QS), "qs already exists")
    assert snapshot(tmp_path) == before and litter(tmp_path) == []


def _train_args(data: Path, save: Path, steps: int) -> list:
    sets = [f"data.path={data}", f"train.save_dir={save}", *TINY_SETS, f"train.max_steps={steps}",
            "train.valid_every=10", "train.threads=1"]
    return ["train", QUICKSTART, "--device", "cpu", *[a for s in sets for a in ("--set", s)]]


def _train_rows(save: Path) -> Callable[[], bool]:
    """Ready once metrics.jsonl records a train row past step 2 (every row is one update: log_every 1)."""
    def ready() -> bool:
        path = save / "metrics.jsonl"
        if not path.is_file():
            return False
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]
        return any(row.get("kind") == "train" and row["step"] > 2 for row in rows)
    return ready


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_train_stopped_saves_a_checkpoint_that_resumes_bit_for_bit(signum, synthetic_dir, tmp_path):
    save = tmp_path / "run"
    code, err = stop_midway(_train_args(synthetic_dir, save, 400), _train_rows(save), signum, tmp_path)
    line = assert_stopped(code, err, signum, f"saved {save / 'checkpoint_last.pt'} at step", "--resume")
    step = int(line.split(" at step ")[1].split(";")[0])
    assert read_checkpoint(save / "checkpoint_last.pt")["state"]["step"] == step and litter(tmp_path) == []
    if signum != signal.SIGTERM:
        return
    steps = step + 3                                     # resumed a few updates past the signal
    resumed = run_cli(*_train_args(synthetic_dir, save, steps), "--resume", "--allow-changed", "train.max_steps")
    assert resumed.exit_code == 0, resumed.output
    whole = run_cli(*_train_args(synthetic_dir, tmp_path / "whole", steps))
    assert whole.exit_code == 0, whole.output
    a, b = (read_checkpoint(p / "checkpoint_last.pt")["model"] for p in (save, tmp_path / "whole"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
