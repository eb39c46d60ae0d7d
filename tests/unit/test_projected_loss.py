"""The fused projection + label-smoothed cross-entropy equals the plain path, values and gradients."""

import pytest
import torch
import torch.nn.functional as F

from ctxmt_cli.core import logits as core_logits
from ctxmt_cli.train.projected_loss import projected_token_losses

PAD = 0


def case(seed=0, b=3, t=7, c=16, v=50):
    gen = torch.Generator().manual_seed(seed)
    hidden = torch.randn(b, t, c, generator=gen, dtype=torch.float64).float()
    weight = (torch.randn(v, c, generator=gen) * 0.3)
    target = torch.randint(5, v, (b, t), generator=gen)
    target[1, 4:] = PAD                                                   # right padding
    target[2, 6:] = PAD
    return hidden, weight, target


def plain(hidden, weight, target, smoothing):
    b, t, _ = hidden.shape
    logits = F.linear(hidden, weight).float().reshape(b * t, -1)
    return F.cross_entropy(logits, target.reshape(-1), ignore_index=PAD, label_smoothing=smoothing,
                           reduction="none").view(b, t)


def grads(fn, hidden, weight, target, smoothing):
    h, w = hidden.clone().requires_grad_(), weight.clone().requires_grad_()
    loss = fn(h, w, target, smoothing)
    upstream = torch.linspace(0.5, 2.0, loss.numel()).view_as(loss)      # uneven weights, like the CD
    (loss * upstream).sum().backward()
    return loss.detach(), h.grad, w.grad


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("chunk_rows", [1, 4, 1000])
def test_values_and_gradients_equal_the_plain_loss(monkeypatch, smoothing, chunk_rows):
    monkeypatch.setattr(core_logits, "LOGIT_CHUNK_BYTES", chunk_rows * 4 * 50)  # rows per chunk with V = 50
    hidden, weight, target = case()
    fused = grads(lambda h, w, t, s: projected_token_losses(h, w, t, PAD, s), hidden, weight, target, smoothing)
    ref = grads(plain, hidden, weight, target, smoothing)
    for got, want in zip(fused, ref):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    assert bool((fused[0][target == PAD] == 0).all())


def test_bf16_autocast_stays_close_to_float32():
    hidden, weight, target = case(seed=1)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        low = grads(lambda h, w, t, s: projected_token_losses(h, w, t, PAD, s), hidden, weight, target, 0.1)
    ref = grads(plain, hidden, weight, target, 0.1)
    assert low[2].dtype == torch.float32                                   # the weight's own dtype
    for got, want in zip(low, ref):
        torch.testing.assert_close(got, want, atol=5e-2, rtol=5e-2)
