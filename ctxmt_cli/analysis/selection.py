"""Context selection in ``analyze-attention`` (HanoiT, Yang et al., §4): how many context tokens each selection
layer keeps over a split (Figure 4), and one window's encoder self-attention of the bottom layer and of the top
layer with the dropped context tokens marked (Figure 6).

Kept share. A model whose encoder selects context tokens logs, after each selection layer N (1-based encoder
layer), a weight-0 loss term named by :func:`ctxmt_cli.models.hanoit.kept_name`: sum = the window's context tokens
still alive after layer N, count = the context tokens of the input window. :class:`KeptShares` pools them as the
paper's ratio, Σ kept / Σ input context tokens over the analysed windows (a long window weighs more than a short
one; it is not a mean of per-window ratios). One series per context side, keyed "source" and "target": "source"
comes from ``kept_context_layerN`` (the source context, previous and next sentences alike); "target" from
``kept_target_context_layerN``, which the bilingual model (§2.3) logs for the target-context tokens of its second
stream [target context; current source] under the same selection (the analysed windows carry that stream as
validation gives it: :func:`ctxmt_cli.analysis.attention_run.target_concatenation`). A side is reported when the
model logs it.

Heat maps. One teacher-forced pass over the chosen window with every map kept (a probe listens, so the encoder
keeps the window's full width and a dropped token's column is 0 in every later layer): the head-averaged
self-attention of the bottom encoder layer and of the top one. Tokens no longer alive at a layer's input are
blanked in that layer's map (rows and columns); the context tokens the selection drops by the end (the decoder's
cross-attention never reads them) are marked on both maps. A bilingual model's maps are those of its source window
(the probe listens to that stream; the target stream's selection shows in its kept shares).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ctxmt_cli.core.probe import Collect
from ctxmt_cli.models.hanoit.model import KEPT_PREFIX, kept_layer

DEFINITION = ("share of the input window's context tokens still kept after each selection layer (1-based encoder "
              "layer), pooled over the analysed windows as sum(kept) / sum(context tokens of the input) "
              "(Yang et al., Figure 4); source: source-side context, target: target-side context (bilingual model); "
              "source.current_control: per selection layer, the share of the current sentence's own tokens (those "
              "that make p) the layer's rule would keep if each were a context token, a key not being its own query "
              "(how strict the rule is on tokens the model reads for sure), pooled the same way")


class KeptShares:
    """Pooled kept counts per context side and selection layer, added batch by batch from a forward pass's terms."""

    def __init__(self):
        self.kept: dict[str, dict[int, float]] = {}       # side -> 1-based layer -> Σ kept context tokens
        self.context: dict[str, dict[int, float]] = {}    # side -> 1-based layer -> Σ input context tokens
        self.control: dict[int, list[float]] = {}          # 1-based layer -> [Σ current tokens kept, Σ current tokens]

    def add(self, terms: dict) -> None:
        """Add one batch's loss terms (name -> LossTerm); every term that is not a kept share is ignored."""
        for name, term in terms.items():
            found = kept_layer(name)
            if found is None:
                continue
            side, layer = found
            kept, context = self.kept.setdefault(side, {}), self.context.setdefault(side, {})
            kept[layer] = kept.get(layer, 0.0) + float(term.sum)
            context[layer] = context.get(layer, 0.0) + float(term.count)

    def probe(self, model, inner):
        """A probe that hands every map to ``inner`` and, for each selection layer's encoder self-attention, adds
        the model's rule applied to the current sentence's tokens (``model.selection_control``) to the control;
        ``inner`` itself for a model without a selection rule."""
        control = getattr(model, "selection_control", None)
        if control is None:
            return inner
        watched = model.between_layers_attention

        def listen(view) -> None:
            inner(view)
            if view.kind == "encoder_self" and view.layer in watched:
                attention = view.weights.float().mean(1)                   # (B, S, S) eq. 4: mean over heads
                kept, total = control(attention, view.key_mask, view.key_current)
                sums = self.control.setdefault(view.layer + 1, [0.0, 0.0])
                sums[0], sums[1] = sums[0] + float(kept), sums[1] + float(total)
        return listen

    def to_json(self) -> dict | None:
        """``{"source": {"layers", "kept", "context", "share"}, "target": …, "definition"}``; None when the model
        selects nothing (no kept-share term was seen). ``share`` is None for a side whose windows had no context."""
        if not self.kept:
            return None
        out: dict = {}
        for side in (s for s in KEPT_PREFIX if s in self.kept):
            layers = sorted(self.kept[side])
            kept = [self.kept[side][n] for n in layers]
            context = [self.context[side][n] for n in layers]       # the same input count for every layer
            out[side] = {"layers": layers, "kept": [int(round(k)) for k in kept], "context": int(round(max(context))),
                         "share": [k / c if c else None for k, c in zip(kept, context, strict=True)]}
            if side == "source" and self.control:
                pairs = [self.control.get(n, (0.0, 0.0)) for n in layers]
                out[side]["current_control"] = [k / c if c else None for k, c in pairs]
        out["definition"] = DEFINITION
        return out


def render_kept(kept: dict) -> list[str]:
    """The printed table: one row per context side, one column per selection layer, kept shares in %."""
    sides = [s for s in KEPT_PREFIX if s in kept]
    layers = sorted({n for s in sides for n in kept[s]["layers"]})
    lines = ["   kept context tokens after each selection layer (Yang et al., Figure 4; pooled over the windows):",
             "   " + f"{'layer':>8}" + "".join(f"{n:>8}" for n in layers)]

    def row(label: str, series: dict, shares: list, note: str) -> str:
        by_layer = dict(zip(series["layers"], shares, strict=True))
        cells = ["-" if by_layer.get(n) is None else f"{100 * by_layer[n]:.1f}%" for n in layers]
        return "   " + f"{label:>8}" + "".join(f"{c:>8}" for c in cells) + note

    for side in sides:
        series = kept[side]
        lines.append(row(side, series, series["share"], f"   of {series['context']} context tokens"))
        if "current_control" in series:
            lines.append(row("current*", series, series["current_control"],
                             "   * the same rule on the current sentence's own tokens (not compounded)"))
    return lines


@dataclass
class SelectionWindow:
    """One window's bottom and top encoder self-attention (mean over heads) and which tokens were dropped."""

    layers: tuple[int, int]          # 0-based encoder layers of the two maps (bottom, top)
    maps: tuple[np.ndarray, np.ndarray]   # (S, S) each, queries x keys; NaN at tokens absent at the layer's input
    absent: tuple[np.ndarray, np.ndarray]  # (S,) bool each: tokens already dropped at that layer's input
    dropped: np.ndarray              # (S,) bool: context tokens the selection drops by the end (not in EncoderOut.mask)
    tokens: list[int]                # (S,) the window's source token ids


@torch.no_grad()
def selection_window(model, batch) -> SelectionWindow:
    """Run one window (a batch of one row) with every map kept and take Figure 6's two maps from it."""
    probe = Collect()
    model(batch, probe=probe, project=False)
    views = probe.views["encoder_self"]
    n = int(views[0].key_mask[0].sum())                                     # the window's real tokens
    final = probe.views["cross"][0].key_mask[0, :n].numpy(force=True)       # (S,) what cross-attention reads
    maps, absent = [], []
    for view in (views[0], views[-1]):
        alive = view.key_mask[0, :n].numpy(force=True)                      # (S,) keys this layer attended over
        m = view.weights[0].float().mean(0)[:n, :n].numpy(force=True).astype(float)   # (S, S)
        m[~alive, :] = np.nan                                               # a dropped token is no query ...
        m[:, ~alive] = np.nan                                               # ... and no key any more
        maps.append(m)
        absent.append(~alive)
    return SelectionWindow(layers=(views[0].layer, views[-1].layer), maps=(maps[0], maps[1]),
                           absent=(absent[0], absent[1]), dropped=~final, tokens=batch.src[0, :n].tolist())


def draw_selection(loaded, dataset, j: int, n: int, out: Path) -> Path:
    """Figure 6 for window ``j`` (shown as number ``n``): ``windowN_selection.png``."""
    from ctxmt_cli import figures
    from ctxmt_cli.models.families import inputs_of

    vocab, model = loaded.vocab, loaded.model
    batch = inputs_of(model.cfg).collate(dataset, np.asarray([j]), vocab)
    window = selection_window(model, batch.to(next(model.parameters()).device))
    selecting = model.between_layers_attention
    titles = [f"({'ab'[i]}) layer {layer + 1}, {'bottom' if i == 0 else 'top'} "
              f"{'selection' if layer in selecting else 'unified'} layer" for i, layer in enumerate(window.layers)]
    breaks = [i + 1 for i, t in enumerate(window.tokens) if t == vocab.brk]   # a sentence starts after each <brk>
    labels = [loaded.tokenizer.piece(t, "src") for t in window.tokens]
    note = (f"{int(window.dropped.sum())} of the window's {len(window.tokens)} tokens dropped by the selection (grey "
            "labels, red x: the decoder never reads them); hatched: already dropped at the layer's input (no "
            "attention to or from them)")
    path = Path(out) / f"window{n}_selection.png"
    figures.selection_maps(list(window.maps), titles, list(window.absent), window.dropped, breaks, labels,
                           f"encoder self-attention of window {n}, mean over heads (Yang et al., Figure 6)", path,
                           note=note)
    return path
