"""core.linear.Linear: oneDNN for large float32 CPU inference products, F.linear everywhere else, same numbers
either way."""

import pytest
import torch
import torch.nn.functional as F

from ctxmt_cli.core import linear as core_linear
from ctxmt_cli.core.linear import Linear

needs_onednn = pytest.mark.skipif(core_linear.ONEDNN_LINEAR is None,
                                  reason="no oneDNN linear op in this PyTorch build / not an x86-64 CPU")


@pytest.fixture
def calls(monkeypatch):
    """Counts the calls that take the oneDNN path; every product size qualifies (the size gate has its own test)."""
    monkeypatch.setattr(core_linear, "ONEDNN_MIN_MACS", 0)
    seen = []
    op = core_linear.ONEDNN_LINEAR

    def recording(*args):
        seen.append(args[0].shape)
        return op(*args)

    monkeypatch.setattr(core_linear, "ONEDNN_LINEAR", recording)
    return seen


@needs_onednn
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(5, 16), (3, 7, 16), (0, 16)])
def test_inference_takes_onednn_and_equals_f_linear(calls, bias, shape):
    torch.manual_seed(0)
    layer, x = Linear(16, 24, bias=bias), torch.randn(*shape)
    with torch.no_grad():
        got = layer(x)
        torch.testing.assert_close(got, F.linear(x, layer.weight, layer.bias), atol=1e-5, rtol=1e-5)
    with torch.inference_mode():
        torch.testing.assert_close(layer(x), got, atol=1e-6, rtol=1e-6)
    assert len(calls) == 2 and got.shape == (*shape[:-1], 24)


@needs_onednn
def test_non_contiguous_input(calls):
    torch.manual_seed(0)
    layer, x = Linear(16, 8), torch.randn(16, 6).t()                      # (6, 16) transposed view
    with torch.no_grad():
        torch.testing.assert_close(layer(x), F.linear(x, layer.weight, layer.bias), atol=1e-5, rtol=1e-5)
    assert calls


@needs_onednn
def test_only_products_past_the_gate_take_onednn(calls, monkeypatch):
    """Rows x in x out below ONEDNN_MIN_MACS stays on F.linear (its fixed cost and parallel region do not pay)."""
    monkeypatch.setattr(core_linear, "ONEDNN_MIN_MACS", 8 * 16 * 24)
    layer = Linear(16, 24)
    with torch.no_grad():
        small, large = torch.randn(7, 16), torch.randn(2, 4, 16)
        torch.testing.assert_close(layer(small), F.linear(small, layer.weight, layer.bias))
        assert calls == []
        torch.testing.assert_close(layer(large), F.linear(large, layer.weight, layer.bias), atol=1e-5, rtol=1e-5)
    assert calls == [(2, 4, 16)]


def test_training_keeps_autograd_path_and_gradients(calls):
    torch.manual_seed(0)
    layer, x = Linear(16, 8), torch.randn(4, 16, requires_grad=True)
    layer(x).square().sum().backward()
    reference = torch.nn.Linear(16, 8)
    reference.load_state_dict(layer.state_dict())                          # same parameters, same state-dict keys
    x2 = x.detach().clone().requires_grad_(True)
    reference(x2).square().sum().backward()
    torch.testing.assert_close(layer.weight.grad, reference.weight.grad)
    torch.testing.assert_close(x.grad, x2.grad)
    assert calls == []


def test_autocast_and_other_dtypes_keep_f_linear(calls):
    layer = Linear(16, 8)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        assert layer(torch.randn(4, 16)).dtype == torch.bfloat16            # autocast is honoured
    with torch.no_grad():
        assert layer.double()(torch.randn(4, 16, dtype=torch.float64)).dtype == torch.float64
    assert calls == []
