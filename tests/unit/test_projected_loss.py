"""The fused projection + label-smoothed cross-entropy equals the plain path, values and gradients."""

import pytest
import torch
import torch.nn.functional as F

from ctxmt_cli.core import logits as core_logits
from ctxmt_cli.train import projected_loss
from ctxmt_cli.train.op_count import OpCounter
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
    for got, want in zip(fused, ref, strict=True):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    assert bool((fused[0][target == PAD] == 0).all())


def test_bf16_autocast_stays_close_to_float32():
    hidden, weight, target = case(seed=1)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        low = grads(lambda h, w, t, s: projected_token_losses(h, w, t, PAD, s), hidden, weight, target, 0.1)
    ref = grads(plain, hidden, weight, target, 0.1)
    assert low[2].dtype == torch.float32                                   # the weight's own dtype
    for got, want in zip(low, ref, strict=True):
        torch.testing.assert_close(got, want, atol=5e-2, rtol=5e-2)


def autocast_plain(hidden, weight, target, smoothing):
    """The reference under autocast: ``F.linear`` in bf16, cross-entropy as autocast runs it."""
    b, t, _ = hidden.shape
    logits = F.linear(hidden, weight).reshape(b * t, -1)
    return F.cross_entropy(logits, target.reshape(-1), ignore_index=PAD, label_smoothing=smoothing,
                           reduction="none").float().view(b, t)


@pytest.mark.parametrize("gpu_blocks", [False, True])
def test_autocast_gradients_equal_the_autocast_reference(gpu_blocks):
    """Under bf16 autocast the loss and its gradients (hidden states, output weight) are those of
    ``F.cross_entropy(F.linear(h, W))`` under autocast, to bf16 precision (CPU and GPU block sizes)."""
    hidden, weight, target = case(seed=2, b=4, t=9, c=32, v=300)
    def fused(h, w, t, s):
        return projected_token_losses(h, w, t, PAD, s)

    with torch.autocast("cpu", dtype=torch.bfloat16):
        ref = grads(autocast_plain, hidden, weight, target, 0.1)
        if gpu_blocks:
            with projected_loss.blocks_as_on("cuda"):
                got = grads(fused, hidden, weight, target, 0.1)
        else:
            got = grads(fused, hidden, weight, target, 0.1)
    assert got[1].dtype == hidden.dtype and got[2].dtype == weight.dtype   # the leaves' own dtypes
    for mine, want in zip(got, ref, strict=True):
        torch.testing.assert_close(mine, want, atol=1e-2, rtol=1.6e-2)


@pytest.mark.parametrize("amp", [None, torch.bfloat16])
def test_every_matrix_multiply_runs_in_the_autocast_dtype(amp):
    """The precision bug: a float32 final hidden state under autocast made both vocabulary-sized products of the
    backward run in float32. Forward and backward products now take autocast's dtype (float32 without it)."""
    hidden, weight, target = case(seed=3)
    h, w = hidden.clone().requires_grad_(), weight.clone().requires_grad_()
    with torch.autocast("cpu", dtype=amp or torch.bfloat16, enabled=amp is not None):
        with OpCounter() as forward:
            loss = projected_token_losses(h, w, target, PAD, 0.1)
    with OpCounter() as backward:
        loss.sum().backward()
    want = amp or torch.float32
    assert len(forward.matmuls) == 1 and len(backward.matmuls) == 2
    for name, dtypes in forward.matmuls + backward.matmuls:
        assert set(dtypes) == {want}, (name, dtypes)


def test_block_size_depends_on_the_device_only():
    """CPU: cache-sized blocks (about 32 MB of logits); GPU: gigabytes, so a 25k-token batch of a 32k
    vocabulary is a single block."""
    assert projected_loss.block_rows(32000, "cpu") == core_logits.logit_chunk_rows(32000) < 25_000
    assert projected_loss.block_rows(32000, "cuda") >= 25_000
    with projected_loss.blocks_as_on("cuda"):
        assert projected_loss.block_rows(32000, "cpu") >= 25_000
    assert projected_loss.block_rows(32000, "cpu") < 25_000                # restored on exit


def test_gpu_blocks_make_the_op_count_independent_of_the_batch(monkeypatch):
    """With the GPU's budget one update of the loss dispatches the same ops for 40 or 400 rows (one block); with
    CPU blocks of 32 rows the count grows with the rows (a Python loop over blocks)."""
    monkeypatch.setattr(core_logits, "LOGIT_CHUNK_BYTES", 32 * 4 * 50)  # CPU blocks: 32 rows with V = 50

    def ops(rows):
        hidden, weight, target = case(seed=4, b=rows // 10, t=10)
        h, w = hidden.requires_grad_(), weight.requires_grad_()
        with OpCounter() as counter:
            projected_token_losses(h, w, target, PAD, 0.1).sum().backward()
        return counter.total

    with projected_loss.blocks_as_on("cuda"):
        assert ops(40) == ops(400)
    assert ops(400) > ops(40)


@pytest.mark.parametrize("chunk_rows", [1, 1000])
def test_an_output_bias_enters_values_and_gradients(monkeypatch, chunk_rows):
    """Marian's final logits bias (``model.output_bias``): the fused loss of hidden @ Wᵀ + b and its gradients,
    the bias's included, equal the plain path's."""
    monkeypatch.setattr(core_logits, "LOGIT_CHUNK_BYTES", chunk_rows * 4 * 50)
    hidden, weight, target = case(seed=2)
    bias = torch.randn(50, generator=torch.Generator().manual_seed(3))

    def run(fused):
        h, w, b = hidden.clone().requires_grad_(), weight.clone().requires_grad_(), bias.clone().requires_grad_()
        if fused:
            loss = projected_token_losses(h, w, target, PAD, 0.1, bias=b)
        else:
            logits = (F.linear(h, w) + b).reshape(-1, 50)
            loss = F.cross_entropy(logits, target.reshape(-1), ignore_index=PAD, label_smoothing=0.1,
                                   reduction="none").view(target.shape)
        (loss * torch.linspace(0.5, 2.0, loss.numel()).view_as(loss)).sum().backward()
        return loss.detach(), h.grad, w.grad, b.grad

    for got, want in zip(run(True), run(False), strict=True):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
