"""Figures as PNG files: pure drawing; the numbers come from the analysis and evaluation modules that call it.

It sits below both ``evaluate`` and ``analysis`` (each imports it; it imports neither), so drawing never makes
the two depend on each other.

matplotlib is an optional dependency (``pip install 'ctxmt[plot]'``) that only the drawing commands need:
it is imported inside :func:`require_matplotlib`, never at module level, and figures are drawn on the Agg
canvas directly (no pyplot, so no global backend or figure registry is touched). Each drawing function
writes one PNG and returns the :class:`matplotlib.figure.Figure` it drew, so callers and tests can inspect
what is on it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.outputs import atomic_path

INSTALL_HINT = "pip install 'ctxmt[plot]' (or pip install matplotlib)"
#: token labels are written on an axis only up to this many tokens (beyond, they would overlap)
MAX_LABELS = 48
#: line styles of the two row kinds of training curves
KIND_STYLE = {"train": {"linestyle": "-"}, "valid": {"linestyle": "--", "marker": "o", "markersize": 3}}


def require_matplotlib():
    """matplotlib's ``Figure`` class on the Agg canvas; one line saying how to install it when missing.

    Commands that draw call it before any work, so a missing matplotlib is reported at once.
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise CtxmtError(f"matplotlib is not installed and this command draws figures; {INSTALL_HINT}") from None

    def new_figure(**kwargs):
        fig = Figure(**kwargs)
        FigureCanvasAgg(fig)                                    # Agg: rasterises to PNG without a display
        return fig
    return new_figure


def _save(fig, path: Path, dpi: int = 110):
    """Write ``fig`` to ``path`` atomically (a failure leaves no empty or partial PNG to block a retry)."""
    path = Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=dpi, bbox_inches="tight", format=path.suffix.lstrip(".") or "png")
    return fig


def _grid(n: int, max_cols: int) -> tuple[int, int]:
    """(rows, cols) of a grid holding ``n`` panels, at most ``max_cols`` wide."""
    cols = max(1, min(n, max_cols))
    return math.ceil(n / cols), cols


def _matrix(values, name: str) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    if array.ndim != 2 or 0 in array.shape:
        raise ValueError(f"{name} must be a non-empty 2-D array, got shape {array.shape}")
    return array


def _tick_labels(ax, axis: str, labels: Sequence[str] | None, size: int) -> None:
    """Token labels on one axis when given and at most :data:`MAX_LABELS`; plain indices otherwise."""
    if labels is None or len(labels) > MAX_LABELS:
        return
    if len(labels) != size:
        raise ValueError(f"{len(labels)} {axis} labels for {size} positions")
    fontsize = 7 if size <= 24 else 5
    if axis == "x":
        ax.set_xticks(range(size), labels=list(labels), rotation=90, fontsize=fontsize)
    else:
        ax.set_yticks(range(size), labels=list(labels), fontsize=fontsize)


def attention_maps(maps: Sequence, query_breaks: Sequence[int], key_breaks: Sequence[int], title: str,
                   path: Path, query_labels: Sequence[str] | None = None,
                   key_labels: Sequence[str] | None = None):
    """One heat map per layer (queries × keys, attention already averaged over heads), in a grid.

    ``query_breaks`` / ``key_breaks``: the indices where a new sentence starts on each axis; a line is drawn
    before each. Token labels are written when given and not more than :data:`MAX_LABELS`. All panels share
    one colour scale from 0 to the largest weight, so layers compare directly.
    """
    new_figure = require_matplotlib()
    arrays = [_matrix(m, f"attention map {i + 1}") for i, m in enumerate(maps)]
    if not arrays:
        raise ValueError("attention_maps needs at least one layer")
    shape = arrays[0].shape                                     # (queries, keys)
    if any(a.shape != shape for a in arrays):
        raise ValueError(f"every layer's map must have the same shape, got {[a.shape for a in arrays]}")
    for name, breaks, size in (("query", query_breaks, shape[0]), ("key", key_breaks, shape[1])):
        if any(not 0 <= b <= size for b in breaks):
            raise ValueError(f"{name} breaks {list(breaks)} fall outside 0..{size}")
    rows, cols = _grid(len(arrays), 3)
    side = 3.2 if max(shape) <= MAX_LABELS else 2.6
    fig = new_figure(figsize=(side * cols + 1.0, side * rows + 0.6), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False)
    top = max(float(np.nanmax(a)) for a in arrays) or 1.0
    for i, ax in enumerate(axes.flat):
        if i >= len(arrays):
            ax.set_axis_off()
            continue
        image = ax.imshow(arrays[i], cmap="viridis", vmin=0.0, vmax=top, aspect="auto", interpolation="nearest")
        for b in query_breaks:
            ax.axhline(b - 0.5, color="white", linewidth=1.0)
        for b in key_breaks:
            ax.axvline(b - 0.5, color="white", linewidth=1.0)
        _tick_labels(ax, "x", key_labels, shape[1])
        _tick_labels(ax, "y", query_labels, shape[0])
        ax.set_title(f"layer {i + 1}", fontsize=9)
        ax.set_xlabel("key", fontsize=8)
        ax.set_ylabel("query", fontsize=8)
    fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.8, label="attention weight")
    fig.suptitle(title, fontsize=10)
    return _save(fig, path)


def _annotate(ax, matrix: np.ndarray, fmt: str) -> None:
    """Write each cell's value (``fmt``; NaN as "n/a") in a colour that stays readable on the cell."""
    finite = matrix[np.isfinite(matrix)]
    low, high = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    for (r, c), value in np.ndenumerate(matrix):
        if math.isfinite(value):
            share = (value - low) / (high - low) if high > low else 0.5
            text, colour = format(value, fmt), "black" if share > 0.6 else "white"
        else:
            text, colour = "n/a", "black"
        ax.text(c, r, text, ha="center", va="center", fontsize=6, color=colour)


def layer_head_grid(values: dict, title: str, path: Path, fmt: str = ".2f"):
    """One heat map per attention kind (layers × heads), each cell annotated with its value (``fmt``).

    ``values``: kind -> 2-D array (layers, heads), e.g. the entropy or the current-sentence share of every
    head over a split. Each panel has its own colour scale (kinds differ in key counts, hence in entropy).
    """
    new_figure = require_matplotlib()
    if not values:
        raise ValueError("layer_head_grid needs at least one attention kind")
    matrices = {kind: _matrix(v, f"values of {kind}") for kind, v in values.items()}
    rows, cols = _grid(len(matrices), 2)
    fig = new_figure(figsize=(4.4 * cols, 3.2 * rows + 0.5), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax, (kind, matrix) in zip(axes.flat, matrices.items(), strict=False):
        layers, heads = matrix.shape
        image = ax.imshow(matrix, cmap="magma", aspect="auto", interpolation="nearest")
        _annotate(ax, matrix, fmt)
        ax.set_xticks(range(heads), labels=[str(h + 1) for h in range(heads)], fontsize=7)
        ax.set_yticks(range(layers), labels=[str(layer + 1) for layer in range(layers)], fontsize=7)
        ax.set_xlabel("head", fontsize=8)
        ax.set_ylabel("layer", fontsize=8)
        ax.set_title(kind, fontsize=9)
        fig.colorbar(image, ax=ax, shrink=0.9)
    for ax in list(axes.flat)[len(matrices):]:
        ax.set_axis_off()
    fig.suptitle(title, fontsize=10)
    return _save(fig, path)


def assignment_map(weights, tokens: Sequence[str], title: str, path: Path):
    """Latent Grouping / Selecting assignment weights of one sentence as a heat map.

    ``weights``: (tokens, groups), the categorisation c_{i,k} of token i to group k (sequence-shortening
    paper, eq. 3: softmax or sparsemax over groups for Grouping, over tokens for Selecting). Drawn as in its
    Figures 3, 5 and 6: the sentence's tokens along the x axis (labelled when at most :data:`MAX_LABELS`), one
    row per group, the colour scale from 0 to the largest weight.
    """
    new_figure = require_matplotlib()
    matrix = _matrix(weights, "assignment weights")                 # (tokens, groups)
    if len(tokens) != matrix.shape[0]:
        raise ValueError(f"{len(tokens)} tokens for {matrix.shape[0]} rows of weights")
    n_tokens, n_groups = matrix.shape
    fig = new_figure(figsize=(min(max(0.28 * n_tokens, 4.0), 16.0) + 1.2, 0.3 * n_groups + 1.6),
                     layout="constrained")
    ax = fig.subplots()
    top = float(np.nanmax(matrix)) or 1.0
    image = ax.imshow(matrix.T, cmap="Blues", vmin=0.0, vmax=top, aspect="auto", interpolation="nearest")
    _tick_labels(ax, "x", list(tokens), n_tokens)
    ax.set_yticks(range(n_groups), labels=[str(k + 1) for k in range(n_groups)], fontsize=7)
    ax.set_ylabel("group", fontsize=8)
    ax.set_title(title, fontsize=10)
    fig.colorbar(image, ax=ax, shrink=0.9, label="weight")
    return _save(fig, path)


def selection_maps(maps: Sequence, titles: Sequence[str], absent: Sequence, dropped, breaks: Sequence[int],
                   labels: Sequence[str] | None, title: str, path: Path, note: str | None = None):
    """Self-attention maps of one window side by side (queries × keys, averaged over heads) with the tokens a
    context selection dropped marked (Yang et al., Figure 6).

    ``absent``: per map, (S,) bool, tokens already dropped at that layer's input: their rows and columns are blank
    (NaN in the map) and hatched. ``dropped`` (S,) bool: tokens the selection drops by the end: grey tick labels
    and a red x above each panel (shown even when the labels are not). One colour scale for every panel.
    """
    new_figure = require_matplotlib()
    arrays = [_matrix(m, f"attention map {i + 1}") for i, m in enumerate(maps)]
    size = arrays[0].shape[0] if arrays else 0
    if not arrays or any(a.shape != (size, size) for a in arrays) or len(titles) != len(arrays) \
            or len(absent) != len(arrays):
        raise ValueError("selection_maps needs square maps of one size, one title and one absent mask per map")
    dropped = np.asarray(dropped, dtype=bool)
    finite = [a[np.isfinite(a)] for a in arrays]
    top = max((float(f.max()) for f in finite if f.size), default=1.0) or 1.0
    side = 4.2 if size <= MAX_LABELS else 3.4
    fig = new_figure(figsize=(side * len(arrays) + 1.0, side + (1.0 if note else 0.6)), layout="constrained")
    axes = fig.subplots(1, len(arrays), squeeze=False)[0]
    for ax, array, gone, name in zip(axes, arrays, absent, titles, strict=True):
        image = _selection_panel(ax, array, np.asarray(gone, dtype=bool), name, top=top, breaks=breaks, labels=labels,
                                 dropped=dropped)
    fig.colorbar(image, ax=list(axes), shrink=0.8, label="attention weight")
    fig.suptitle(title, fontsize=10)
    if note:
        fig.text(0.01, -0.02, note, fontsize=6, wrap=True, va="top")
    return _save(fig, path)



def _selection_panel(ax, array: np.ndarray, gone: np.ndarray, name: str, *, top: float, breaks: Sequence[int],
                     labels: Sequence[str] | None, dropped: np.ndarray):
    """One map of :func:`selection_maps` on ``ax``: tokens ``gone`` at its input hatched, sentence breaks as
    white lines, the tokens ``dropped`` by the end greyed and marked with a red x; returns the image."""
    size = array.shape[0]
    image = ax.imshow(np.ma.masked_invalid(array), cmap="viridis", vmin=0.0, vmax=top, aspect="auto",
                      interpolation="nearest")
    for k in np.flatnonzero(gone):                                       # no attention to or from them
        for span in (ax.axvspan, ax.axhspan):
            span(k - 0.5, k + 0.5, facecolor="none", edgecolor="0.55", hatch="///", linewidth=0)
    for b in breaks:
        ax.axhline(b - 0.5, color="white", linewidth=1.0)
        ax.axvline(b - 0.5, color="white", linewidth=1.0)
    _tick_labels(ax, "x", labels, size)
    _tick_labels(ax, "y", labels, size)
    for ticks in (ax.get_xticklabels(), ax.get_yticklabels()):
        for k, text in enumerate(ticks):
            if k < size and dropped[k]:
                text.set_color("0.65")
    ax.scatter(np.flatnonzero(dropped), np.full(int(dropped.sum()), -1.0), marker="x", color="red", s=14,
               clip_on=False)
    ax.set_xlim(-0.5, size - 0.5)
    ax.set_ylim(size - 0.5, -0.5)
    ax.set_title(name, fontsize=9, pad=12)
    ax.set_xlabel("key", fontsize=8)
    ax.set_ylabel("query", fontsize=8)
    return image

def kept_share_chart(series: dict, title: str, path: Path, note: str | None = None):
    """The share of context tokens kept (%) against the selection layer, one line per context side (Yang et al.,
    Figure 4). ``series``: side -> (1-based encoder layers, shares in [0, 1], None where nothing was counted)."""
    new_figure = require_matplotlib()
    if not series:
        raise ValueError("kept_share_chart needs at least one series")
    fig = new_figure(figsize=(5.2, 4.0 if note else 3.6), layout="constrained")
    ax = fig.subplots()
    for i, (label, (layers, shares)) in enumerate(series.items()):
        if len(layers) != len(shares):
            raise ValueError(f"series {label!r} has {len(shares)} shares for {len(layers)} layers")
        values = np.asarray([np.nan if s is None else 100.0 * s for s in shares], dtype=float)
        ax.plot(layers, values, marker="o", color=f"C{i % 10}", label=str(label))
        for x, v in zip(layers, values, strict=True):
            if math.isfinite(v):
                ax.annotate(f"{v:.1f}", (x, v), ha="center", va="bottom", fontsize=7, xytext=(0, 3),
                            textcoords="offset points")
    ax.set_xticks(sorted({int(n) for layers, _ in series.values() for n in layers}))
    ax.set_ylim(0.0, 108.0)
    return _finish_lines(fig, ax, "selection layer (encoder layer)", "kept context tokens (%)", title, note, path, 8)



def _finish_lines(fig, ax, xlabel: str, ylabel: str, title: str, note: str | None, path: Path, legend: int):
    """Axis labels, title, grid, legend (font size ``legend``) and an optional footnote; saves the figure."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=legend)
    if note:
        fig.text(0.01, -0.02, note, fontsize=6, wrap=True, va="top")
    return _save(fig, path)

def bar_chart(categories: Sequence[str], series: dict, title: str, path: Path, ylabel: str,
              xlabel: str | None = None, fmt: str | None = ".1f"):
    """Grouped bars: one group per category along the x axis, one bar per series in each group (legend).

    ``series``: label -> one value per category (NaN: no bar). E.g. BLEU per test window size, a series per
    system (Lupo et al. 2022, Figure 4), or a kept ratio per layer. ``fmt`` writes each value above its bar
    (``None``: no labels).
    """
    new_figure = require_matplotlib()
    if not categories or not series:
        raise ValueError("bar_chart needs at least one category and one series")
    for label, values in series.items():
        if len(values) != len(categories):
            raise ValueError(f"series {label!r} has {len(values)} values for {len(categories)} categories")
    fig = new_figure(figsize=(max(4.0, 0.9 * len(categories) * max(1, len(series)) ** 0.5 + 2.0), 3.6),
                     layout="constrained")
    ax = fig.subplots()
    width = 0.8 / len(series)
    centres = np.arange(len(categories), dtype=float)
    for i, (label, values) in enumerate(series.items()):
        heights = np.asarray(values, dtype=float)
        bars = ax.bar(centres - 0.4 + width * (i + 0.5), np.nan_to_num(heights, nan=0.0), width, label=str(label))
        for bar, value in zip(bars, heights, strict=True):
            if not math.isfinite(value):
                bar.set_visible(False)                              # a missing value: no bar, not a zero
            elif fmt is not None:
                ax.annotate(format(value, fmt), (bar.get_x() + bar.get_width() / 2, value), ha="center",
                            va="bottom", fontsize=6, xytext=(0, 1), textcoords="offset points")
    ax.set_xticks(centres, labels=[str(c) for c in categories])
    ax.set_ylabel(ylabel)
    if xlabel:
        ax.set_xlabel(xlabel)
    ax.set_title(title, fontsize=10)
    if len(series) > 1:
        ax.legend(fontsize=7)
    return _save(fig, path)


def line_chart(lines: dict, title: str, ylabel: str, path: Path, note: str | None = None):
    """Curves against the update step: ``lines`` maps a run label to {row kind: (steps, values)}.

    One colour per run; train rows as solid lines, valid rows dashed with markers. ``note`` is printed
    under the axes (the quantity's definition).
    """
    new_figure = require_matplotlib()
    fig = new_figure(figsize=(6.4, 4.2 if note else 3.8), layout="constrained")
    ax = fig.subplots()
    for i, (run, kinds) in enumerate(lines.items()):
        colour = f"C{i % 10}"
        for kind, (steps, values) in kinds.items():
            ax.plot(steps, values, color=colour, label=f"{run} ({kind})", linewidth=1.2,
                    **KIND_STYLE.get(kind, {}))
    return _finish_lines(fig, ax, "update step", ylabel, title, note, path, 7)

