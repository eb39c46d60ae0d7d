"""Context-discounted loss (seed 001 eq. 2): attribution, normalisation, label smoothing per part."""

import pytest
import torch
import torch.nn.functional as F

from ctxmt_cli.train.losses import LossSums, window_loss

PAD, EOS, BRK = 0, 3, 4
# row 0: two context sentences then the current one; row 1: no context, padded
TARGET = torch.tensor([
    [7, 8, BRK, 9, BRK, 10, 11, EOS],
    [12, 13, EOS, PAD, PAD, PAD, PAD, PAD],
])
CURRENT = torch.tensor([
    [0, 0, 0, 0, 0, 1, 1, 1],
    [1, 1, 1, 0, 0, 0, 0, 0],
], dtype=torch.bool)
REAL = TARGET != PAD


def logits(seed=0, v=16):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*TARGET.shape, v, generator=g)


def smoothed(lg, eps):
    """Per-token label-smoothed CE written out: (1-ε)·nll + ε·mean_v(-log p)."""
    logp = lg.log_softmax(-1)
    nll = -logp.gather(-1, TARGET.unsqueeze(-1)).squeeze(-1)
    return ((1 - eps) * nll + eps * (-logp.mean(-1))) * REAL


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_cd_one_is_plain_label_smoothed_cross_entropy(eps):
    lg = logits()
    sums = window_loss(lg, TARGET, PAD, BRK, label_smoothing=eps, cd=1.0)
    plain = F.cross_entropy(lg.reshape(-1, lg.size(-1)), TARGET.reshape(-1), ignore_index=PAD,
                            label_smoothing=eps)
    assert torch.equal(sums.weighted, sums.window)
    torch.testing.assert_close(sums.weighted / sums.normalizer, plain, rtol=0, atol=1e-6)


def test_attribution_by_brk_and_final_eos_is_current():
    lg = logits(1)
    per_token = smoothed(lg, 0.0)
    sums = window_loss(lg, TARGET, PAD, BRK, cd=0.25)
    assert sums.current_tokens.item() == CURRENT.sum().item() == 6
    assert sums.context_tokens.item() == (REAL & ~CURRENT).sum().item() == 5
    assert sums.tokens.item() == 11
    torch.testing.assert_close(sums.current, (per_token * CURRENT).sum())
    torch.testing.assert_close(sums.context, (per_token * (REAL & ~CURRENT)).sum())


@pytest.mark.parametrize("eps", [0.0, 0.2])
def test_label_smoothing_applies_inside_each_part(eps):
    lg, cd = logits(2), 0.01
    per_token = smoothed(lg, eps)
    sums = window_loss(lg, TARGET, PAD, BRK, label_smoothing=eps, cd=cd)
    expected = cd * (per_token * (REAL & ~CURRENT)).sum() + (per_token * CURRENT).sum()
    torch.testing.assert_close(sums.weighted, expected)


def test_normalisers_window_tokens_vs_weight_sum():
    lg, cd = logits(3), 0.5
    by_tokens = window_loss(lg, TARGET, PAD, BRK, cd=cd, cd_normalize="window_tokens")
    by_weight = window_loss(lg, TARGET, PAD, BRK, cd=cd, cd_normalize="weight_sum")
    assert by_tokens.normalizer.item() == 11                               # every target token of the window
    assert by_weight.normalizer.item() == pytest.approx(6 + cd * 5)        # Σw
    assert torch.equal(by_tokens.weighted, by_weight.weighted)


def test_metrics_from_sums():
    sums = window_loss(logits(4), TARGET, PAD, BRK, cd=0.5)
    m = LossSums.metrics(sums.as_tensor())
    assert m["discounted_loss"] == pytest.approx((sums.weighted / sums.normalizer).item())
    assert m["window_loss"] == pytest.approx((sums.window / 11).item())
    assert m["current_loss"] == pytest.approx((sums.current / 6).item())
    assert m["context_loss"] == pytest.approx((sums.context / 5).item())
    assert m["tokens"] == 11 and m["current_tokens"] == 6


def test_no_context_gives_nan_context_loss():
    target = TARGET[1:]
    sums = window_loss(torch.randn(1, 8, 16), target, PAD, BRK, cd=0.0)
    assert LossSums.metrics(sums.as_tensor())["context_loss"] != LossSums.metrics(sums.as_tensor())["context_loss"]
