"""HanoiT (Yang et al.): the selection rule of eqs. 4-7 on hand-computed attention, the embedding's parts, the
between-layers hook as the model uses it, and dropping = masking. The core contract: tests/unit/test_contract.py."""

from __future__ import annotations

import pytest
import torch

from ctxmt_cli.config import validate_recipe
from ctxmt_cli.core.batch import Batch, EncoderOut, VocabInfo
from ctxmt_cli.core.positions import current_sentence_mask
from ctxmt_cli.core.probe import Collect
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.models.families import build_model
from ctxmt_cli.models.hanoit.model import CURRENT, NEXT, PREVIOUS, part_layout, rule_on_current, select_context

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/unit/conftest.py

BRK, EOS, BOS, PAD = 4, 3, 2, 0
VOCAB = VocabInfo(src_size=40, tgt_size=40)
TINY = {"preset": None, "d_model": 32, "ffn_dim": 64, "heads": 4, "decoder_layers": 2, "dropout": 0.0}

# One window, 8 tokens: context c0 c1 c2 c3 <brk>, current x0 x1 </s> (p = 3). Two heads; the rows of the
# current queries, in 1/16 (keys c0 c1 c2 c3 brk x0 x1 eos); the context queries' rows are uniform (2/16 each).
HEAD_1 = [[6, 2, 0, 0, 0, 4, 2, 2],       # x0
          [2, 0, 2, 0, 4, 4, 2, 2],       # x1
          [2, 2, 2, 2, 0, 4, 3, 1]]       # </s>
HEAD_2 = [[2, 0, 4, 0, 2, 4, 2, 2],
          [0, 4, 0, 0, 4, 4, 2, 2],
          [2, 0, 6, 0, 0, 4, 3, 1]]
# Head average a (eq. 4), in 1/16:
#   x0:   4 1 2 0 1 | 4 2 2   sum over the other current tokens (x1, </s>) = 4, abar = 4/3 (eq. 5, divisor p = 3)
#   x1:   1 2 1 0 4 | 4 2 2   others (x0, </s>) = 6, abar = 2
#   </s>: 2 1 4 1 0 | 4 3 1   others (x0, x1) = 7, abar = 7/3
# a_ik >= abar_i (eq. 6, counted over the current queries):
#   x0 -> c0 (4), c2 (2); x1 -> c1 (2 = abar: the tie counts), brk (4); </s> -> c2 (4)
#   s = c0 1, c1 1, c2 2, c3 0, brk 1
# eq. 7, keep iff s_k >= q * p: q = 0.3 -> 0.9 -> s >= 1: c0 c1 c2 brk (c3 dropped); q = 0.5 -> 1.5 -> s >= 2: c2;
# q = 1 -> 3: none. With p - 1 as the divisor, abar of x1 would be 3 and c1 would not count (no tie).
CONTEXT, CURRENT_TOKENS = 5, 3
KEPT = {0.3: [0, 1, 2, 4], 0.5: [2], 1.0: [], 0.01: [0, 1, 2, 4]}


def hand_attention(pad: int = 0, pad_value: float = 0.0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(heads (1, 2, S, S), alive (1, S), current (1, S)) of the window above, with ``pad`` padded positions whose
    rows hold ``pad_value`` (what a padded query computes is never read) and whose columns are 0."""
    s = CONTEXT + CURRENT_TOKENS
    heads = torch.full((1, 2, s + pad, s + pad), 0.0)
    heads[0, :, :, :s] = 2 / 16                                             # the context queries' rows
    heads[0, 0, CONTEXT:s, :s] = torch.tensor(HEAD_1) / 16
    heads[0, 1, CONTEXT:s, :s] = torch.tensor(HEAD_2) / 16
    heads[0, :, s:, :] = pad_value                                          # padded queries
    alive = torch.arange(s + pad).unsqueeze(0) < s
    current = alive & (torch.arange(s + pad).unsqueeze(0) >= CONTEXT)
    return heads, alive, current


# The rule on the current tokens themselves (the analysis' control), each key without its own query: in 1/16,
#   x0 -> x1 (2 >= 4/3), </s> (2); x1 -> x0 (4 >= 2), </s> (2 = 2, the tie counts); </s> -> x0 (4 >= 7/3), x1 (3)
#   s = x0 2, x1 2, </s> 2 (at most p - 1 = 2): q 0.3 and 0.5 keep all 3, q 1 none (with a_jj counted, all 3).
#   Without </s> (p = 2, abar: x0 2/2 = 1, x1 4/2 = 2): s = x0 1 (from x1), x1 1: q 0.5 keeps both, q 1 none.
#   Eq. 6 over the context queries (uniform rows, abar = (6/16) / 3 = 2/16, every a_ij = 2/16 a tie): s_j = 5.
CONTROL = {("current", True, 0.3): 3, ("current", True, 0.5): 3, ("current", True, 1.0): 0,
           ("current", False, 0.5): 2, ("current", False, 1.0): 0, ("context", True, 1.0): 3}


@pytest.mark.parametrize("queries, eos, q", sorted(CONTROL))
@pytest.mark.parametrize("pad", [0, 2])
def test_the_rule_on_the_current_tokens_is_hand_computed(queries, eos, q, pad):
    heads, alive, current = hand_attention(pad, pad_value=0.5)
    counted = None if eos else current & (torch.arange(alive.size(1)) != CONTEXT + CURRENT_TOKENS - 1)
    kept, total = rule_on_current(heads.mean(1), alive, current, q, queries, counted)
    assert (int(kept), int(total)) == (CONTROL[queries, eos, q], 3 if eos else 2)


def kept_context(keep: torch.Tensor) -> list[int]:
    return [k for k in range(CONTEXT) if keep[0, k]]


@pytest.mark.parametrize("q", sorted(KEPT))
def test_selection_keeps_exactly_the_hand_computed_tokens(q):
    heads, alive, current = hand_attention()
    assert torch.equal(heads[:, :, CONTEXT:].sum(-1), torch.ones(1, 2, CURRENT_TOKENS))   # real distributions
    keep = select_context(heads.mean(1), alive, current, q)                 # the core's head average
    assert kept_context(keep) == KEPT[q]
    assert keep[0, CONTEXT:].all()                                          # the current sentence always stays


def test_padding_and_the_context_queries_change_nothing():
    heads, alive, current = hand_attention()
    base = select_context(heads.mean(1), alive, current, 0.3)
    padded_heads, padded_alive, padded_current = hand_attention(pad=3, pad_value=0.9)
    padded = select_context(padded_heads.mean(1), padded_alive, padded_current, 0.3)
    assert torch.equal(padded[:, :8], base) and not padded[:, 8:].any()
    other = heads.clone()
    other[0, :, :CONTEXT] = torch.rand(2, CONTEXT, 8)                       # context queries are no voters
    assert torch.equal(select_context(other.mean(1), alive, current, 0.3), base)
    together = torch.cat([padded_heads, torch.rand(1, 2, 11, 11)])          # another row beside it
    two = select_context(together.mean(1), torch.cat([padded_alive, torch.ones(1, 11, dtype=torch.bool)]),
                         torch.cat([padded_current, torch.arange(11).unsqueeze(0) >= 6]), 0.3)
    assert torch.equal(two[:1], padded)


def test_a_dropped_token_never_returns():
    heads, alive, current = hand_attention()
    first = select_context(heads.mean(1), alive, current, 0.3)             # c3 dropped
    later = heads.clone()
    later[0, :, CONTEXT:, 3] = 0.5                                          # every current query on c3 (masked keys
    later[0, :, CONTEXT:, :3] = 0.0                                         # cannot get it; a step must not care)
    second = select_context(later.mean(1), first, current, 0.01)
    assert not second[0, 3] and not (second & ~first).any()


def reference(a: torch.Tensor, alive: torch.Tensor, current: torch.Tensor, q: float) -> torch.Tensor:
    """Eqs. 5-7 written out with loops over one row: a (S, S), alive (S,), current (S,)."""
    cur = [i for i in range(a.size(0)) if current[i]]
    return kept_by_loops(a, alive, current, q, cur, cur)


def kept_by_loops(a, alive, current, q, counted: list, rows: list) -> torch.Tensor:
    """Eqs. 5-7 as loops: ā_i over the ``counted`` current tokens (p of them), s_k over the queries ``rows``."""
    p = len(counted)
    keep = alive.clone()
    for k in range(a.size(0)):
        if alive[k] and not current[k]:
            s = sum(1 for i in rows if a[i, k] * p >= sum(a[i, j] for j in counted if j != i))
            keep[k] = s >= q * p - 1e-9
    return keep


def random_rows(seed: int, b: int = 4, s: int = 12):
    """Attention rows over each row's alive keys (softmax of random scores), padding at the right."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(6, s + 1, (b,), generator=g)
    alive = torch.arange(s).unsqueeze(0) < lengths.unsqueeze(1)             # (B, S)
    current = alive & (torch.arange(s).unsqueeze(0) >= (lengths - torch.randint(2, 5, (b,), generator=g)).unsqueeze(1))
    scores = torch.randn(b, s, s, generator=g) * 2
    a = scores.masked_fill(~alive[:, None, :], float("-inf")).softmax(-1)   # (B, S, S)
    return a, alive, current


@pytest.mark.parametrize("seed", range(4))
def test_selection_equals_the_equations_written_out(seed):
    a, alive, current = random_rows(seed)
    for q in (0.1, 0.3, 0.5, 1.0):
        keep = select_context(a, alive, current, q)
        for r in range(a.size(0)):
            assert torch.equal(keep[r], reference(a[r], alive[r], current[r], q)), (seed, q, r)


@pytest.mark.parametrize("seed", range(3))
def test_q_near_zero_keeps_any_attended_token_and_q_one_only_those_all_attend(seed):
    a, alive, current = random_rows(seed)
    p = current.sum(1, keepdim=True).float()                                # (B, 1)
    total = (a * current[:, None, :]).sum(2) - a.diagonal(dim1=1, dim2=2) * current   # (B, S) Σ_{j≠i}
    above = (a * p.unsqueeze(2) >= total.unsqueeze(2)) & current.unsqueeze(2)         # (B, i, k)
    context = alive & ~current
    voters = current.unsqueeze(2).expand_as(above)
    anyone = above.any(1) & context
    everyone = (above | ~voters).all(1) & context
    assert torch.equal(select_context(a, alive, current, 1e-6) & context, anyone)
    assert torch.equal(select_context(a, alive, current, 1.0) & context, everyone)


def test_parts_positions_and_segments():
    src = torch.tensor([[7, 8, BRK, 9, 10, 11, BRK, 12, 13, EOS],
                        [14, 15, 16, EOS, PAD, PAD, PAD, PAD, PAD, PAD],
                        [17, BRK, 18, 19, 20, 21, 22, EOS, PAD, PAD]])
    positions, seg = part_layout(src, BRK, torch.tensor([1, 0, 1]))        # row 0: previous + next; row 2: next
    real = src != PAD
    assert seg[0].tolist() == [PREVIOUS] * 3 + [NEXT] * 4 + [CURRENT] * 3
    assert positions[0].tolist() == [0, 1, 2, 0, 1, 2, 3, 0, 1, 2]
    assert positions[1][real[1]].tolist() == [0, 1, 2, 3] and (seg[1] == CURRENT).all()
    assert seg[2][real[2]].tolist() == [NEXT] * 2 + [CURRENT] * 6
    assert positions[2][real[2]].tolist() == [0, 1, 0, 1, 2, 3, 4, 5]
    no_next, seg0 = part_layout(src, BRK, None)                             # None = previous context only
    assert seg0[0].tolist() == [PREVIOUS] * 7 + [CURRENT] * 3 and no_next[0].tolist()[:7] == list(range(7))


def test_layer_split_must_add_up():
    with pytest.raises(CtxmtError, match=r"unified_layers \(2\) \+ selection_layers \(3\) must equal "
                                         r"encoder_layers \(6\): set encoder_layers: 5"):
        validate_recipe({"model": {"family": "hanoit", "preset": "base", "unified_layers": 2, "selection_layers": 3}})
    with pytest.raises(CtxmtError, match=r"selection_layers \(7\) exceeds encoder_layers \(6\)"):
        validate_recipe({"model": {"family": "hanoit", "preset": "base", "selection_layers": 7}})
    filled = validate_recipe({"model": {"family": "hanoit", "preset": "base"}}).model
    assert (filled.unified_layers, filled.selection_layers) == (1, 5)       # the paper's best split (Table 3)
    all_unified = validate_recipe({"model": {"family": "hanoit", "preset": "base", "unified_layers": 6}}).model
    assert all_unified.selection_layers == 0


# ---- the model ---------------------------------------------------------------------------------------
SRC = [[7, 8, 9, 10, BRK, 11, 12, 13, BRK, 14, 15, 16, EOS], [17, 18, BRK, 19, 20, EOS]]
TGT = [[21, 22, 23, EOS], [24, 25, EOS]]


def make_model(seed: int = 0, **spec):
    torch.manual_seed(seed)
    cfg = validate_recipe({"model": {**TINY, "family": "hanoit", **spec}}).model
    model = build_model(cfg, VOCAB).eval()
    with torch.no_grad():                                                   # peaked attention: selection drops
        for p in model.parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.4)
    return model


def batch_of(rows, src_next=None) -> Batch:
    src = torch.full((len(rows), max(len(SRC[r]) for r in rows)), PAD)
    tgt = torch.full((len(rows), max(len(TGT[r]) for r in rows) + 1), PAD)
    for i, r in enumerate(rows):
        src[i, :len(SRC[r])] = torch.tensor(SRC[r])
        tgt[i, :len(TGT[r]) + 1] = torch.tensor([BOS] + TGT[r])
    return Batch(src=src, tgt_in=tgt[:, :-1], tgt_out=tgt[:, 1:],
                 src_next=None if src_next is None else torch.tensor(src_next))


def physically_dropped(model, batch: Batch) -> tuple[torch.Tensor, int]:
    """Logits of one row whose dropped tokens are removed from the tensor after each selection layer (no mask
    at all), and how many tokens were removed: the reference for the masked run."""
    src = batch.src                                                         # (1, S), no padding
    positions, seg = part_layout(src, BRK, batch.src_next)
    x = model.src_embed(src) * model.scale + model.src_pos(positions, None) + model.segment(seg)   # (1, S, C)
    current = current_sentence_mask(src, BRK)
    for i, layer in enumerate(model.encoder_layers):
        x, w = layer(x, None, True)
        if i in model.between_layers_attention:
            keep = select_context(w.mean(1), torch.ones_like(current), current, model.cfg.q)[0]   # (S,)
            x, current = x[:, keep], current[:, keep]                       # (1, S', C): the others are gone
    enc = EncoderOut(model.encoder_norm(x), torch.ones_like(current), torch.zeros(1, dtype=torch.long))
    hidden, _ = model._decode_full(batch.tgt_in, enc, model.cross_kv(enc))
    return model.output(hidden), src.size(1) - x.size(1)


@pytest.mark.parametrize("spec", [{"encoder_layers": 3, "selection_layers": 2, "q": 0.5},
                                  {"encoder_layers": 2, "selection_layers": 1, "q": 0.7, "src_next_sentences": 1}])
def test_dropping_equals_masking(spec):
    model = make_model(**spec)
    batch = batch_of([0], [1] if spec.get("src_next_sentences") else None)
    with torch.no_grad():
        removed, n_removed = physically_dropped(model, batch)
        cut = model(batch).logits                                           # columns cut by the core
        masked = model(batch, probe=Collect()).logits                       # a probe keeps every column
    assert 0 < n_removed < len(SRC[0]) - 4                                  # some context dropped, not all
    torch.testing.assert_close(cut, removed, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(masked, removed, atol=1e-5, rtol=1e-5)


def test_the_hook_reads_pre_dropout_head_averages_and_masks_only_narrow():
    """In training, with attention dropout, the step gets the probe's (pre-dropout) maps averaged over heads;
    each selection layer's mask lies inside the one before; the decoder's cross-attention sees the last one."""
    model = make_model(encoder_layers=4, selection_layers=3, q=0.5, attention_dropout=0.5).train()
    seen, step = [], model.between_layers

    def recording(layer, states, mask, attention, current):
        narrowed, terms = step(layer, states, mask, attention, current)
        seen.append((layer, attention, mask, narrowed))
        return narrowed, terms

    model.between_layers, probe = recording, Collect()
    model(batch_of([0, 1]), probe=probe)
    assert [s[0] for s in seen] == [0, 1, 2, 3]
    assert seen[0][1] is None and all(s[1] is not None for s in seen[1:])  # only the selection layers' maps
    for layer, attention, mask, _ in seen[1:]:
        torch.testing.assert_close(attention, probe.maps["encoder_self"][layer].mean(1))
        torch.testing.assert_close(attention.sum(-1)[mask], torch.ones(int(mask.sum())))   # no dropout in them
    masks = [s[2] for s in seen] + [seen[-1][3]]
    assert all(not (b & ~a).any() for a, b in zip(masks, masks[1:], strict=False))      # each keeps a subset
    assert not torch.equal(masks[0], masks[-1])
    assert torch.equal(probe.views["cross"][0].key_mask, masks[-1])


def test_kept_shares_are_logged_per_selection_layer():
    model = make_model(encoder_layers=4, selection_layers=3, q=0.5)
    batch = batch_of([0, 1], [1, 0])
    with torch.no_grad():
        out = model(batch)
    assert model.loss_term_names == ("kept_context_layer2", "kept_context_layer3", "kept_context_layer4")
    assert set(out.loss_terms) == set(model.loss_term_names)
    context = (batch.src != PAD) & ~current_sentence_mask(batch.src, BRK)
    shares = [out.loss_terms[n].sum / out.loss_terms[n].count for n in model.loss_term_names]
    assert all(t.weight == 0.0 and t.count == context.sum() for t in out.loss_terms.values())
    assert 1.0 >= shares[0] >= shares[1] >= shares[2] >= 0.0 and shares[2] < 1.0
    assert make_model(encoder_layers=2, unified_layers=2).loss_term_names == ()   # 6+0 style: no selection


def test_measure_only_drops_nothing_and_logs_what_each_layer_would_keep():
    """selection_drops: false: the outputs are those of the same weights without selection layers, and the first
    selection layer logs what the dropping model's first selection layer keeps (same input, same attention)."""
    spec = {"encoder_layers": 4, "selection_layers": 3}
    batch = batch_of([0, 1], [1, 0])
    with torch.no_grad():
        measured = make_model(q=0.5, selection_drops=False, **spec)(batch)
        everything = make_model(encoder_layers=4, unified_layers=4, selection_layers=0)(batch)
        dropping = make_model(q=0.5, **spec)(batch)
    assert torch.allclose(measured.logits, everything.logits, atol=1e-5)          # another attention kernel
    first = "kept_context_layer2"
    assert measured.loss_terms[first].sum == dropping.loss_terms[first].sum < dropping.loss_terms[first].count
    shares = [t.sum / t.count for t in measured.loss_terms.values()]
    assert all(0.0 <= x <= 1.0 for x in shares) and min(shares) < 1.0


def reference_choices(a, alive, current, q, queries: str, eos: bool) -> torch.Tensor:
    """Eqs. 5-7 with the open choices written out for one row: eq. 6's i over the current tokens or the context
    tokens (the printed range [p+1, m]); the current sentence's last token (its </s>) counted in p or not."""
    cur = [i for i in range(a.size(0)) if current[i] and alive[i]]
    counted = cur if eos else cur[:-1]
    rows = counted if queries == "current" else [i for i in range(a.size(0)) if alive[i] and not current[i]]
    return kept_by_loops(a, alive, current, q, counted, rows)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("queries, eos", [("current", True), ("current", False), ("context", True), ("context", False)])
def test_the_open_choices_equal_their_equations_written_out(seed, queries, eos):
    """selection_queries and selection_eos against loops written from eqs. 5-7 for each reading; the default reading
    is select_context's plain one."""
    from ctxmt_cli.models.hanoit.model import last_token

    a, alive, current = random_rows(seed)
    counted = None if eos else current & ~last_token(alive)
    for q in (0.1, 0.3, 0.5):
        keep = select_context(a, alive, current, q, queries, counted)
        for r in range(a.size(0)):
            assert torch.equal(keep[r], reference_choices(a[r], alive[r], current[r], q, queries, eos)), (q, r)
        if (queries, eos) == ("current", True):
            assert torch.equal(keep, select_context(a, alive, current, q))
