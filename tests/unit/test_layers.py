"""core.layers: fused attention projections (and checkpoints from before them), additive key masks."""

from __future__ import annotations

import warnings
from collections import Counter

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from ctxmt_cli.config import recipe_to_dict
from ctxmt_cli.core.batch import Fold
from ctxmt_cli.core.layers import FeedForward, MultiheadAttention, additive_mask, fuse_separate_projections, joined_keys
from ctxmt_cli.core.linear import Linear, xavier_
from ctxmt_cli.models.loading import load_model
from ctxmt_cli.outputs import torch_save
from ctxmt_cli.train.checkpoint import model_payload
from tests.unit.test_contract import IDS, META, make_model, plugins, recipe_of, sample, tok_vocab  # noqa: F401 (plugins: autouse, joins the toy family)

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/unit/conftest.py


def separate(state: dict) -> dict:
    """``state`` in the layout before fused projections: ``qkv_proj`` -> q/k/v_proj, ``kv_proj`` -> k/v_proj."""
    old = {}
    for key, value in state.items():
        module, _, kind = key.rpartition(".")
        prefix, _, name = module.rpartition(".")
        parts = {"qkv_proj": "qkv", "kv_proj": "kv"}.get(name)
        if parts is None:
            old[key] = value
            continue
        for letter, block in zip(parts, value.chunk(len(parts)), strict=True):
            old[f"{prefix}.{letter}_proj.{kind}"] = block.clone()
    return old


@pytest.mark.parametrize("variant", IDS)
def test_an_old_layout_state_dict_loads_with_bit_identical_logits(variant):
    model = make_model(variant, scale=0.2)
    old = separate(model.state_dict())
    assert any(k.endswith(".q_proj.weight") for k in old) and not any("qkv_proj" in k for k in old)
    fresh = make_model(variant, seed=1)
    fresh.load_state_dict(old)                                             # strict: nothing missing, nothing extra
    batch = sample(model)
    with torch.no_grad():
        assert torch.equal(model(batch).logits, fresh(batch).logits)


@pytest.mark.parametrize("variant", ["sentence-pre-norm", "caching-tokens-current-parallel"])
def test_an_old_layout_checkpoint_file_loads_and_translates_the_same(variant, tokenizer, tmp_path):
    vocab = tok_vocab(tokenizer)
    model = make_model(variant, vocab, scale=0.2)
    payload = model_payload(recipe_to_dict(recipe_of(variant)), tokenizer, vocab, META, model)
    payload["model"] = separate(payload["model"])
    loaded = load_model(torch_save(payload, tmp_path / "old.pt")).model    # through the checkpoint check
    batch = sample(model)
    batch.src.clamp_(max=vocab.src_size - 1)
    with torch.no_grad():
        assert torch.equal(model(batch).logits, loaded(batch).logits)


def test_fusing_leaves_a_state_it_cannot_fuse_for_the_load_to_report():
    state = {"a.q_proj.weight": torch.zeros(4, 4), "a.k_proj.weight": torch.zeros(4, 3),
             "a.v_proj.weight": torch.zeros(4, 4)}
    fuse_separate_projections(state, "a.", self_attention=True)
    assert set(state) == {"a.q_proj.weight", "a.k_proj.weight", "a.v_proj.weight"}
    fuse_separate_projections(state, "b.", self_attention=True)             # another module: untouched
    assert len(state) == 3


def test_fused_blocks_are_initialised_as_separate_layers_would_be():
    torch.manual_seed(0)
    parts = [torch.empty(16, 16) for _ in range(3)]
    for p in parts:
        torch.nn.init.xavier_uniform_(p)
    fused = Linear(16, 48, blocks=3)
    torch.manual_seed(0)
    xavier_(fused)
    assert torch.equal(fused.weight, torch.cat(parts))                     # not one (48, 16) xavier: wider bound


@pytest.mark.parametrize("grad", [False, True])
def test_the_additive_mask_gives_what_the_bool_mask_gives(grad):
    torch.manual_seed(0)
    attn = MultiheadAttention(16, 4, self_attention=True).eval()
    x = torch.randn(3, 5, 16)
    keep = torch.ones(3, 1, 1, 5, dtype=torch.bool)
    keep[0, ..., 3:] = False
    keep[1, ..., 1:] = False
    bias = additive_mask(keep, x.dtype)
    assert bias.dtype == x.dtype and torch.equal(bias == 0, keep)
    with torch.set_grad_enabled(grad):                                      # SDPA and the small-query path
        for need_weights in (False, True):
            a, wa, _ = attn.self_attend(x, mask=keep, need_weights=need_weights)
            b, wb, _ = attn.self_attend(x, mask=bias, need_weights=need_weights)
            assert torch.equal(a, b)
            assert (wa is None and wb is None) or torch.equal(wa, wb)


def test_self_attention_equals_separate_projections():
    """The fused projection computes what three separate ones do (per block: the same rows of one matmul)."""
    torch.manual_seed(0)
    attn = MultiheadAttention(16, 4, self_attention=True).eval()
    x = torch.randn(2, 6, 16)
    w, b = attn.qkv_proj.weight, attn.qkv_proj.bias
    q, k, v = (F.linear(x, wi, bi).view(2, 6, 4, 4).transpose(1, 2)                # (B, H, T, D) each
               for wi, bi in zip(w.chunk(3), b.chunk(3), strict=True))
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    expected = attn.out_proj(expected.transpose(1, 2).reshape(2, 6, 16))
    with torch.no_grad():
        out, _, (k2, v2) = attn.self_attend(x, causal=True)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(k2, k, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(v2, v, rtol=1e-5, atol=1e-6)


class _CountOps(TorchDispatchMode):
    """Counts the aten ops dispatched under it, by name."""

    def __init__(self):
        super().__init__()
        self.ops: Counter = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[str(func.overloadpacket)] += 1
        return func(*args, **(kwargs or {}))


def _plain_transformer_ops(batch, d: int, layers: int) -> Counter:
    """Ops of one forward + backward of ``nn.Transformer`` with the same dims (padding masks, causal decoder)."""
    torch.manual_seed(0)
    embed = torch.nn.Embedding(VOCAB_SIZE, d, padding_idx=0)
    with warnings.catch_warnings():                                         # pre-norm: no nested tensors, it says
        warnings.simplefilter("ignore", UserWarning)
        core = torch.nn.Transformer(d, 4, layers, layers, 4 * d, dropout=0.0, batch_first=True, norm_first=True)
    t = batch.tgt_in.size(1)
    causal = torch.ones(t, t, dtype=torch.bool).triu(1)
    with _CountOps() as counter:
        hidden = core(embed(batch.src), embed(batch.tgt_in), tgt_mask=causal, tgt_is_causal=True,
                      src_key_padding_mask=batch.src == 0, tgt_key_padding_mask=batch.tgt_in == 0,
                      memory_key_padding_mask=batch.src == 0)
        F.cross_entropy(F.linear(hidden, embed.weight).flatten(0, 1), batch.tgt_out.flatten()).backward()
    return counter.ops


VOCAB_SIZE = 40


def test_one_update_dispatches_fewer_ops_than_a_plain_torch_transformer_and_converts_no_mask():
    """Fused projections, masks made once and cached positions: fewer aten ops per forward + backward than
    ``nn.Transformer`` of the same dims (the op count, not the time, is what a GPU step's host cost follows)."""
    from ctxmt_cli.config import validate_recipe
    from ctxmt_cli.core.batch import VocabInfo
    from ctxmt_cli.models.families import build_model

    recipe = validate_recipe({"model": {"family": "sentence", "preset": None, "d_model": 32, "ffn_dim": 128,
                                        "heads": 4, "encoder_layers": 2, "decoder_layers": 2, "dropout": 0.0}})
    torch.manual_seed(0)
    model = build_model(recipe.model, VocabInfo(VOCAB_SIZE, VOCAB_SIZE)).train()
    batch = sample(model)
    model(batch, project=False)                                             # the position table, made once
    with _CountOps() as counter:
        hidden = model(batch, project=False).hidden
        F.cross_entropy(F.linear(hidden, model.output.weight).flatten(0, 1), batch.tgt_out.flatten()).backward()
    assert counter.ops["aten.where"] == 0 and counter.ops["aten.sin"] == 0  # no mask conversion, no positions
    assert sum(counter.ops.values()) < 0.8 * sum(_plain_transformer_ops(batch, 32, 2).values())


@pytest.mark.parametrize("activation, fn", [("relu", F.relu), ("gelu", F.gelu), ("swish", F.silu)])
def test_feed_forward_activation(activation, fn):
    """``model.activation``: the feed-forward block is fc2(act(fc1(x))) with ReLU (the default), exact GELU, or
    swish (SiLU, Marian's)."""
    torch.manual_seed(0)
    ffn = FeedForward(8, 16, 0.0, activation).eval()
    x = torch.randn(2, 3, 8)
    with torch.no_grad():
        torch.testing.assert_close(ffn(x), ffn.fc2(fn(ffn.fc1(x))), atol=0, rtol=0)


@pytest.mark.parametrize("fold,prefix_len,own_len,empty", [(1, 5, 1, False), (4, 7, 3, False), (3, 0, 2, False),
                                                       (2, 6, 1, True), (4, 5, 2, True)])
def test_shared_prefix_keys_attend_as_the_joined_layout(fold, prefix_len, own_len, empty):
    """A CPU decoding step over a group's shared prefix keys (folded, never copied per row) gives what attention over
    the prefix copied before each row's own keys gives, with padded prefix positions, a row whose whole prefix is
    padding and (``empty``) a stored group no row uses any more (an empty slot of the fold)."""
    torch.manual_seed(0)
    attn, groups = MultiheadAttention(16, 4, self_attention=True).eval(), 3
    used = [0, 2] if empty else list(range(groups))
    b = len(used) * fold
    slots = torch.tensor([g * fold + i for g in used for i in range(fold)]) if empty else None
    shared_k, shared_v = torch.randn(groups, 4, prefix_len, 4), torch.randn(groups, 4, prefix_len, 4)
    keep = torch.rand(groups, prefix_len) > 0.3
    keep[0] = False                                                       # a group with no prefix at all
    shared = ((shared_k, shared_v), additive_mask(keep[:, None, None, :], torch.float32), Fold(fold, slots))
    past = (torch.randn(b, 4, own_len - 1, 4), torch.randn(b, 4, own_len - 1, 4))
    own = additive_mask(torch.ones(b, 1, 1, own_len, dtype=torch.bool), torch.float32)
    x = torch.randn(b, 1, 16)
    with torch.no_grad():
        fast, _, (k, v) = attn.self_attend(x, past, own, shared=shared)
        with torch.enable_grad():                                         # not a CPU inference step: joined layout
            slow, _, (k2, _) = attn.self_attend(x, past, own, shared=shared)
        joined_k, _, joined_mask = joined_keys(shared, k, v, own)
    torch.testing.assert_close(fast, slow.detach(), rtol=1e-5, atol=1e-5)
    assert torch.equal(k, k2) and k.size(2) == own_len                    # the rows' own keys only
    assert joined_k.size(2) == prefix_len + own_len and joined_mask.shape == (b, 1, 1, prefix_len + own_len)
    rows = [g for g in used for _ in range(fold)]
    assert torch.equal(joined_k[:, :, :prefix_len], shared_k[rows])      # each row reads its own group's prefix


@pytest.mark.parametrize("empty", [False, True])
def test_folded_cross_attention_equals_keys_copied_per_row(empty):
    """attend_folded over shared key rows, with or without empty slots, equals attention to keys copied per row."""
    torch.manual_seed(1)
    attn, groups, fold = MultiheadAttention(16, 4).eval(), 4, 3
    used = [1, 3] if empty else list(range(groups))
    slots = torch.tensor([g * fold + i for g in used for i in range(fold)]) if empty else None
    rows = [g for g in used for _ in range(fold)]
    k, v = torch.randn(groups, 4, 6, 4), torch.randn(groups, 4, 6, 4)
    mask = additive_mask(torch.rand(groups, 1, 1, 6) > 0.2, torch.float32)
    x = torch.randn(len(rows), 1, 16)
    with torch.no_grad():
        folded, _ = attn.attend_folded(x, k, v, mask, Fold(fold, slots))
        copied, _ = attn.attend(x, k[rows], v[rows], mask[rows])
    torch.testing.assert_close(folded, copied, rtol=1e-5, atol=1e-5)
