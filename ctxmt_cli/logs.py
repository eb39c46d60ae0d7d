"""How long-running commands report progress: ``--log-format plain|rich|json``.

``rich`` is a live bar for a person at a terminal. A job whose output goes to a file
(a cluster scheduler's log) would keep only the bar's last frame, so when the stream
the bar would use is not a terminal the default is ``plain``: one line per report,
every line complete on its own (``step 250/1000  loss 3.41 ... eta 0:03:06``).
``json`` writes the same fields as one JSON object per line, for tools. This module
imports nothing heavy: the training loop, the first pass, contrastive scoring and
the benchmarks share it.
"""

from __future__ import annotations

import json
import math
import sys
import time
from typing import TextIO

LOG_FORMATS = ("plain", "rich", "json")
#: seconds between two progress lines of a long command (plain and json; the first and the last always print)
REPORT_EVERY = 30.0


def resolve_log_format(requested: str | None, stream: TextIO | None = None) -> str:
    """``requested``, or (None) ``rich`` when ``stream`` (default stdout) is a terminal and ``plain`` otherwise."""
    if requested is not None:
        if requested not in LOG_FORMATS:
            raise ValueError(f"log format {requested!r}; choose one of {', '.join(LOG_FORMATS)}")
        return requested
    stream = sys.stdout if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    try:
        return "rich" if isatty is not None and isatty() else "plain"
    except ValueError:                       # a closed stream
        return "plain"


def duration(seconds: float | None) -> str:
    """``3725.2`` -> ``1:02:05``; None (unknown) -> ``-``."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    whole = int(round(max(seconds, 0.0)))
    return f"{whole // 3600}:{whole % 3600 // 60:02d}:{whole % 60:02d}"


def eta_seconds(done: float, total: float, seconds: float, start: float = 0.0) -> float | None:
    """Time left to reach ``total`` at the rate since ``start`` (``done - start`` units in ``seconds``), or None
    before there is a rate."""
    progressed = done - start
    if progressed <= 0 or seconds <= 0:
        return None
    return max(total - done, 0) * seconds / progressed


def json_value(value):
    """A value JSON can carry: non-finite floats (a NaN loss) become null, so every line parses strictly."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def json_line(record: dict) -> str:
    """``record`` as one JSON line (non-finite floats as null)."""
    return json.dumps({k: json_value(v) for k, v in record.items()}, ensure_ascii=False)


def fmt_number(value) -> str:
    """Four significant digits for a float, as-is otherwise."""
    if isinstance(value, float):
        return f"{value:.4g}" if math.isfinite(value) else str(value)
    return str(value)


class CountLog:
    """Progress of a count toward a total (documents translated, candidate rows scored) in one log format.

    ``update(task, done, total)``: the first call for a task sets its baseline (a resumed run starts past 0),
    later calls report done/total, elapsed and ETA at that rate (``total`` None: not known yet, as for documents
    arriving on stdin; no ETA then). ``message(text)`` prints a note line. ``rich`` draws one bar per task on
    ``stream``; ``plain`` and ``json`` print one line per update that changes the count, or with ``every`` seconds
    at most one per ``every`` seconds (the first, and the last at ``done == total``, always). With ``first`` False
    a task's first line waits until it has run ``every`` seconds, so a task done sooner prints nothing: a short
    command's stderr keeps only its own lines (a warning, the one line of an error) where a pipe or a log file
    reads it, and a long one reports periodically.
    """

    def __init__(self, log_format: str, unit: str, stream: TextIO | None = None, every: float = 0.0,
                 first: bool = True):
        self.format, self.unit, self.stream, self.every = log_format, unit, stream or sys.stderr, every
        self.first = first
        self._tasks: dict[str, tuple[float, float]] = {}                       # task -> (start time, start count)
        self._last: dict[str, tuple[float, int]] = {}                         # task -> time and count of its last line
        self._bar, self._bar_tasks = None, {}

    @classmethod
    def on_stderr(cls, log_format: str | None, unit: str, every: float = 0.0) -> CountLog:
        """A log on stderr, where a command whose stdout carries its result reports progress; ``log_format`` None:
        ``rich`` when stderr is a terminal, ``plain`` otherwise."""
        return cls(resolve_log_format(log_format, sys.stderr), unit, sys.stderr, every)

    @classmethod
    def periodic(cls, log_format: str | None, unit: str) -> CountLog:
        """The progress of a command that may run long (``translate``, ``cxmi``, ``analyze-attention``, ``prepare``,
        ``serve``): on stderr, a bar on a terminal, else a line every :data:`REPORT_EVERY` seconds once a task has
        run that long (a shorter task prints none)."""
        return cls(resolve_log_format(log_format, sys.stderr), unit, sys.stderr, REPORT_EVERY, first=False)

    def message(self, text: str, **fields) -> None:
        """A note between progress lines; ``fields`` go into its JSON object (``json``) beside ``text``."""
        if self.format == "json":
            self._print(json_line({"kind": "message", "text": text, **fields}))
        elif self._bar is not None:
            self._bar.console.print(text, highlight=False, markup=False)
        else:
            self._print(text)

    def update(self, task: str, done: int, total: int | None) -> None:
        """``done`` of ``total`` units of ``task`` (``total`` None: unknown)."""
        now = time.monotonic()
        started, start = self._tasks.setdefault(task, (now, done))
        if self.format == "rich":
            self._rich(task, done, total)
            return
        finished = total is not None and done >= total
        if task in self._last:
            at, shown = self._last[task]
            if done == shown or (not finished and now - at < self.every):      # nothing new, or too soon
                return
        elif not self.first and now - started < self.every:                    # not running long enough yet
            return
        self._last[task] = (now, done)
        elapsed = now - started
        eta = None if total is None else eta_seconds(done, total, elapsed, start)
        if self.format == "json":
            self._print(json_line({"kind": "progress", "task": task, "done": done, "total": total, "unit": self.unit,
                                   "elapsed_s": round(elapsed, 3), "eta_s": None if eta is None else round(eta, 3)}))
        elif total is None:
            self._print(f"{task}: {done} {self.unit}  elapsed {duration(elapsed)}")
        else:
            self._print(f"{task}: {done}/{total} {self.unit}  elapsed {duration(elapsed)}  eta {duration(eta)}")

    def _rich(self, task: str, done: int, total: int | None) -> None:
        if self._bar is None:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self._bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn(self.unit), TimeRemainingColumn(), console=Console(file=self.stream))
            self._bar.start()
        if task not in self._bar_tasks:
            self._bar_tasks[task] = self._bar.add_task(task, total=total, completed=done)
        self._bar.update(self._bar_tasks[task], completed=done, total=total)

    def _print(self, line: str) -> None:
        print(line, file=self.stream, flush=True)

    def close(self) -> None:
        """Stop the bar (if any)."""
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
