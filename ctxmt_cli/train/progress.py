"""Training progress on rank 0: a ``rich`` live bar or log lines (``--log-format``), JSON-lines metrics,
optional TensorBoard.

``metrics.jsonl`` in the save directory always receives one JSON object per
log line (``{"step", "kind": "train"|"valid"|"message", ...}``); when resuming, lines
past the resumed step (written by the interrupted run after its last
checkpoint) are dropped first so the file reads like one uninterrupted run.
A validation row is on disk (flushed and fsynced) before the checkpoints of its
step are written, so no kill between them loses it. Other ranks get a reporter
that does nothing.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from ctxmt_cli.logs import duration, eta_seconds, fmt_number, json_line, resolve_log_format
from ctxmt_cli.outputs import write_atomic

#: validation fields printed above the bar before the family's loss terms (all of them go to metrics.jsonl)
_VALID_SHOWN = ("discounted_loss", "window_loss", "current_loss")


def truncate_metrics(path: Path, last_step: int) -> None:
    """Drop metric lines with ``step > last_step`` (they belong to work a resume will redo), and ``message`` rows
    at ``last_step`` itself (an earlier resume from this same checkpoint wrote them; this one writes its own)."""
    if not path.is_file():
        return
    kept = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
            step = row.get("step", 0)
            if step < last_step or (step == last_step and row.get("kind") != "message"):
                kept.append(line)
        except (json.JSONDecodeError, AttributeError):
            continue                        # a line cut short by a kill -9
    text = "".join(k + "\n" for k in kept)
    if text.encode("utf-8") != path.read_bytes():          # nothing to drop: no write (a full disk may resume)
        write_atomic(path, text)


def _tensorboard(log_dir: Path):
    """A SummaryWriter when TensorBoard is installed, else None (it is an optional extra)."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except Exception:  # noqa: BLE001 - ImportError, or tensorboard's own import-time errors
        return None
    return SummaryWriter(log_dir=str(log_dir))


class Reporter:
    """Where training reports go; this base class (used on ranks > 0) drops everything."""

    def start(self, step: int, elapsed: float = 0.0) -> None: ...
    def train(self, record: dict) -> None: ...
    def valid(self, record: dict) -> None: ...
    def message(self, text: str) -> None: ...
    def record_message(self, step: int, text: str, **fields) -> None: ...
    def close(self) -> None: ...

    def files(self) -> list[Path]:
        """The files this reporter wrote in the run's folder (none here)."""
        return []


class Clock:
    """Elapsed training time (a resumed run's earlier time included) and the ETA from the update budget
    (``max_steps``; ``max_minutes`` too when the recipe sets it), at the rate of this process's updates."""

    def __init__(self, max_steps: int, max_minutes: float | None = None):
        self.max_steps, self.max_minutes = max_steps, max_minutes
        self.start(0)

    def start(self, step: int, elapsed: float = 0.0) -> None:
        """Count from update ``step``, ``elapsed`` seconds into the training."""
        self.t0, self.step0, self.before = time.monotonic(), step, elapsed

    def elapsed(self) -> float:
        return self.before + time.monotonic() - self.t0

    def eta(self, step: int) -> float | None:
        """Seconds until the budget is spent, or None before the first update of this process."""
        left = eta_seconds(step, self.max_steps, time.monotonic() - self.t0, self.step0)
        if self.max_minutes is not None:
            wall = max(self.max_minutes * 60 - self.elapsed(), 0.0)
            left = wall if left is None else min(left, wall)
        return left

    def fields(self, step: int) -> dict:
        """``max_steps``, ``elapsed_s`` and ``eta_s`` of a log line at ``step``."""
        eta = self.eta(step)
        return {"max_steps": self.max_steps, "elapsed_s": round(self.elapsed(), 3),
                "eta_s": None if eta is None else round(eta, 3)}


def _valid_shown(record: dict, terms: tuple[str, ...]) -> str:
    keys = _VALID_SHOWN + terms + ("best", "bad_validations")
    return "  ".join(f"{k.removesuffix('_loss')} {fmt_number(record[k])}" for k in keys if k in record)


class RichView:
    """A live ``rich`` bar on stdout with notes and validation lines printed above it (a terminal)."""

    def __init__(self, max_steps: int, terms: tuple[str, ...]):
        self.max_steps, self.terms, self._bar, self._task = max_steps, terms, None, None

    def start(self, step: int) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self._bar = Progress(
            TextColumn("[bold]train"), BarColumn(), MofNCompleteColumn(),
            TextColumn("loss {task.fields[loss]}{task.fields[terms]}  {task.fields[tps]} tok/s  lr {task.fields[lr]}"),
            TimeRemainingColumn(),
        )
        self._bar.start()
        self._task = self._bar.add_task("train", total=self.max_steps, completed=step, loss="-", terms="", tps="-",
                                        lr="-")

    def train(self, record: dict, clock: Clock) -> None:
        if self._bar is None:
            return
        terms = "".join(f"  {t} {fmt_number(record[t])}" for t in self.terms if t in record)
        self._bar.update(self._task, completed=record["step"], loss=fmt_number(record["loss"]), terms=terms,
                         tps=f"{record['tokens_per_s']:.0f}", lr=f"{record['lr']:.3g}")

    def valid(self, record: dict, clock: Clock) -> None:
        self.message(f"valid | step {record['step']}  {_valid_shown(record, self.terms)}")

    def message(self, text: str) -> None:
        if self._bar is None:                   # before the bar opens (a resume note)
            print(text, flush=True)
        else:
            self._bar.console.print(text, highlight=False, markup=False)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


class LineView:
    """One complete line per log interval, validation and note on stdout: ``plain`` text or ``json`` objects
    (a log file, a pipe); stdout is looked up at each line, where the bar would have drawn."""

    def __init__(self, log_format: str, terms: tuple[str, ...]):
        self.json, self.terms = log_format == "json", terms

    def start(self, step: int) -> None: ...

    def train(self, record: dict, clock: Clock) -> None:
        step = record["step"]
        fields = clock.fields(step)
        if self.json:
            return self._print(json_line({**record, **fields}))
        terms = "".join(f"  {t} {fmt_number(record[t])}" for t in self.terms if t in record)
        self._print(f"train | step {step}/{fields['max_steps']}  loss {fmt_number(record['loss'])}{terms}  "
                    f"tok/s {record['tokens_per_s']:.0f}  lr {record['lr']:.3g}  "
                    f"elapsed {duration(fields['elapsed_s'])}  eta {duration(fields['eta_s'])}")

    def valid(self, record: dict, clock: Clock) -> None:
        step = record["step"]
        fields = clock.fields(step)
        if self.json:
            return self._print(json_line({**record, **fields}))
        self._print(f"valid | step {step}/{fields['max_steps']}  {_valid_shown(record, self.terms)}  "
                    f"elapsed {duration(fields['elapsed_s'])}  eta {duration(fields['eta_s'])}")

    def message(self, text: str) -> None:
        self._print(json_line({"kind": "message", "text": text}) if self.json else text)

    @staticmethod
    def _print(line: str) -> None:
        print(line, file=sys.stdout, flush=True)

    def close(self) -> None: ...

    def files(self) -> list[Path]:
        """The files this reporter wrote in the run's folder (none here)."""
        return []


class MainReporter(Reporter):
    """Rank 0: ``metrics.jsonl``, TensorBoard and (when ``show``) the progress in ``log_format``: ``rich`` (a live
    bar), ``plain`` (one line per log interval / validation) or ``json`` (the same as JSON objects)."""

    def __init__(self, save_dir: Path, max_steps: int, show: bool = True, terms: tuple[str, ...] = (),
                 log_format: str = "rich", max_minutes: float | None = None):
        self.save_dir, self.max_steps, self.terms = Path(save_dir), max_steps, tuple(terms)
        self.clock = Clock(max_steps, max_minutes)
        self._jsonl = open(self.save_dir / "metrics.jsonl", "a", encoding="utf-8")
        board = self.save_dir / "tensorboard"
        there = set(os.listdir(board)) if board.is_dir() else set()
        self._tb = _tensorboard(board)
        # exactly the event file this writer opened (the run's manifest lists it; a user's file there stays foreign)
        self._tb_files = [board / n for n in os.listdir(board) if n not in there] if self._tb and board.is_dir() else []
        self._view = None
        if show:
            self._view = RichView(max_steps, self.terms) if log_format == "rich" else LineView(log_format, self.terms)

    def start(self, step: int, elapsed: float = 0.0) -> None:
        """Start the clock (and open the live bar) at ``step`` of ``max_steps``, ``elapsed`` seconds in."""
        self.clock.start(step, elapsed)
        if self._view is not None:
            self._view.start(step)

    def _write(self, record: dict, durable: bool = False) -> None:
        self._jsonl.write(json.dumps(record, allow_nan=True) + "\n")
        self._jsonl.flush()
        if durable:                         # on disk before the checkpoints that follow it
            os.fsync(self._jsonl.fileno())
        if self._tb is not None:
            for key, value in record.items():
                if isinstance(value, (int, float)) and key != "step":
                    self._tb.add_scalar(f"{record['kind']}/{key}", value, record["step"])

    def train(self, record: dict) -> None:
        """A periodic training log line (averages over the last ``log_every`` updates)."""
        self._write(record)
        if self._view is not None:
            self._view.train(record, self.clock)

    def valid(self, record: dict) -> None:
        """A validation result (on disk when this returns), also shown as one line."""
        self._write(record, durable=True)
        if self._view is not None:
            self._view.valid(record, self.clock)

    def message(self, text: str) -> None:
        """A note (resumed, stopped, averaged): above the bar, or one line (nothing when progress is off)."""
        if self._view is not None:
            self._view.message(text)

    def record_message(self, step: int, text: str, **fields) -> None:
        """A note that belongs to the run's record (a recipe change accepted on resume): a ``message`` row in
        metrics.jsonl, and shown as :meth:`message` is."""
        self._write({"step": step, "kind": "message", "text": text, **fields}, durable=True)
        self.message(text)

    def files(self) -> list[Path]:
        """``metrics.jsonl`` and this sitting's TensorBoard event file, flushed: what the run's manifest lists."""
        if self._tb is not None and not self._jsonl.closed:
            self._tb.flush()
        return [self.save_dir / "metrics.jsonl", *self._tb_files]

    def close(self) -> None:
        """Stop the bar and close the files."""
        if self._view is not None:
            self._view.close()
        self._jsonl.close()
        if self._tb is not None:
            self._tb.close()


def make_reporter(is_main: bool, save_dir: Path, train_cfg, show: bool, start_step: int,
                  terms: tuple[str, ...] = (), log_format: str | None = None) -> Reporter:
    """Rank 0 gets a :class:`MainReporter` (after trimming metrics past ``start_step``), others a no-op;
    ``train_cfg``: the recipe's ``train`` section (the update budget); ``terms``: the family's loss terms, shown
    on the progress line and each validation line; ``log_format``: plain, rich or json (None: rich when stdout is
    a terminal, else plain)."""
    if not is_main:
        return Reporter()
    truncate_metrics(Path(save_dir) / "metrics.jsonl", start_step)
    return MainReporter(save_dir, train_cfg.max_steps, show, terms, resolve_log_format(log_format, sys.stdout),
                        train_cfg.max_minutes)
