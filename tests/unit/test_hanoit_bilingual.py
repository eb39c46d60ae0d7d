"""The bilingual HanoiT (Yang et al., §2.3): the gate of eqs. 9-10, rows without target context read exactly as
by the monolingual model, the target stream's segments and kept shares, the joint-vocabulary refusal. The core
contract (incremental = full pass, padding, beam 1 = greedy) runs in tests/unit/test_contract.py."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from ctxmt_cli.config import validate_recipe
from ctxmt_cli.core.batch import Batch, VocabInfo
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.models.families import build_model
from ctxmt_cli.models.hanoit.bilingual import (
    TARGET_NEXT,
    TARGET_PREVIOUS,
    ContextGate,
    TargetConcatRows,
    target_segments,
)
from ctxmt_cli.models.hanoit.model import CURRENT, NEXT, PREVIOUS, HanoiT, part_layout

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/unit/conftest.py

BRK, EOS, BOS, PAD = 4, 3, 2, 0
VOCAB = VocabInfo(src_size=40, tgt_size=40)
TINY = {"preset": None, "d_model": 32, "ffn_dim": 64, "heads": 4, "encoder_layers": 2, "decoder_layers": 2,
        "dropout": 0.0, "q": 0.5}


def model(seed: int = 0, **spec) -> HanoiT:
    torch.manual_seed(seed)
    net = build_model(validate_recipe({"model": {**TINY, "family": "hanoit", **spec}}).model, VOCAB).eval()
    with torch.no_grad():                                                   # peaked weights: outputs that differ
        for p in net.parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.3)
    return net


def pad(rows):
    out = torch.full((len(rows), max(len(r) for r in rows)), PAD, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.tensor(r)
    return out


def batch(on=(True, True)) -> Batch:
    """Two rows: 1 previous + 1 next source sentence; target concatenations of the same sentences (``on``)."""
    src = pad([[7, 8, BRK, 9, 10, BRK, 11, 12, EOS], [13, BRK, 14, 15, 16, EOS]])
    concat = [[20, 21, 22, BRK, 23, BRK, 11, 12, EOS], [24, 25, BRK, 14, 15, 16, EOS]]
    tgt = pad([[BOS, 30, 31, 32, EOS], [BOS, 33, EOS]])
    return Batch(src=src, tgt_in=tgt[:, :-1], tgt_out=tgt[:, 1:], src_next=torch.tensor([1, 0]),
                 extras=TargetConcatRows(pad([c if o else [] for c, o in zip(concat, on, strict=True)] + [[PAD]])[:2],
                                         torch.tensor([1, 0])))


def monolingual_twin(bilingual: HanoiT, **spec) -> HanoiT:
    """The monolingual model with the bilingual one's shared weights (its first three segment rows)."""
    mono = model(**spec)
    state = {k: (v[:3] if k == "segment.weight" else v) for k, v in bilingual.state_dict().items()
             if k in mono.state_dict()}
    mono.load_state_dict(state, strict=True)
    return mono


def test_gate_zero_is_the_monolingual_model_exactly():
    """c = 0: γ = 0 at every position, so the logits are the monolingual model's bit for bit, target context
    or not."""
    net = model(bilingual=True, gate_scale=0.0, src_next_sentences=1)
    mono = monolingual_twin(net, src_next_sentences=1)
    with torch.no_grad():
        expected = mono(batch()).logits
        assert torch.equal(net(batch()).logits, expected)
        assert torch.equal(net(replace(batch(), extras=None)).logits, expected)


def test_a_row_without_target_context_reads_as_the_monolingual_model():
    """Row 1 has no target concatenation (an L_m row of eq. 13): its logits are the monolingual model's exactly,
    whatever row 0 (which has one, and so reads differently) does."""
    net = model(bilingual=True, src_next_sentences=1)
    mono = monolingual_twin(net, src_next_sentences=1)
    with torch.no_grad():
        mixed = net(batch(on=(True, False))).logits
        plain = mono(batch()).logits
    assert torch.equal(mixed[1], plain[1])
    assert not torch.allclose(mixed[0], plain[0], atol=1e-3)


@pytest.mark.parametrize("kind, width", [("vector", 16), ("scalar", 1)])
def test_gate_shapes_bounds_and_equation(kind, width):
    torch.manual_seed(0)
    gate = ContextGate(16, kind, 0.4)
    zs, zt = torch.randn(3, 5, 16), torch.randn(3, 5, 16)
    on = torch.tensor([True, False, True])
    g = gate.gamma(zs, zt, on)
    assert g.shape == (3, 5, width)
    assert (g[on] > 0).all() and (g[on] < 0.4).all() and (g[~on] == 0).all()   # γ in (0, c); off rows 0
    expected = 0.4 * torch.sigmoid(zs @ gate.source.weight.T + gate.source.bias + zt @ gate.target.weight.T)
    torch.testing.assert_close(g[on], expected[on])                         # eq. 9
    torch.testing.assert_close(gate(zs, zt, on), (1 - g) * zs + g * zt)     # eq. 10
    assert torch.equal(gate(zs, zt, on)[1], zs[1])


def test_the_target_stream_has_segments_three_and_four():
    concat = torch.tensor([[20, BRK, 21, 22, BRK, 11, EOS]])
    _, seg = part_layout(concat, BRK, torch.tensor([1]))
    assert seg.tolist() == [[PREVIOUS, PREVIOUS, NEXT, NEXT, NEXT, CURRENT, CURRENT]]
    assert target_segments(seg, CURRENT).tolist() == [[TARGET_PREVIOUS] * 2 + [TARGET_NEXT] * 3 + [CURRENT] * 2]
    assert model(bilingual=True).segment.num_embeddings == 5 and model().segment.num_embeddings == 3


def test_kept_shares_per_side_count_only_rows_with_target_context():
    net = model(bilingual=True, src_next_sentences=1)
    with torch.no_grad():
        both = net.encode(batch()).loss_terms
        one = net.encode(batch(on=(True, False))).loss_terms
    assert set(both) == set(net.loss_term_names) == {"kept_context_layer2", "kept_target_context_layer2"}
    assert both["kept_target_context_layer2"].count == 6 + 3                # context tokens, <brk> included
    assert one["kept_target_context_layer2"].count == 6                     # row 1 has none
    assert both["kept_context_layer2"].count == one["kept_context_layer2"].count == 6 + 2
    assert one["kept_target_context_layer2"].sum <= 6


def test_separate_encoder_has_its_own_stack():
    shared, own = model(bilingual=True), model(bilingual=True, share_encoder=False)
    assert shared.target_layers is None and len(own.target_layers) == 2
    assert own.num_parameters() > shared.num_parameters()


def test_a_bilingual_model_needs_a_joint_vocabulary():
    cfg = validate_recipe({"model": {**TINY, "family": "hanoit", "bilingual": True}}).model
    with pytest.raises(CtxmtError, match="--joint"):
        build_model(cfg, VocabInfo(src_size=40, tgt_size=40, joint=False))
    with pytest.raises(CtxmtError, match="--joint"):
        HanoiT.resolve(cfg, {"joint": False})
    assert HanoiT.resolve(cfg, {"joint": True}) is cfg


def test_incremental_decoding_equals_the_full_pass_with_a_row_without_target_context():
    """A row whose target memory is empty decodes step by step exactly as the full pass computes it (the core
    contract on the bilingual variants covers rows that all have one)."""
    net = model(bilingual=True, src_next_sentences=1)
    b = batch(on=(True, False))
    with torch.no_grad():
        full = net(b).logits                                                # (B, T, V)
        state = net.init_state(net.encode(b), Batch(src=b.src, tgt_sentences=torch.ones(2, dtype=torch.long)))
        token, steps = state.pending, []
        for t in range(full.size(1)):
            logits, state = net.decode_step(token, state)
            steps.append(logits)
            token = b.tgt_in[:, t + 1] if t + 1 < b.tgt_in.size(1) else token
    stepped = torch.stack(steps, 1)
    real = b.tgt_out != PAD
    torch.testing.assert_close(stepped[real], full[real], atol=1e-5, rtol=1e-5)
