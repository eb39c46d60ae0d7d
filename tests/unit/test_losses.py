"""The training objective: window loss + family loss terms; concat's context discount (Lupo et al. 2022, eq. 2)."""

import pytest
import torch
import torch.nn.functional as F

from ctxmt_cli.config import validate_recipe
from ctxmt_cli.core.batch import Batch, LossTerm, ModelOutput, VocabInfo
from ctxmt_cli.models.families import build_model
from ctxmt_cli.train.losses import LossLayout

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
TINY = {"preset": None, "d_model": 16, "ffn_dim": 16, "heads": 2, "encoder_layers": 1, "decoder_layers": 1}


def token_losses(logits, target, pad, label_smoothing):
    """Label-smoothed per-token loss (B, T) by PyTorch's cross-entropy; 0 at padding."""
    b, t, v = logits.shape
    loss = F.cross_entropy(logits.reshape(b * t, v), target.reshape(b * t), ignore_index=pad, reduction="none",
                           label_smoothing=label_smoothing)
    return loss.view(b, t)


def logits(seed=0, v=16):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*TARGET.shape, v, generator=g)


def smoothed(lg, eps):
    """Per-token label-smoothed CE written out: (1-ε)·nll + ε·mean_v(-log p)."""
    logp = lg.log_softmax(-1)
    nll = -logp.gather(-1, TARGET.unsqueeze(-1)).squeeze(-1)
    return ((1 - eps) * nll + eps * (-logp.mean(-1))) * REAL


def concat_objective(lg, eps=0.0, cd=1.0, cd_normalize="window_tokens", family="concat"):
    """(layout, objective, loss vector) of a concat (or other family) model's objective over ``lg``."""
    spec = {"family": family, **TINY} | ({"cd": cd, "cd_normalize": cd_normalize} if family == "concat" else {})
    model = build_model(validate_recipe({"model": spec}).model, VocabInfo(16, 16))
    token = token_losses(lg, TARGET, PAD, eps)
    terms = model.loss_terms(Batch(src=TARGET, tgt_out=TARGET), token, ModelOutput(None))
    layout = LossLayout(model.loss_term_names)
    return (layout, *layout.sums(token, TARGET, PAD, BRK, terms))


@pytest.mark.parametrize("family", ["concat", "sentence"])
@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_cd_one_is_plain_label_smoothed_cross_entropy(eps, family):
    lg = logits()
    layout, objective, sums = concat_objective(lg, eps, cd=1.0, family=family)
    plain = F.cross_entropy(lg.reshape(-1, lg.size(-1)), TARGET.reshape(-1), ignore_index=PAD,
                            label_smoothing=eps)
    assert torch.equal(objective, token_losses(lg, TARGET, PAD, eps).sum())  # exactly, not approximately
    torch.testing.assert_close(objective / sums[1], plain, rtol=0, atol=1e-6)
    assert layout.metrics(sums)["discounted_loss"] == pytest.approx(plain.item(), abs=1e-6)


def test_attribution_by_brk_and_final_eos_is_current():
    lg = logits(1)
    per_token = smoothed(lg, 0.0)
    layout, _, sums = concat_objective(lg, cd=0.25)
    m = layout.metrics(sums)
    assert m["current_tokens"] == CURRENT.sum().item() == 6 and m["tokens"] == 11
    assert m["current_loss"] == pytest.approx((per_token * CURRENT).sum().item() / 6, rel=1e-6)
    assert m["context_loss"] == pytest.approx((per_token * (REAL & ~CURRENT)).sum().item() / 5, rel=1e-6)
    assert m["window_loss"] == pytest.approx(per_token.sum().item() / 11, rel=1e-6)


@pytest.mark.parametrize("eps", [0.0, 0.2])
def test_label_smoothing_applies_inside_each_part(eps):
    lg, cd = logits(2), 0.01
    per_token = smoothed(lg, eps)
    _, objective, _ = concat_objective(lg, eps, cd=cd)
    expected = cd * (per_token * (REAL & ~CURRENT)).sum() + (per_token * CURRENT).sum()
    torch.testing.assert_close(objective, expected)


def test_normalisers_window_tokens_vs_weight_sum():
    lg, cd = logits(3), 0.5
    _, by_tokens_obj, by_tokens = concat_objective(lg, cd=cd, cd_normalize="window_tokens")
    _, by_weight_obj, by_weight = concat_objective(lg, cd=cd, cd_normalize="weight_sum")
    assert by_tokens[1].item() == 11                                        # every target token of the window
    assert by_weight[1].item() == pytest.approx(6 + cd * 5)                 # Σw
    assert torch.equal(by_tokens_obj, by_weight_obj)


def test_discount_gradient_reaches_context_tokens_scaled_by_cd():
    lg, cd = logits(5).requires_grad_(), 0.25
    _, objective, _ = concat_objective(lg, cd=cd)
    objective.backward()
    full = logits(5).requires_grad_()
    (smoothed(full, 0.0) * torch.where(CURRENT, 1.0, cd)).sum().backward()
    torch.testing.assert_close(lg.grad, full.grad)


def test_no_context_gives_nan_context_loss():
    lg = logits(6)
    target = TARGET[1:]
    token = token_losses(lg[1:], target, PAD, 0.0)
    context = torch.zeros_like(target, dtype=torch.bool)
    layout = LossLayout(["context_loss"])
    term = LossTerm(token[context].sum(), context.sum(), -1.0)
    _, sums = layout.sums(token, target, PAD, BRK, {"context_loss": term})
    assert layout.metrics(sums)["context_loss"] != layout.metrics(sums)["context_loss"]


def test_terms_weight_add_log_and_normalise():
    token = torch.tensor([[1.0, 2.0, 3.0]])
    target = torch.tensor([[7, 8, EOS]])
    layout = LossLayout(["aux", "stat"])
    terms = {"aux": LossTerm(torch.tensor(4.0), torch.tensor(2.0), weight=0.5, normalizes=True),
             "stat": LossTerm(torch.tensor(9.0), torch.tensor(3.0), weight=0.0)}
    objective, sums = layout.sums(token, target, PAD, BRK, terms)
    assert objective.item() == 6.0 + 0.5 * 4.0                             # a weight-0 statistic adds nothing
    m = layout.metrics(sums)
    assert m["discounted_loss"] == pytest.approx(8.0 / (3 + 0.5 * 2))
    assert m["aux"] == 2.0 and m["stat"] == 3.0 and m["window_loss"] == 2.0
    with pytest.raises(RuntimeError, match="declares"):
        layout.sums(token, target, PAD, BRK, {"aux": terms["aux"]})
