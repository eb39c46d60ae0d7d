"""Attention statistics (ctxmt_cli/analysis/attention.py) against direct computations on hand-made maps."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ctxmt_cli.analysis.attention import AttentionStats, approximate_randomization, query_statistics
from ctxmt_cli.core.probe import AttentionView, target_current

T = torch.tensor
BRK, PAD = 4, 0

# Two rows, two heads, three queries x three keys; row 1's third query and third key are padding.
LAYER0 = T([[[[0.5, 0.25, 0.25], [0.1, 0.6, 0.3], [1.0, 0.0, 0.0]],
             [[0.2, 0.3, 0.5], [0.0, 0.5, 0.5], [0.4, 0.4, 0.2]]],
            [[[0.5, 0.5, 0.0], [0.9, 0.1, 0.0], [0.3, 0.3, 0.4]],
             [[1.0, 0.0, 0.0], [0.25, 0.75, 0.0], [0.6, 0.2, 0.2]]]])         # (B=2, H=2, 3, 3)
LAYER1 = LAYER0.flip(1)                                                     # heads swapped
MASK = T([[True, True, True], [True, True, False]])
CURRENT = T([[False, True, True], [False, True, False]])                    # key/query 0 is context


def view(layer: int, weights, kind: str = "encoder_self", causal: bool = False) -> AttentionView:
    return AttentionView(kind, layer, weights, MASK, MASK, CURRENT, CURRENT, causal)


def direct(weights, b: int, h: int, q: int, causal: bool = False) -> tuple[float, float, float]:
    """Entropy, normalised entropy, current share of one query, by the definitions, in plain Python."""
    keys = [k for k in range(3) if MASK[b, k] and (not causal or k <= q)]
    probs = [float(weights[b, h, q, k]) for k in keys]
    h_q = -sum(p * math.log(p) for p in probs if p > 0)
    share = sum(float(weights[b, h, q, k]) for k in keys if CURRENT[b, k])
    return h_q, (h_q / math.log(len(keys)) if len(keys) > 1 else 0.0), share


def test_query_statistics_follow_the_definitions():
    for causal in (False, True):
        weights = LAYER0 * torch.ones(3, 3).tril() if causal else LAYER0
        entropy, normalized, share = query_statistics(view(0, weights, causal=causal))
        for b in range(2):
            for h in range(2):
                for q in range(int(MASK[b].sum())):
                    expected = direct(weights, b, h, q, causal)
                    got = (float(entropy[b, h, q]), float(normalized[b, h, q]), float(share[b, h, q]))
                    assert got == pytest.approx(expected, abs=1e-6), (b, h, q, causal)


def test_two_layer_example_by_kind_summary_and_sentences():
    stats = AttentionStats()
    stats.rows = [10, 11]
    for layer, weights in enumerate((LAYER0, LAYER1)):
        stats(view(layer, weights, "encoder_self"))
        stats(view(layer, weights, "cross"))
        stats(view(layer, weights, "context"))                             # not a summary kind
    result = stats.to_json()
    queries = [(b, q) for b in range(2) for q in range(3) if MASK[b, q]]
    current = [(b, q) for b, q in queries if CURRENT[b, q]]
    for layer, weights in enumerate((LAYER0, LAYER1)):
        for h in range(2):
            mean_h = np.mean([direct(weights, b, h, q)[0] for b, q in queries])
            mean_share = np.mean([direct(weights, b, h, q)[2] for b, q in current])
            for kind in ("encoder_self", "cross", "context"):
                assert result["by_kind"][kind]["entropy"][layer][h] == pytest.approx(mean_h)
                assert result["by_kind"][kind]["current_share"][layer][h] == pytest.approx(mean_share)
    everything = [direct(w, b, h, q) for w in (LAYER0, LAYER1) for h in range(2) for b, q in queries] * 2
    assert result["summary"]["entropy"] == pytest.approx(np.mean([e for e, _, _ in everything]))
    shares = [direct(w, b, h, q)[2] for w in (LAYER0, LAYER1) for h in range(2) for b, q in current] * 2
    assert result["summary"]["current_share"] == pytest.approx(np.mean(shares))
    assert result["summary"]["current_share_self"] == pytest.approx(np.mean(shares[: len(shares) // 2]))
    current_entropy = [direct(w, b, h, q)[0] for w in (LAYER0, LAYER1) for h in range(2) for b, q in current]
    assert result["summary"]["entropy_current"] == pytest.approx(np.mean(current_entropy))
    row1 = stats.sentences[11]                                              # entropy sum and count of row 1 alone
    mine = [direct(w, 1, h, q)[0] for w in (LAYER0, LAYER1) for h in range(2) for q in range(2)] * 2
    assert row1[0] == pytest.approx(sum(mine)) and row1[1] == len(mine)
    assert result["sentences"] == 2


def test_bounds_of_entropy_and_share_on_random_maps():
    torch.manual_seed(0)
    w = torch.randn(3, 4, 7, 9).softmax(-1)
    mask = torch.ones(3, 9, dtype=torch.bool)
    qmask = torch.ones(3, 7, dtype=torch.bool)
    v = AttentionView("cross", 0, w, qmask, mask, qmask, torch.rand(3, 9) > 0.5)
    entropy, normalized, share = query_statistics(v)
    assert (entropy >= 0).all() and (entropy <= math.log(9) + 1e-6).all()
    assert (normalized >= 0).all() and (normalized <= 1 + 1e-6).all()
    assert (share >= 0).all() and (share <= 1 + 1e-6).all()
    uniform = torch.full((1, 1, 1, 9), 1 / 9)
    e, n, _ = query_statistics(AttentionView("cross", 0, uniform, qmask[:1, :1], mask[:1], qmask[:1, :1], mask[:1]))
    assert float(e) == pytest.approx(math.log(9)) and float(n) == pytest.approx(1.0)


def test_target_current_counts_the_position_that_predicts_the_current_sentence():
    tokens = T([[2, 7, BRK, 8, 9, BRK, 10, 11], [2, 12, 13, PAD, PAD, PAD, PAD, PAD]])  # <s> c1 <brk> c2 <brk> y
    assert target_current(tokens, BRK, PAD).tolist() == [
        [False, False, False, False, False, True, True, True], [True, True, True, False, False, False, False, False]]


def test_group_usage_of_assignment_weights():
    stats = AttentionStats()
    stats.rows = [0]
    w = T([[[[0.9, 0.1, 0.0], [0.0, 0.98, 0.02], [0.5, 0.5, 0.0], [0.3, 0.3, 0.4]]]])   # (1, 1, L=4, K=3), last pad
    qmask = T([[True, True, True, False]])
    groups = torch.ones(1, 3, dtype=torch.bool)
    stats(AttentionView("assignment", 0, w, qmask, groups, qmask, groups))
    a = stats.to_json()["assignment"]
    assert a["groups_used_per_sentence"] == 2 and a["groups_used"] == 2    # group 3 only has 0.02 on a real token
    assert a["tokens_per_group"] == [2.0, 3.0, 0.0]
    assert a["group_mass_share"] == pytest.approx([1.4 / 3.0, 1.58 / 3.0, 0.02 / 3.0])


def test_approximate_randomization_p_values():
    rng = np.random.default_rng(0)
    counts = rng.integers(5, 30, size=200).astype(float)
    a = np.stack([counts * rng.normal(2.0, 0.3, 200), counts], 1)          # (N, 2) per-sentence sum, count
    assert approximate_randomization(a, a.copy(), 200, seed=1) == 1.0      # identical systems: every trial ties
    b = np.stack([counts * rng.normal(1.8, 0.3, 200), counts], 1)
    assert approximate_randomization(a, b, 200, seed=1) == pytest.approx(1 / 201)
    noise = np.stack([a[:, 0] + rng.normal(0, 0.01, 200), counts], 1)
    assert approximate_randomization(a, noise, 200, seed=1) > 0.05
    assert approximate_randomization(a, b, 200, seed=3) == approximate_randomization(a, b, 200, seed=3)


def test_the_entropy_of_the_mean_map_by_hand_and_against_the_per_query_mean():
    """The second definition, by hand: each row's map averaged over its heads and real queries, then one entropy,
    then the mean over (row, layer, kind); on maps whose queries disagree it exceeds the mean per-query entropy."""
    stats = AttentionStats()
    stats.rows = [10, 11]
    for layer, weights in enumerate((LAYER0, LAYER1)):
        stats(view(layer, weights, "encoder_self"))
        stats(view(layer, weights, "cross"))
    expected = []
    for weights in (LAYER0, LAYER1):
        for b in range(2):
            queries = [q for q in range(3) if MASK[b, q]]
            keys = [k for k in range(3) if MASK[b, k]]
            mean = [np.mean([float(weights[b, h, q, k]) for h in range(2) for q in queries]) for k in keys]
            expected.append(-sum(p * math.log(p) for p in mean if p > 0))
    summary = stats.summary()
    assert summary["entropy_of_mean_map"] == pytest.approx(np.mean(expected * 2))      # two kinds, the same maps
    assert summary["entropy_of_mean_map"] > summary["entropy"]                        # averaging first adds spread
    peaked = torch.zeros(1, 2, 2, 3)
    peaked[0, :, 0, 0] = peaked[0, :, 1, 1] = 1.0                                        # each query certain
    one = AttentionStats()
    one.rows = [0]
    one(AttentionView("cross", 0, peaked, T([[True, True]]), T([[True, True, True]]), T([[True, True]]),
                      T([[True, True, True]])))
    assert one.summary()["entropy"] == pytest.approx(0.0)
    assert one.summary()["entropy_of_mean_map"] == pytest.approx(math.log(2))          # the queries disagree
