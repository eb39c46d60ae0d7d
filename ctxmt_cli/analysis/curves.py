"""Training curves from ``metrics.jsonl``: which logged fields give which curve, with its definition.

A run directory (``train.save_dir``) holds one JSON object per log line (:mod:`ctxmt_cli.train.progress`):
``kind: "train"`` rows average the updates since the previous one, ``kind: "valid"`` rows cover the whole
valid split. Both carry per-token means of the label-smoothed loss and the token counts behind them
(:meth:`ctxmt_cli.train.losses.LossLayout.metrics`), so the loss on the *context* sentences follows exactly
from the window and current means without being logged:

    context = (window_loss · tokens − current_loss · current_tokens) / (tokens − current_tokens)

Lupo et al. 2022 (§4.5.1, Figure 3) plot the current loss and the ratio of the current loss to "the average
loss-per-sentence calculated on the context sentences belonging to the same sliding window". The log holds
token sums and counts, not sentence counts, so both sides here are per-token means over the same windows:
``current / context``, each the mean label-smoothed loss per target token of its sentences. This module reads
and selects; :mod:`ctxmt_cli.figures` draws. It imports nothing heavy.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ctxmt_cli.errors import CtxmtError, option

log = logging.getLogger(__name__)

#: (steps, values) of one line
Line = tuple[list[int], list[float]]
#: fields that are bookkeeping, not curves (counts behind the means, the best-so-far value)
BOOKKEEPING = frozenset({"step", "kind", "epoch", "tokens", "current_tokens", "best", "bad_validations"})
KINDS = ("train", "valid")


def _context_loss(row: dict) -> float | None:
    """Mean loss per target token of the context sentences (the concat family logs it as its
    ``context_loss`` term; otherwise it follows from the window and current sums)."""
    if isinstance(row.get("context_loss"), (int, float)):
        return float(row["context_loss"])
    try:
        tokens, current = float(row["tokens"]), float(row["current_tokens"])
        window, current_loss = float(row["window_loss"]), float(row["current_loss"])
    except (KeyError, TypeError, ValueError):
        return None
    if tokens - current <= 0:                                   # a sentence-level model: no context tokens
        return None
    return (window * tokens - current_loss * current) / (tokens - current)


def _ratio(row: dict) -> float | None:
    context, current = _context_loss(row), row.get("current_loss")
    if context is None or not isinstance(current, (int, float)) or not context > 0:
        return None
    return float(current) / context


def _field(name: str) -> Callable[[dict], float | None]:
    def get(row: dict) -> float | None:
        value = row.get(name)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    return get


@dataclass(frozen=True)
class Spec:
    """How one curve is read: a value per row kind, its axis label and its exact definition."""

    name: str
    label: str
    definition: str
    readers: dict[str, Callable[[dict], float | None]]


#: the curves every family has, in the order they are drawn; other numeric fields follow as named terms
CORE: tuple[Spec, ...] = (
    Spec("objective", "objective (per token)",
         "the objective the optimiser minimises per token: the window loss, context-discounted for concat with "
         "CD < 1 (Lupo et al. 2022, eq. 2); train: field loss, valid: field discounted_loss",
         {"train": _field("loss"), "valid": _field("discounted_loss")}),
    Spec("window_loss", "window loss (nats / token)",
         "mean label-smoothed loss per target token of the whole window (field window_loss)",
         {k: _field("window_loss") for k in KINDS}),
    Spec("current_loss", "current loss (nats / token)",
         "mean label-smoothed loss per target token of the current (last) sentence, its </s> included "
         "(field current_loss; Lupo et al. 2022, Figure 3 left)",
         {k: _field("current_loss") for k in KINDS}),
    Spec("context_loss", "context loss (nats / token)",
         "mean label-smoothed loss per target token of the context sentences of the same windows (their <brk> "
         "included): (window_loss*tokens - current_loss*current_tokens) / (tokens - current_tokens)",
         {k: _context_loss for k in KINDS}),
    Spec("current_context_ratio", "current / context loss",
         "current_loss / context_loss, both per-token means over the same windows (Lupo et al. 2022, Figure 3 "
         "right, with per-token rather than per-sentence means: the log holds no sentence counts)",
         {k: _ratio for k in KINDS}),
    Spec("lr", "learning rate", "learning rate of the last update before each train row (field lr)",
         {"train": _field("lr")}),
    Spec("tokens_per_s", "target tokens / s",
         "target tokens per second of wall time since the previous train row, all workers (field tokens_per_s)",
         {"train": _field("tokens_per_s")}),
    Spec("grad_norm", "gradient norm", "mean gradient norm before clipping since the previous train row "
         "(field grad_norm)", {"train": _field("grad_norm")}),
    Spec("skipped_updates", "skipped updates", "fp16: updates the grad scaler skipped so far, cumulative "
         "(field skipped_updates)", {"train": _field("skipped_updates")}),
)
#: logged fields the core curves already read (so they are not drawn again as named terms)
_READ = frozenset({"loss", "discounted_loss", "window_loss", "current_loss", "context_loss", "lr",
                   "tokens_per_s", "grad_norm", "skipped_updates"})


@dataclass
class Quantity:
    """One figure: a curve per run and row kind (train / valid) against the update step."""

    name: str
    label: str
    definition: str
    lines: dict[str, dict[str, Line]] = field(default_factory=dict)     # run label -> kind -> (steps, values)

    @property
    def file_name(self) -> str:
        """The PNG's file name: the quantity's name with anything unusual replaced."""
        return re.sub(r"[^A-Za-z0-9_.-]", "_", self.name) + ".png"


def read_metrics(run_dir: Path) -> list[dict]:
    """The metric rows of a run directory, sorted by step (stable). One line of error when the directory or
    its ``metrics.jsonl`` is missing, is not UTF-8, a line other than the last is not a metric row (a JSON object
    with an integer ``step`` and ``kind`` train or valid), or no row is. The last line, when it is not one, is
    skipped with a warning: a run killed while writing it leaves it cut short, and the rows before it still plot."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        problem = "is a file, not a directory" if run_dir.exists() else "not found"
        raise CtxmtError(f"run directory {run_dir} {problem}; give the directory ctxmt train wrote (train.save_dir)")
    path = run_dir / "metrics.jsonl"
    if not path.is_file():
        raise CtxmtError(f"no metrics.jsonl in {run_dir}; give the directory ctxmt train wrote (train.save_dir)")
    data = path.read_bytes()
    try:
        lines = data.decode("utf-8").split("\n")
    except UnicodeDecodeError as err:
        number = data.count(b"\n", 0, err.start) + 1
        raise CtxmtError(f"{path}, line {number}: not UTF-8 text; give the "
                         "metrics.jsonl ctxmt train wrote (or remove that line)") from None
    numbered = [(number, line) for number, line in enumerate(lines, 1) if line.strip()]
    rows = []
    for number, line in numbered:
        problem = _row_problem(line)
        if problem is None:
            rows.append(json.loads(line))
        elif number == numbered[-1][0]:                       # cut short by a kill: the run's last line
            log.warning(f"{path}, line {number} (the last): {problem}, skipped (a run killed while writing it "
                        "leaves it cut short)")
        else:
            raise CtxmtError(f"{path}, line {number}: {problem}; remove or repair that line")
    if not rows:
        raise CtxmtError(f"{path} holds no metric rows (step, kind train|valid); train the model first")
    return sorted(rows, key=lambda r: r["step"])


def _row_problem(line: str) -> str | None:
    """Why a line of metrics.jsonl is not a metric row; None when it is one."""
    try:
        row = json.loads(line)
    except (json.JSONDecodeError, RecursionError):
        return "not a JSON object"
    if not isinstance(row, dict):
        return f"a JSON {type(row).__name__}, not an object"
    step = row.get("step")
    if not isinstance(step, int) or isinstance(step, bool):
        return f"no integer 'step' (got {json.dumps(step)[:40]})"
    if row.get("kind") not in KINDS:
        return f"'kind' is {json.dumps(row.get('kind'))[:40]}, not one of {', '.join(KINDS)}"
    return None


def run_labels(run_dirs: list[Path]) -> list[str]:
    """A label per run: the directory's name, with as many parent names as it takes to tell runs apart."""
    parts = [Path(d).resolve().parts for d in run_dirs]
    distinct = set(parts)
    depth = 1
    while len({p[-depth:] for p in distinct}) < len(distinct):
        depth += 1
    labels = ["/".join(p[-depth:]) for p in parts]
    if len(set(labels)) < len(labels):                          # the same directory given twice: number them
        labels = [f"{label} ({i + 1})" for i, label in enumerate(labels)]
    return labels


def _line(rows: list[dict], kind: str, read: Callable[[dict], float | None]) -> Line | None:
    """(steps, values) of the rows of ``kind`` where ``read`` gives a value; None without a finite one."""
    points = [(r["step"], read(r)) for r in rows if r["kind"] == kind]
    points = [(s, v) for s, v in points if v is not None]
    if not any(math.isfinite(v) for _, v in points):
        return None
    return [s for s, _ in points], [v for _, v in points]


def _term_specs(runs: dict[str, list[dict]]) -> list[Spec]:
    """A curve per other numeric field (the family's named loss terms), in order of first appearance."""
    names: dict[str, None] = {}
    for rows in runs.values():
        for row in rows:
            for key, value in row.items():
                if (key not in BOOKKEEPING and key not in _READ and isinstance(value, (int, float))
                        and not isinstance(value, bool)):
                    names.setdefault(key, None)
    return [Spec(name, name, f"field {name} as the family logs it (a loss term: its sum / count over the row)",
                 {k: _field(name) for k in KINDS}) for name in names]


def select(runs: dict[str, list[dict]]) -> list[Quantity]:
    """The quantities to draw for ``runs`` (run label -> rows): each core curve and each named term that has a
    finite value in some run; within a quantity, one line per run and row kind that has one."""
    quantities = []
    for spec in CORE + tuple(_term_specs(runs)):
        q = Quantity(spec.name, spec.label, spec.definition)
        for label, rows in runs.items():
            lines = {kind: line for kind, read in spec.readers.items()
                     if (line := _line(rows, kind, read)) is not None}
            if lines:
                q.lines[label] = lines
        if q.lines:
            quantities.append(q)
    return quantities


def plot_runs(run_dirs: list[Path], out: Path | None = None, force: bool = False) -> list[Path]:
    """``ctxmt plot``: the curves of each run's ``metrics.jsonl`` as PNGs in ``out``, runs overlaid.

    ``out`` defaults to ``plots/`` inside the first run directory. Every file is checked before anything is
    drawn: an existing one is replaced only with ``force`` and when ctxmt drew it (unchanged since); every file
    drawn is recorded in the manifest of ``out`` (or of the run above it). Returns the files written.
    """
    from ctxmt_cli.figures import require_matplotlib
    from ctxmt_cli.ownership import check_files_replaceable, record_in_folder
    from ctxmt_cli.paths import check_output_dir, check_output_file

    if not run_dirs:
        raise CtxmtError("no run directory given; give one or more directories ctxmt train wrote")
    require_matplotlib()
    runs = dict(zip(run_labels(run_dirs), (read_metrics(d) for d in run_dirs), strict=True))
    out = Path(out) if out is not None else Path(run_dirs[0]) / "plots"
    inputs = [Path(d) / "metrics.jsonl" for d in run_dirs]
    check_output_dir(out, option("out"), inputs=inputs)
    paths = [out / quantity.file_name for quantity in select(runs)]
    for path in paths:
        check_output_file(path, "plot", force=None, make_parents=True, inputs=inputs)
    check_files_replaceable(paths, "plot", force)
    written = _draw(runs, out)
    record_in_folder(out, written, command="plot")
    return written


def _draw(runs: dict[str, list[dict]], out_dir: Path) -> list[Path]:
    """One PNG per quantity of :func:`select` in ``out_dir``, runs overlaid; the files written, in drawing order."""
    from ctxmt_cli.figures import line_chart

    written = []
    for quantity in select(runs):
        path = Path(out_dir) / quantity.file_name
        line_chart(quantity.lines, quantity.name.replace("_", " "), quantity.label, path, note=quantity.definition)
        written.append(path)
    return written
