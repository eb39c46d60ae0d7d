"""The PNGs of ``analyze-attention``: layer × head grids over a split, and one window's maps.

Numbers come from :mod:`ctxmt_cli.analysis.attention` (the grids) or from one
teacher-forced pass over the shown window with a :class:`~ctxmt_cli.core.probe.Collect`
probe; drawing is :mod:`ctxmt_cli.figures`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ctxmt_cli import figures
from ctxmt_cli.core.probe import Collect

#: which token row labels each side of an attention kind: (queries, keys); None = no tokens (memory, groups)
SIDES = {"encoder_self": ("src", "src"), "decoder_self": ("tgt", "tgt"), "cross": ("tgt", "src"),
         "context": ("tgt", None)}


def draw_grids(result: dict, out: Path) -> list[Path]:
    """Entropy and current-sentence share of every kind as layer × head grids over the split."""
    paths = []
    for stat in ("entropy", "current_share"):
        values = {kind: np.asarray(v[stat], dtype=float) for kind, v in result["by_kind"].items()}
        path = Path(out) / f"{stat}_grid.png"
        figures.layer_head_grid(values, f"{stat.replace('_', ' ')} per layer and head — {result['split']}, "
                                f"{result['sentences']} sentences", path)
        paths.append(path)
    return paths


def draw_all(loaded, dataset, shown: list[tuple[int, int]], result: dict, out: Path) -> list[Path]:
    """Every PNG of one analysis: the grids, the kept shares of a model that selects context tokens, and for each
    shown window (dataset index, number shown) its maps, plus Figure 6's selection maps when the model selects."""
    from ctxmt_cli.analysis.selection import draw_selection

    paths = draw_grids(result, out)
    if "kept_context" in result:
        paths.append(draw_kept(result, out))
    for j, n in shown:
        paths += draw_window(loaded, dataset, j, n, out)
        if loaded.model.between_layers_attention:
            paths.append(draw_selection(loaded, dataset, j, n, out))
    return paths


def draw_kept(result: dict, out: Path) -> Path:
    """``kept_context.png``: the kept share of context tokens against the selection layer, one line per side."""
    kept = result["kept_context"]
    series = {side: (v["layers"], v["share"]) for side, v in kept.items() if side != "definition"}
    path = Path(out) / "kept_context.png"
    figures.kept_share_chart(series, f"context tokens kept after each selection layer — {result['split']}, "
                             f"{result['sentences']} windows", path, note=kept["definition"])
    return path


def _breaks(tokens: list[int] | None, current: np.ndarray, brk: int, decoder: bool) -> list[int]:
    """Where a new sentence starts along one axis.

    Token rows: after each ``<brk>`` on the source side; at each ``<brk>`` input on the decoder side (that
    position predicts the next sentence's first token). Without tokens: where the current-sentence mask changes.
    """
    if tokens is not None:
        return [i + (0 if decoder else 1) for i, t in enumerate(tokens) if t == brk]
    return [i for i in range(1, len(current)) if current[i] != current[i - 1]]


@torch.no_grad()
def draw_window(loaded, dataset, j: int, n: int, out: Path) -> list[Path]:
    """Heat maps of window ``j`` (shown as number ``n``): every kind, per layer averaged over heads."""
    from ctxmt_cli.models.families import inputs_of

    vocab, tok = loaded.vocab, loaded.tokenizer
    batch = inputs_of(loaded.model.cfg).collate(dataset, np.asarray([j]), vocab)
    probe = Collect()
    loaded.model(batch.to(next(loaded.model.parameters()).device), probe=probe, project=False)
    rows = {"src": batch.src[0].tolist(), "tgt": batch.tgt_in[0].tolist()}
    paths = []
    for kind, views in probe.views.items():
        if kind == "assignment":
            paths.append(_draw_assignment(views[0], rows["src"], tok, vocab, n, out))
            continue
        q_real, k_real = int(views[0].query_mask[0].sum()), int(views[0].key_mask[0].sum())
        maps = [v.weights[0].float().mean(0)[:q_real, :k_real].numpy(force=True) for v in views]   # (Tq, Tk)
        q_side, k_side = SIDES[kind]
        labels, breaks = [], []
        for side, real, current in ((q_side, q_real, views[0].query_current[0]),
                                    (k_side, k_real, views[0].key_current[0])):
            tokens = rows[side][:real] if side is not None and len(rows[side]) >= real else None
            if tokens is not None and real != len([t for t in rows[side] if t != vocab.pad]):
                tokens = None                               # a family's own rows (caching: the current one only)
            breaks.append(_breaks(tokens, current[:real].numpy(force=True), vocab.brk, side == "tgt"))
            labels.append(None if tokens is None else [tok.piece(t, side) for t in tokens])
        path = Path(out) / f"window{n}_{kind}.png"
        figures.attention_maps(maps, breaks[0], breaks[1], f"{kind} attention, window {n} (mean over heads)",
                               path, labels[0], labels[1])
        paths.append(path)
    return paths


def _draw_assignment(view, src: list[int], tok, vocab, n: int, out: Path) -> Path:
    """The grouping/selecting weights of the window's current sentence (tokens × groups)."""
    real = int(view.query_mask[0].sum())
    weights = view.weights[0, 0, :real].float().numpy(force=True)          # (L, K)
    ids = [t for t in src if t != vocab.pad]
    last = max((i for i, t in enumerate(ids) if t == vocab.brk), default=-1)
    current = ids[last + 1:]                                                # the current sentence and </s>
    labels = [tok.piece(t, "src") for t in current] if len(current) == real else [str(i) for i in range(real)]
    path = Path(out) / f"window{n}_assignment.png"
    figures.assignment_map(weights, labels, f"group assignment of window {n}'s current sentence", path)
    return path
