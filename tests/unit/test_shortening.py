"""Sequence shortening ("Sequence Shortening for Context-Aware MT", 2023): sparsemax, masked normalisation, every
context representation."""

import itertools
import math

import pytest
import torch

from ctxmt_cli.models.caching.shortening import Shortener, normalize, pool, pooling_windows, sparsemax

C, HEADS = 8, 2

CONFIGS = {
    "tokens": dict(repr="tokens"),
    "sentence": dict(repr="sentence"),
    "pool-max": dict(repr="pooling", pooling="max", pool_size=2),
    "pool-avg": dict(repr="pooling", pooling="avg", pool_size=3),
    "pool-linear": dict(repr="pooling", pooling="linear", pool_size=2),
    "group-sparsemax": dict(repr="grouping", groups=3, normalizer="sparsemax"),
    "group-softmax": dict(repr="grouping", groups=3, normalizer="softmax"),
    "select-sparsemax": dict(repr="selecting", groups=3, normalizer="sparsemax"),
    "select-softmax": dict(repr="selecting", groups=3, normalizer="softmax"),
}


def make(name: str, seed: int = 0) -> Shortener:
    torch.manual_seed(seed)
    return Shortener(d_model=C, heads=HEADS, hidden=16, **CONFIGS[name]).eval()


def padded_batch(lengths, total=None, seed=1):
    torch.manual_seed(seed)
    total = total or max(lengths)
    states = torch.randn(len(lengths), total, C)
    mask = torch.arange(total)[None, :] < torch.tensor(lengths)[:, None]
    return states, mask


# --- sparsemax -------------------------------------------------------------------------------


def projection_bisection(z: torch.Tensor) -> torch.Tensor:
    """Euclidean projection onto the simplex: find tau with sum(max(z - tau, 0)) = 1 by bisection."""
    z = z.double()
    lo, hi = z.max() - 1, z.max()
    for _ in range(200):
        mid = (lo + hi) / 2
        if (z - mid).clamp_min(0).sum() > 1:
            lo = mid
        else:
            hi = mid
    return (z - (lo + hi) / 2).clamp_min(0)


def projection_enumeration(z: torch.Tensor) -> torch.Tensor:
    """The same projection as the best feasible point over all supports (small n only)."""
    z = z.double()
    best, best_dist = None, math.inf
    for size in range(1, len(z) + 1):
        for support in itertools.combinations(range(len(z)), size):
            idx = torch.tensor(support)
            p = torch.zeros_like(z)
            p[idx] = z[idx] - (z[idx].sum() - 1) / size
            if (p >= -1e-12).all() and (dist := ((p - z) ** 2).sum().item()) < best_dist:
                best, best_dist = p.clamp_min(0), dist
    return best


def test_sparsemax_matches_bruteforce_projection():
    torch.manual_seed(0)
    inputs = [torch.randn(7) * s for s in (0.1, 1.0, 3.0, 1e4)]
    inputs += [torch.tensor([1.0, 1.0, 1.0, 0.0]), torch.tensor([2.0, 2.0, -1.0, 2.0, 0.5]),
               torch.tensor([5.0, 5.0]), torch.tensor([3.0]), torch.tensor([1e6, 1e6 - 0.5, -1e6])]
    for z in inputs:
        got = sparsemax(z.double())
        torch.testing.assert_close(got, projection_bisection(z), atol=1e-9, rtol=0)
        if len(z) <= 7:
            torch.testing.assert_close(got, projection_enumeration(z), atol=1e-9, rtol=0)


def test_sparsemax_is_a_sparse_distribution_along_any_dim():
    torch.manual_seed(0)
    x = torch.randn(4, 6, 5) * 3
    for dim in (0, 1, 2, -1):
        p = sparsemax(x, dim)
        assert p.shape == x.shape and (p >= 0).all()
        torch.testing.assert_close(p.sum(dim), torch.ones_like(p.sum(dim)))
        assert (p == 0).any(), "spread inputs must give exact zeros"
        ref = torch.stack([projection_bisection(r) for r in x.movedim(dim, -1).reshape(-1, x.size(dim))])
        torch.testing.assert_close(p.movedim(dim, -1).reshape(ref.shape).double(), ref, atol=1e-5, rtol=0)


def test_sparsemax_invariant_to_adding_a_constant():
    torch.manual_seed(0)
    x = torch.randn(3, 9, dtype=torch.float64)
    torch.testing.assert_close(sparsemax(x + 123.25), sparsemax(x))
    torch.testing.assert_close(sparsemax(x - 1e3), sparsemax(x))


def test_sparsemax_gradient():
    torch.manual_seed(0)
    x = (torch.randn(3, 4, 6, dtype=torch.float64) * 2).requires_grad_()
    assert torch.autograd.gradcheck(lambda t: sparsemax(t, -1), (x,))
    assert torch.autograd.gradcheck(lambda t: sparsemax(t, 1), (x,))


def test_sparsemax_half_precision():
    torch.manual_seed(0)
    x = torch.randn(5, 7) * 4
    for dtype in (torch.float16, torch.bfloat16):
        p = sparsemax(x.to(dtype))
        assert p.dtype == dtype and torch.isfinite(p).all()
        torch.testing.assert_close(p.float(), sparsemax(x.to(dtype).float()), atol=1e-2, rtol=0)


# --- normalize -------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["softmax", "sparsemax"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_normalize_masks_exactly(kind, dtype):
    torch.manual_seed(0)
    scores = (torch.randn(4, 6) * 3).to(dtype)
    mask = torch.tensor([[1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 1], [1, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0]]).bool()
    w = normalize(scores, mask, dim=-1, kind=kind)
    assert w.dtype == dtype and torch.isfinite(w).all()
    assert (w[~mask] == 0).all()
    tol = 1e-5 if dtype in (torch.float32, torch.float64) else 1e-2
    torch.testing.assert_close(w[:3].sum(-1).float(), torch.ones(3), atol=tol, rtol=0)
    assert (w[3] == 0).all(), "a fully masked slice gives zeros, not NaN"
    assert w[2, 0] == 1


@pytest.mark.parametrize("kind", ["softmax", "sparsemax"])
def test_normalize_extreme_scores_and_broadcast_mask(kind):
    # Real scores near the fp16 range must not overflow against the fill value.
    scores = torch.tensor([[60000.0, -60000.0, 100.0], [-65000.0, -65000.0, 0.0]], dtype=torch.float16)
    w = normalize(scores, torch.tensor([True, False, True]), dim=-1, kind=kind)
    assert torch.isfinite(w).all() and (w[:, 1] == 0).all()
    torch.testing.assert_close(w.sum(-1).float(), torch.ones(2), atol=1e-2, rtol=0)
    plain = normalize(scores.float(), None, dim=0, kind=kind)
    torch.testing.assert_close(plain.sum(0), torch.ones(3))
    with pytest.raises(ValueError, match="kind"):
        normalize(scores, None, dim=-1, kind="entmax")


# --- pooling by hand -------------------------------------------------------------------------


def tiny_example():
    # 5 real tokens (C = 2) and one padded position holding a value that must never win.
    states = torch.tensor([[[1.0, -2.0], [3.0, -4.0], [0.5, 7.0], [-1.0, 2.0], [-3.0, -5.0], [100.0, 100.0]]])
    mask = torch.tensor([[True] * 5 + [False]])
    return states, mask


def test_pooling_windows_zero_padding():
    states, mask = tiny_example()
    slots, slot_mask = pooling_windows(states, mask, 4)
    assert slots.shape == (1, 2, 4, 2) and slot_mask.tolist() == [[[True] * 4, [True, False, False, False]]]
    assert slots[0, 1, 1:].abs().sum() == 0


def test_max_and_avg_pooling_by_hand():
    states, mask = tiny_example()
    pooled, pooled_mask = pool(states, mask, "max", 2)
    assert pooled_mask.tolist() == [[True, True, True]]
    assert pooled.tolist() == [[[3.0, -2.0], [0.5, 7.0], [-3.0, -5.0]]]  # last group: the token, not padding
    pooled, _ = pool(states, mask, "avg", 2)
    assert pooled.tolist() == [[[2.0, -3.0], [-0.25, 4.5], [-3.0, -5.0]]]  # mean over real tokens only


def test_linear_pooling_uses_zeros_for_padded_slots():
    states, mask = tiny_example()
    proj = torch.nn.Linear(4, 2)
    pooled, pooled_mask = pool(states, mask, "linear", 2, proj)
    concat = torch.tensor([[1.0, -2.0, 3.0, -4.0], [0.5, 7.0, -1.0, 2.0], [-3.0, -5.0, 0.0, 0.0]])
    torch.testing.assert_close(pooled[0], proj(concat))
    assert pooled_mask.all()
    with pytest.raises(ValueError, match="projection"):
        pool(states, mask, "linear", 2)


def test_empty_groups_are_masked_and_zero():
    states, mask = padded_batch([5, 1], total=7)
    for kind in ("max", "avg"):
        pooled, pooled_mask = pool(states, mask, kind, 2)
        assert pooled_mask.tolist() == [[True, True, True, False], [True, False, False, False]]
        assert (pooled[~pooled_mask] == 0).all() and torch.isfinite(pooled).all()


# --- every representation --------------------------------------------------------------------

LENGTHS = [7, 4, 1]


def expected_mask(name, lengths, total):
    cfg = CONFIGS[name]
    lengths = torch.tensor(lengths)
    if cfg["repr"] == "tokens":
        return torch.arange(total)[None] < lengths[:, None]
    if cfg["repr"] == "sentence":
        return torch.ones(len(lengths), 1, dtype=torch.bool)
    if cfg["repr"] == "pooling":
        k = cfg["pool_size"]
        return torch.arange(-(-total // k))[None] < (-(-lengths // k))[:, None]
    return torch.ones(len(lengths), cfg["groups"], dtype=torch.bool)


@pytest.mark.parametrize("name", CONFIGS)
def test_shapes_and_masks(name):
    model = make(name)
    states, mask = padded_batch(LENGTHS, total=8)
    short, short_mask, info = model(states, mask)
    want = expected_mask(name, LENGTHS, 8)
    assert short_mask.dtype == torch.bool and short_mask.tolist() == want.tolist()
    assert short.shape == (*want.shape, C) and torch.isfinite(short).all()
    if CONFIGS[name]["repr"] in ("grouping", "selecting"):
        assert info["weights"].shape == (3, 8, CONFIGS[name]["groups"])
    else:
        assert "weights" not in info


@pytest.mark.parametrize("name", CONFIGS)
def test_padding_invariance(name):
    model = make(name)
    states, mask = padded_batch(LENGTHS, total=10)
    short, short_mask, _ = model(states, mask)
    for row, n in enumerate(LENGTHS):
        alone, alone_mask, _ = model(states[row:row + 1, :n], mask[row:row + 1, :n])
        m = alone.size(1)
        assert alone_mask.all() and short_mask[row, :m].tolist() == alone_mask[0].tolist()
        assert not short_mask[row, m:].any()
        torch.testing.assert_close(short[row, :m], alone[0], atol=1e-5, rtol=1e-5)
    # Arbitrary values at padded positions (huge or NaN) change nothing where it is real.
    for filler in (1e4, float("nan")):
        if filler != filler and name == "tokens":
            continue  # identity passes padded values through by design
        noisy = states.masked_fill(~mask.unsqueeze(-1), filler)
        other, other_mask, _ = model(noisy, mask)
        assert other_mask.tolist() == short_mask.tolist()
        keep = short_mask if name != "tokens" else mask
        torch.testing.assert_close(other[keep], short[keep], atol=1e-5, rtol=1e-5)


def test_sentence_is_masked_mean():
    model = make("sentence")
    states, mask = padded_batch([3, 5], total=6)
    short, _, _ = model(states, mask)
    torch.testing.assert_close(short[0, 0], states[0, :3].mean(0))
    torch.testing.assert_close(short[1, 0], states[1, :5].mean(0))


@pytest.mark.parametrize("normalizer", ["softmax", "sparsemax"])
def test_grouping_and_selecting_weights(normalizer):
    states, mask = padded_batch(LENGTHS, total=9)
    states = states * 5  # spread scores so that sparsemax has zeros to produce
    group = make(f"group-{normalizer}")
    w = group(states, mask)[2]["weights"]
    torch.testing.assert_close(w[mask].sum(-1), torch.ones(int(mask.sum())))
    assert (w[~mask] == 0).all()
    select = make(f"select-{normalizer}")
    w = select(states, mask)[2]["weights"]
    torch.testing.assert_close(w.sum(1), torch.ones(len(LENGTHS), 3))
    assert (w[~mask] == 0).all()
    assert (w[1:2, :4] >= 0).all()
    if normalizer == "sparsemax":
        assert (group(states, mask)[2]["weights"][mask] == 0).any()
        assert (w[mask] == 0).any()


def test_grouping_groups_are_weighted_sums_before_attention():
    model = make("group-softmax")
    states, mask = padded_batch([5, 2], total=5)
    seen = {}
    model.attend_back.register_forward_pre_hook(lambda mod, args: seen.update(g=args[0]))
    _, _, info = model(states, mask)
    h = states.masked_fill(~mask.unsqueeze(-1), 0)
    torch.testing.assert_close(seen["g"], torch.einsum("nlk,nlc->nkc", info["weights"], h))


@pytest.mark.parametrize("name", [n for n in CONFIGS if CONFIGS[n]["repr"] not in ("tokens", "sentence")])
def test_gradients_reach_every_parameter(name):
    model = make(name).train()
    states, mask = padded_batch(LENGTHS, total=8)
    states.requires_grad_()
    short, short_mask, _ = model(states * 3, mask)
    # A random readout: the plain sum of a LayerNorm output has an (almost) zero gradient by construction.
    (short * torch.randn_like(short))[short_mask].sum().backward()
    # Selecting normalises each group over the tokens: the last layer's bias adds one constant to every token of a
    # group, which the normaliser removes, so its gradient is 0 up to rounding (exactly 0 on some CPUs).
    inert = {"categorize.2.bias"} if CONFIGS[name]["repr"] == "selecting" else set()
    for pname, p in model.named_parameters():
        assert p.grad is not None, pname
        if pname in inert:
            assert p.grad.abs().max() < 1e-5, pname
        else:
            assert p.grad.abs().sum() > 0, pname
    assert (states.grad[~mask] == 0).all()


def test_dropouts_are_wired():
    model = Shortener("grouping", C, HEADS, groups=2, dropout=0.3, attention_dropout=0.2)
    assert model.attend_back.dropout.p == 0.3 and model.attend_back.attn.dropout == 0.2


@pytest.mark.parametrize("kwargs, match", [
    (dict(repr="pooling"), "pooling"),
    (dict(repr="pooling", pooling="median"), "pooling"),
    (dict(repr="pooling", pooling="max", pool_size=0), "pool_size"),
    (dict(repr="grouping"), "groups"),
    (dict(repr="selecting"), "groups"),
    (dict(repr="grouping", groups=0), "groups"),
    (dict(repr="grouping", groups=2, normalizer="entmax"), "normalizer"),
    (dict(repr="summary"), "repr"),
    (dict(repr="grouping", groups=2, heads=3), "divisible"),
])
def test_bad_combinations_rejected(kwargs, match):
    kwargs = {"d_model": C, "heads": HEADS, **kwargs}
    with pytest.raises(ValueError, match=match):
        Shortener(**kwargs)
