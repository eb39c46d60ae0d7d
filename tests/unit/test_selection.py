"""Context selection in the attention analysis (ctxmt_cli/analysis/selection.py): the kept share per selection
layer pooled as Yang et al.'s Figure 4 ratio against a hand count, dropped tokens never counted again, and the
attention statistics of a selecting model taken over the keys it really attended to."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from ctxmt_cli.analysis.attention import AttentionStats
from ctxmt_cli.analysis.selection import KeptShares, render_kept, selection_window
from ctxmt_cli.config import validate_recipe
from ctxmt_cli.core.batch import Batch, EncoderOut, LossTerm, VocabInfo
from ctxmt_cli.core.positions import current_sentence_mask
from ctxmt_cli.core.probe import AttentionView, Collect
from ctxmt_cli.models.families import build_model
from ctxmt_cli.models.hanoit.model import kept_name, part_layout, select_context

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/unit/conftest.py

BRK, EOS, BOS, PAD = 4, 3, 2, 0
VOCAB = VocabInfo(src_size=40, tgt_size=40)
# three windows with 9, 3 and 7 context tokens (<brk> included): their kept shares differ, so the pooled ratio
# (sum kept / sum context) is not the mean of the per-window ratios
SRC = [[7, 8, 9, 10, BRK, 11, 12, 13, BRK, 14, 15, 16, EOS], [17, 18, BRK, 19, 20, EOS],
       [21, 22, 23, 24, 25, 26, BRK, 27, 28, EOS]]
TGT = [[21, 22, 23, EOS], [24, 25, EOS], [26, 27, 28, 29, EOS]]
Q = 0.3          # with seed 0 below, the selection drops some context tokens of two windows and none of the third


def make_model(q: float = Q, seed: int = 0):
    """A 4-layer HanoiT encoder (1 unified + 3 selection layers) with peaked random attention, so tokens drop."""
    torch.manual_seed(seed)
    spec = {"preset": None, "d_model": 32, "ffn_dim": 64, "heads": 4, "decoder_layers": 2, "dropout": 0.0,
            "family": "hanoit", "encoder_layers": 4, "selection_layers": 3, "src_context_sentences": 2,
            "src_next_sentences": 0, "q": q}
    model = build_model(validate_recipe({"model": spec}).model, VOCAB).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.4)
    return model


def batch_of(rows: list[int]) -> Batch:
    """The windows ``rows`` padded into one batch."""
    src = torch.full((len(rows), max(len(SRC[r]) for r in rows)), PAD)
    tgt_in, tgt_out = (torch.full((len(rows), max(len(TGT[r]) for r in rows)), PAD) for _ in range(2))
    for i, r in enumerate(rows):
        src[i, :len(SRC[r])] = torch.tensor(SRC[r])
        tgt_in[i, :len(TGT[r])] = torch.tensor([BOS] + TGT[r][:-1])         # <s> y
        tgt_out[i, :len(TGT[r])] = torch.tensor(TGT[r])                     # y </s>
    return Batch(src=src, tgt_in=tgt_in, tgt_out=tgt_out, ids=np.asarray(rows))


@torch.no_grad()
def compacted(model, row: int, stats: AttentionStats) -> tuple[list[int], int]:
    """Window ``row`` alone, its dropped tokens physically removed from the tensor after each selection layer (no
    mask anywhere): every map goes to ``stats``; returns the context tokens left after each selection layer (the
    hand count) and the window's context tokens."""
    batch = batch_of([row])
    src = batch.src                                                         # (1, S), no padding
    positions, seg = part_layout(src, BRK, None)
    x = model.src_embed(src) * model.scale + model.src_pos(positions, None) + model.segment(seg)   # (1, S, C)
    current = current_sentence_mask(src, BRK)                               # (1, S)
    left, stats.rows = [], [row]
    for i, layer in enumerate(model.encoder_layers):
        x, w = layer(x, None, True)
        everything = torch.ones_like(current)
        stats(AttentionView("encoder_self", i, w, everything, everything, current, current))
        if i in model.between_layers_attention:
            keep = select_context(w.mean(1), everything, current, model.cfg.q)[0]   # (S,)
            x, current = x[:, keep], current[:, keep]                       # (1, S', C): the others are gone
            left.append(int((~current).sum()))
    enc = EncoderOut(model.encoder_norm(x), torch.ones_like(current), torch.zeros(1, dtype=torch.long),
                     current=current)
    model._decode_full(batch.tgt_in, enc, model.cross_kv(enc), probe=stats)
    return left, int((~current_sentence_mask(src, BRK)).sum())


def test_the_pooled_ratio_equals_a_hand_count():
    model = make_model()
    counts = [compacted(model, r, AttentionStats()) for r in range(len(SRC))]
    kept_by_hand = np.sum([left for left, _ in counts], axis=0)             # (3,) per selection layer
    context = sum(c for _, c in counts)
    per_window = [np.asarray(left) / c for left, c in counts]
    assert 0 < kept_by_hand[-1] < context and len({tuple(r) for r in per_window}) == len(SRC)
    kept = KeptShares()
    with torch.no_grad():
        for rows in ([0, 2], [1]):                                          # two batches, one padded
            kept.add(model(batch_of(rows), probe=AttentionStats()).loss_terms)
    source = kept.to_json()["source"]
    assert source["layers"] == [2, 3, 4] and source["context"] == context == 19
    assert source["kept"] == kept_by_hand.tolist()
    assert source["share"] == pytest.approx((kept_by_hand / context).tolist())
    assert source["share"] != pytest.approx(np.mean(per_window, axis=0).tolist())   # pooled, not averaged
    assert all(1.0 >= a >= b >= 0.0 for a, b in zip(source["share"], source["share"][1:], strict=False))
    assert set(kept.to_json()) == {"source", "definition"}                  # a monolingual model: one side


def test_layers_after_a_drop_never_count_the_dropped_tokens():
    """Through the probe: each layer's key mask lies inside the one before, a dropped key gets exactly 0 from every
    later query, and the context keys alive at a layer's input are the kept count of the selection below it."""
    model, probe, batch = make_model(), Collect(), batch_of([0, 1, 2])
    with torch.no_grad():
        terms = model(batch, probe=probe).loss_terms
    views = probe.views["encoder_self"]
    context = (batch.src != PAD) & ~current_sentence_mask(batch.src, BRK)   # (B, S)
    masks = [v.key_mask for v in views] + [probe.views["cross"][0].key_mask]
    for before, after in zip(masks, masks[1:], strict=False):
        assert not (after & ~before).any()
    for layer, view in enumerate(views[1:], start=1):
        gone = (~view.key_mask & (batch.src != PAD))[:, None, None, :]     # (B, 1, 1, S) dropped before this layer
        assert (view.weights * gone).abs().max() == 0
        if layer - 1 in model.between_layers_attention:                     # the selection just below this layer
            assert int(terms[kept_name(layer - 1)].sum) == int((view.key_mask & context).sum())
    assert (~views[-1].key_mask & context).any()                            # something was dropped
    assert int(terms[kept_name(3)].sum) == int((masks[-1] & context).sum()) < int(context.sum())


def test_statistics_of_a_selecting_model_are_over_the_keys_it_attended():
    """Entropy (plain and normalised by the keys a query may see) and current share of the full-width masked run
    equal those of the run whose dropped tokens are physically gone: the dropped keys and queries are not counted."""
    model = make_model()
    reference, analysed = AttentionStats(), AttentionStats()
    for r in range(len(SRC)):
        compacted(model, r, reference)
    analysed.rows = [0, 1, 2]
    with torch.no_grad():
        model(batch_of([0, 1, 2]), probe=analysed, project=False)
    want, got = reference.to_json(), analysed.to_json()
    for kind in ("encoder_self", "decoder_self", "cross"):
        for stat in ("entropy", "entropy_normalized", "current_share", "queries", "current_queries"):
            np.testing.assert_allclose(np.asarray(got["by_kind"][kind][stat], dtype=float),
                                       np.asarray(want["by_kind"][kind][stat], dtype=float), rtol=1e-5, atol=1e-6)
    for name in ("entropy", "entropy_current", "current_share", "current_share_self"):
        assert got["summary"][name] == pytest.approx(want["summary"][name], rel=1e-5)
    full = sum(len(s) for s in SRC)
    assert got["by_kind"]["encoder_self"]["queries"][0] == full > got["by_kind"]["encoder_self"]["queries"][-1]
    wide, batch = AttentionStats(), batch_of([0, 1, 2])                     # the counterfactual: every real token
    wide.rows, real = [0, 1, 2], batch.src != PAD

    def full_width(view: AttentionView) -> None:
        wide(replace(view, key_mask=real, query_mask=real) if view.kind == "encoder_self" else view)

    with torch.no_grad():
        model(batch, probe=full_width, project=False)
    assert wide.to_json()["summary"]["entropy"] != pytest.approx(want["summary"]["entropy"], rel=1e-3)


def test_a_target_series_slots_in_beside_the_source_one():
    kept = KeptShares()
    for layer, (src, tgt) in enumerate([(8, 6), (6, 3)], start=1):
        kept.add({kept_name(layer, "target"): LossTerm(torch.tensor(float(tgt)), torch.tensor(10.0), 0.0),
                  kept_name(layer): LossTerm(torch.tensor(float(src)), torch.tensor(10.0), 0.0),
                  "other_statistic": LossTerm(torch.tensor(1.0), torch.tensor(1.0), 0.0)})
    result = kept.to_json()
    assert list(result) == ["source", "target", "definition"]
    assert result["source"] == {"layers": [2, 3], "kept": [8, 6], "context": 10, "share": [0.8, 0.6]}
    assert result["target"]["share"] == [0.6, 0.3]
    table = render_kept(result)
    assert "Figure 4" in table[0] and table[2].split()[:3] == ["source", "80.0%", "60.0%"]
    assert table[3].split()[:3] == ["target", "60.0%", "30.0%"]
    assert KeptShares().to_json() is None                                   # a model that selects nothing


def test_the_selection_window_blanks_what_was_dropped_before_each_layer():
    model = make_model()
    window = selection_window(model, batch_of([0]))
    bottom, top = window.maps
    assert window.layers == (0, 3) and window.tokens == SRC[0]
    assert not window.absent[0].any() and np.isfinite(bottom).all()         # the bottom layer reads every token
    assert window.absent[1].any() and not window.absent[1][np.asarray(SRC[0]) == EOS].any()
    assert np.isnan(top[window.absent[1]]).all() and np.isnan(top[:, window.absent[1]]).all()
    alive = ~window.absent[1]
    np.testing.assert_allclose(top[np.ix_(alive, alive)].sum(1), 1.0, rtol=1e-5)   # rows over the living keys
    assert (window.dropped >= window.absent[1]).all() and window.dropped.sum() == 9 - 1  # 1 of 9 context kept
