"""Training progress on rank 0: a ``rich`` live bar, JSON-lines metrics, optional TensorBoard.

``metrics.jsonl`` in the save directory always receives one JSON object per
log line (``{"step", "kind": "train"|"valid", ...}``); when resuming, lines
past the resumed step (written by the interrupted run after its last
checkpoint) are dropped first so the file reads like one uninterrupted run.
Other ranks get a reporter that does nothing.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

#: validation fields printed above the bar before the family's loss terms (all of them go to metrics.jsonl)
_VALID_SHOWN = ("discounted_loss", "window_loss", "current_loss")


def truncate_metrics(path: Path, last_step: int) -> None:
    """Drop metric lines with ``step > last_step`` (they belong to work a resume will redo)."""
    if not path.is_file():
        return
    kept = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            if json.loads(line).get("step", 0) <= last_step:
                kept.append(line)
        except (json.JSONDecodeError, AttributeError):
            continue                        # a line cut short by a kill -9
    path.write_text("".join(k + "\n" for k in kept), encoding="utf-8")


def _tensorboard(log_dir: Path):
    """A SummaryWriter when TensorBoard is installed, else None (it is an optional extra)."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except Exception:  # noqa: BLE001 - ImportError, or tensorboard's own import-time errors
        return None
    return SummaryWriter(log_dir=str(log_dir))


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}" if math.isfinite(value) else str(value)
    return str(value)


class Reporter:
    """Where training reports go; this base class (used on ranks > 0) drops everything."""

    def start(self, step: int) -> None: ...
    def train(self, record: dict) -> None: ...
    def valid(self, record: dict) -> None: ...
    def message(self, text: str) -> None: ...
    def close(self) -> None: ...


class MainReporter(Reporter):
    """Rank 0: rich bar (when ``show``), ``metrics.jsonl`` and TensorBoard."""

    def __init__(self, save_dir: Path, max_steps: int, show: bool = True, terms: tuple[str, ...] = ()):
        self.save_dir, self.max_steps, self.show, self.terms = Path(save_dir), max_steps, show, tuple(terms)
        self._jsonl = open(self.save_dir / "metrics.jsonl", "a", encoding="utf-8")
        self._tb = _tensorboard(self.save_dir / "tensorboard")
        self._bar, self._task = None, None

    def start(self, step: int) -> None:
        """Open the live bar at ``step`` of ``max_steps``."""
        if not self.show:
            return
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self._bar = Progress(
            TextColumn("[bold]train"), BarColumn(), MofNCompleteColumn(),
            TextColumn("loss {task.fields[loss]}{task.fields[terms]}  {task.fields[tps]} tok/s  lr {task.fields[lr]}"),
            TimeRemainingColumn(),
        )
        self._bar.start()
        self._task = self._bar.add_task("train", total=self.max_steps, completed=step, loss="-", terms="", tps="-",
                                        lr="-")

    def _write(self, record: dict) -> None:
        self._jsonl.write(json.dumps(record, allow_nan=True) + "\n")
        self._jsonl.flush()
        if self._tb is not None:
            for key, value in record.items():
                if isinstance(value, (int, float)) and key != "step":
                    self._tb.add_scalar(f"{record['kind']}/{key}", value, record["step"])

    def train(self, record: dict) -> None:
        """A periodic training log line (averages over the last ``log_every`` updates)."""
        self._write(record)
        if self._bar is not None:
            terms = "".join(f"  {t} {_fmt(record[t])}" for t in self.terms if t in record)
            self._bar.update(self._task, completed=record["step"], loss=_fmt(record["loss"]), terms=terms,
                             tps=f"{record['tokens_per_s']:.0f}", lr=f"{record['lr']:.3g}")

    def valid(self, record: dict) -> None:
        """A validation result, also printed as one line."""
        self._write(record)
        keys = _VALID_SHOWN + self.terms + ("best", "bad_validations")
        shown = "  ".join(f"{k.removesuffix('_loss')} {_fmt(record[k])}" for k in keys if k in record)
        self.message(f"valid | step {record['step']}  {shown}")

    def message(self, text: str) -> None:
        """A line above the bar (or on stdout when the bar is off but progress is shown)."""
        if self._bar is not None:
            self._bar.console.print(text, highlight=False, markup=False)
        elif self.show:
            print(text, flush=True)

    def close(self) -> None:
        """Stop the bar and close the files."""
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
        self._jsonl.close()
        if self._tb is not None:
            self._tb.close()


def make_reporter(is_main: bool, save_dir: Path, max_steps: int, show: bool, start_step: int,
                  terms: tuple[str, ...] = ()) -> Reporter:
    """Rank 0 gets a :class:`MainReporter` (after trimming metrics past ``start_step``), others a no-op;
    ``terms``: the family's loss terms, shown on the progress line and each validation line."""
    if not is_main:
        return Reporter()
    truncate_metrics(Path(save_dir) / "metrics.jsonl", start_step)
    return MainReporter(save_dir, max_steps, show, terms)
