"""Beam/greedy search properties on tiny random models of every family (sentence, concat)."""

import pytest
import torch

from ctxmt_cli.config import validate_recipe
from ctxmt_cli.core.batch import Batch, Fold, VocabInfo
from ctxmt_cli.decode.search import beam_search, greedy_search
from ctxmt_cli.models.families import build_model
from tests.unit.biased_model import Biased

BRK, EOS, BOS, PAD = 4, 3, 2, 0
VOCAB = VocabInfo(src_size=40, tgt_size=40)
TINY = {"preset": None, "d_model": 32, "ffn_dim": 64, "heads": 4, "encoder_layers": 2, "decoder_layers": 2}
FAMILIES = {
    "sentence": {"family": "sentence"},
    "concat": {"family": "concat", "shift": 3, "segment": "learned", "persistent": True},
}


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/unit/conftest.py


def make_model(family: str, seed: int = 0, eos_bias: float = 2.0):
    torch.manual_seed(seed)
    cfg = validate_recipe({"model": {**TINY, **FAMILIES[family]}}).model
    model = build_model(cfg, VOCAB).eval()
    with torch.no_grad():  # larger weights than the init: peaked, varied outputs instead of one repeated token
        for p in model.parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.35)
    return Biased(model, eos=eos_bias).eval()


def row(*ids):
    return torch.tensor(list(ids) + [EOS])


def pad(rows, value=PAD):
    out = torch.full((len(rows), max(len(r) for r in rows)), value, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, : len(r)] = r
    return out


SOURCES = [row(7, 8, BRK, 9, 10, 11, 12), row(13, 14), row(15, 16, 17, BRK, 18, BRK, 19, 20, 21, 22, 23)]
PREFIXES = [torch.tensor([BOS, 30, 31, BRK, 32, BRK]), torch.tensor([BOS]), torch.tensor([BOS, 33, BRK])]


def batch_of(indices, prefix=False):
    src = pad([SOURCES[i] for i in indices])
    tgt = pad([PREFIXES[i] for i in indices]) if prefix else None
    return Batch(src=src, tgt_prefix=tgt)


def forward_logprob(model, src, prefix, tokens, lenpen):
    """Length-normalised log-prob of ``tokens`` + </s> after the forced ``prefix``, by a full forward pass."""
    tgt_in = torch.cat([prefix, torch.tensor(tokens, dtype=torch.long)]).unsqueeze(0)
    with torch.no_grad():
        logits = model(Batch(src=src.unsqueeze(0), tgt_in=tgt_in)).logits[0].float()
    lprobs = torch.log_softmax(logits, -1)[len(prefix) - 1:]                 # (L+1, V)
    labels = torch.tensor(tokens + [EOS])
    total = lprobs.gather(1, labels.unsqueeze(1)).sum().item()
    return total / (len(tokens) + 1) ** lenpen


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_greedy_with_cache_equals_full_forward_argmax_loop(family):
    model = make_model(family, eos_bias=1.5)
    batch = batch_of([0, 1, 2], prefix=True)
    hyps = greedy_search(model, batch, max_len=10, banned=[BRK])
    for i, hyp in enumerate(hyps):
        src, prefix, tokens = SOURCES[i].unsqueeze(0), PREFIXES[i], []
        for _ in range(11):
            tgt_in = torch.cat([prefix, torch.tensor(tokens, dtype=torch.long)]).unsqueeze(0)
            with torch.no_grad():
                logits = model(Batch(src=src, tgt_in=tgt_in)).logits[0, -1].float()
            logits[[PAD, BOS, BRK]] = float("-inf")
            if not tokens:
                logits[EOS] = float("-inf")                                  # min_len = 1
            if len(tokens) == 10:
                break
            nxt = int(logits.argmax())
            if nxt == EOS:
                break
            tokens.append(nxt)
        assert hyp.tokens == tokens


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_row_alone_equals_row_in_padded_batch(family):
    model = make_model(family)
    together = beam_search(model, batch_of([1, 0, 2]), beam=4, max_len=15)
    alone = beam_search(model, batch_of([1]), beam=4, max_len=15)
    assert together[0].tokens == alone[0].tokens
    assert together[0].score == pytest.approx(alone[0].score, abs=1e-4)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_forced_prefixes_of_different_lengths_equal_rows_alone(family):
    model = make_model(family, eos_bias=1.0)
    together = beam_search(model, batch_of([0, 1, 2], prefix=True), beam=3, max_len=12, banned=[BRK])
    for i in range(3):
        alone = beam_search(model, batch_of([i], prefix=True), beam=3, max_len=12, banned=[BRK])
        assert together[i].tokens == alone[0].tokens
        assert together[i].score == pytest.approx(alone[0].score, abs=1e-4)


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("lenpen", [0.0, 0.6, 1.0])
def test_best_score_equals_forward_log_prob(family, lenpen):
    model = make_model(family, eos_bias=1.0)
    hyps = beam_search(model, batch_of([0, 1, 2], prefix=True), beam=4, lenpen=lenpen, max_len=12, banned=[BRK])
    for i, hyp in enumerate(hyps):
        expected = forward_logprob(model, SOURCES[i], PREFIXES[i], hyp.tokens, lenpen)
        assert hyp.score == pytest.approx(expected, abs=1e-4)
        assert hyp.steps == len(hyp.tokens) + 1


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_banned_tokens_never_appear(family):
    model = make_model(family, eos_bias=0.0)
    plain = beam_search(model, batch_of([0, 1, 2]), beam=4, max_len=10)
    used = sorted({t for h in plain for t in h.tokens})
    banned = used[:4] + [BRK]
    hyps = beam_search(model, batch_of([0, 1, 2]), beam=4, max_len=10, banned=banned)
    for hyp in hyps:
        assert not set(hyp.tokens) & set(banned + [PAD, BOS, EOS])
        assert len(hyp.tokens) >= 1


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_max_len_per_row_and_min_len(family):
    model = make_model(family, eos_bias=-20.0)                             # never wants to stop
    limits = torch.tensor([2, 5, 0])
    hyps = beam_search(model, batch_of([0, 1, 2]), beam=3, max_len=limits, min_len=1)
    assert [len(h.tokens) for h in hyps] == [2, 5, 0]
    greedy = greedy_search(model, batch_of([0, 1, 2]), max_len=limits)
    assert [len(h.tokens) for h in greedy] == [2, 5, 0]
    eager = make_model(family, eos_bias=8.0)                              # always wants to stop at once
    hyps = beam_search(eager, batch_of([0, 1, 2]), beam=3, max_len=10, min_len=3)
    assert all(len(h.tokens) == 3 for h in hyps)


def test_finished_rows_leave_the_state():
    model = make_model("sentence", eos_bias=-20.0)
    limits = torch.tensor([1, 8, 3])
    beam_search(model, batch_of([0, 1, 2]), beam=2, max_len=limits)
    # beams × active rows per step: the first step runs one copy of each row's prefix, then 2 beams each; rows end
    # at steps 1, 3 and 8 (forced), then leave the state
    assert model.calls == [3, 6, 4, 4, 2, 2, 2, 2, 2]


def test_first_step_extends_only_one_copy_of_the_prefix():
    # Internal, on purpose: the best hypothesis alone cannot show duplicated beams. The first step's state holds one
    # row per sentence (test_finished_rows_leave_the_state counts them); its 2k candidates are distinct tokens.
    from ctxmt_cli.decode.search import _select

    lprobs = torch.log_softmax(torch.randn(3, 40), -1)                     # 3 rows, one live beam each
    top_s, src_beam, tok = _select(torch.zeros(3, 1), lprobs, 8)
    assert (src_beam == 0).all() and top_s.shape == (3, 8)
    for r in range(3):
        assert len(set(tok[r].tolist())) == 8                              # 2k distinct candidates


def test_a_vocabulary_smaller_than_the_candidates_pads_them_with_minus_infinity():
    from ctxmt_cli.decode.search import _select

    lprobs = torch.log_softmax(torch.randn(2, 3), -1)                      # V = 3 < 2k = 8
    top_s, src_beam, tok = _select(torch.zeros(2, 1), lprobs, 8)
    assert top_s.shape == src_beam.shape == tok.shape == (2, 8)
    assert torch.isfinite(top_s[:, :3]).all() and torch.isneginf(top_s[:, 3:]).all()
    assert sorted(tok[0, :3].tolist()) == [0, 1, 2]


def test_beams_share_cross_attention_rows_and_decode_as_copies():
    """Expanding to beams copies no encoder keys/values; folded beams decode exactly as per-row copies."""
    torch.manual_seed(0)
    model = build_model(validate_recipe({"model": {**TINY, "family": "sentence"}}).model, VOCAB).eval()
    batch = Batch(src=torch.tensor([[7, 8, 9, EOS], [10, 11, EOS, PAD]]))
    with torch.no_grad():
        state = model.init_state(model.encode(batch), batch)
        beams = model.reorder_state(state, torch.arange(2).repeat_interleave(3))
        assert beams.cross.k[0] is state.cross.k[0] and beams.cross.for_rows()[3] == Fold(3)
        folded, _ = model.decode_step(beams.pending, beams)                 # (6, V)
        swapped = model.reorder_state(beams, torch.tensor([3, 4, 5, 0, 1, 2]))  # sentences swap places
        assert swapped.cross.for_rows()[3] == Fold()                        # gathered per row
        gathered, _ = model.decode_step(swapped.pending, swapped)
    torch.testing.assert_close(gathered, folded[[3, 4, 5, 0, 1, 2]], atol=1e-5, rtol=1e-5)


def test_a_finished_sentence_leaves_an_empty_slot_not_a_copy():
    """A sentence leaving the search leaves its stored keys as an empty slot until at most COMPACT_AT of the stored
    rows are used (nothing copied); the remaining beams decode exactly as before, and once compacted too."""
    torch.manual_seed(0)
    model = build_model(validate_recipe({"model": {**TINY, "family": "sentence"}}).model, VOCAB).eval()
    batch = Batch(src=torch.tensor([[7, 8, 9, EOS], [10, 11, EOS, PAD], [12, EOS, PAD, PAD]]))
    with torch.no_grad():
        beams = model.reorder_state(model.init_state(model.encode(batch), batch), torch.arange(3).repeat_interleave(2))
        full, _ = model.decode_step(beams.pending, beams)                     # (6, V)
        holed = model.reorder_state(beams, torch.tensor([0, 1, 4, 5]))        # the second sentence leaves
        fold = holed.cross.for_rows()[3]
        assert holed.cross.k[0] is beams.cross.k[0] and fold.size == 2 and fold.slots.tolist() == [0, 1, 4, 5]
        kept, _ = model.decode_step(holed.pending, holed)
        compact = model.reorder_state(holed, torch.tensor([2, 3]))            # 1 of 3 stored rows used: compacted
        assert compact.cross.k[0].size(0) == 1 and compact.cross.for_rows()[3] == Fold(2)
        last, _ = model.decode_step(compact.pending, compact)
    torch.testing.assert_close(kept, full[[0, 1, 4, 5]], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(last, full[[4, 5]], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_nbest_lists_hold_distinct_finished_hypotheses_best_first(family):
    model = make_model(family, eos_bias=1.0)
    batch = batch_of([0, 1, 2], prefix=True)
    best = beam_search(model, batch, beam=4, max_len=12, banned=[BRK])
    for n in (1, 3, 4):
        hyps = beam_search(model, batch, beam=4, max_len=12, banned=[BRK], nbest=n)
        for i, (hyp, one) in enumerate(zip(hyps, best, strict=True)):
            found = [hyp, *hyp.alternatives]
            assert len(found) == n and hyp.tokens == one.tokens and hyp.score == one.score
            assert [h.score for h in found] == sorted((h.score for h in found), reverse=True)
            assert len({tuple(h.tokens) for h in found}) == n
            for h in found:                                                  # each one's own forward-pass score
                assert h.score == pytest.approx(forward_logprob(model, SOURCES[i], PREFIXES[i], h.tokens, 0.6),
                                                abs=1e-4)
                assert h.logprob == pytest.approx(h.score * (len(h.tokens) + 1) ** 0.6, abs=1e-4)
    with pytest.raises(ValueError, match="nbest=5"):
        beam_search(model, batch, beam=4, nbest=5)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_log_probabilities_are_the_unnormalised_scores(family):
    model = make_model(family, eos_bias=1.0)
    batch = batch_of([0, 1, 2], prefix=True)
    for i, hyp in enumerate(greedy_search(model, batch, max_len=12, banned=[BRK], lenpen=0.6)):
        assert hyp.logprob == pytest.approx(hyp.score * (len(hyp.tokens) + 1) ** 0.6, abs=1e-4)
        assert hyp.logprob == pytest.approx(forward_logprob(model, SOURCES[i], PREFIXES[i], hyp.tokens, 0.0), abs=1e-4)
    for hyp in beam_search(model, batch, beam=3, max_len=12, banned=[BRK], lenpen=0.0):
        assert hyp.logprob == pytest.approx(hyp.score, abs=1e-5) and hyp.alternatives == []


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_sampling_follows_the_seed_the_bans_and_the_model(family):
    """Sampling (a generator): the same seed gives the same tokens, another seed others; banned tokens never
    appear; each hypothesis' log-probability is the model's for the tokens drawn (a forward pass)."""
    model = make_model(family, eos_bias=0.0)
    def draw(seed: int, banned=()):
        return greedy_search(model, batch_of([0, 1, 2]), 8, banned, generator=torch.Generator().manual_seed(seed))

    first, again = draw(1), draw(1)
    assert [h.tokens for h in first] == [h.tokens for h in again]
    others = [[h.tokens for h in draw(seed)] for seed in range(2, 7)]
    assert any(o != [h.tokens for h in first] for o in others)
    greedy = [h.tokens for h in greedy_search(model, batch_of([0, 1, 2]), 8)]
    assert any(o != greedy for o in others)                        # not the argmax path
    used = sorted({t for h in first for t in h.tokens})
    for hyp in draw(1, banned=used[:3] + [BRK]):
        assert not set(hyp.tokens) & set(used[:3] + [BRK, PAD, BOS])
    for i, hyp in enumerate(first):
        if len(hyp.tokens) < 8:                                    # ended with </s>: its log-prob counts it
            expected = forward_logprob(model, SOURCES[i], torch.tensor([BOS]), hyp.tokens, 0.0)
            assert hyp.logprob == pytest.approx(expected, abs=1e-4)


@pytest.mark.parametrize("vocab", [16000, 8000, 32000])
@pytest.mark.parametrize("beam", [1, 4, 5])
def test_blockwise_top_candidates_equal_one_topk(vocab, beam):
    """The beam step's two-pass top-2k (blocks of the beam × vocabulary row) picks what one ``topk`` picks,
    with banned (-inf) entries, whole -inf beams (the first step) and a row with fewer finite candidates than 2k."""
    from ctxmt_cli.decode.search import _top

    g = torch.Generator().manual_seed(vocab + beam)
    rows, n = 6, 2 * beam
    flat = torch.randn(rows, beam * vocab, generator=g)                     # distinct values: one order
    flat[:, torch.randint(0, beam * vocab, (200,), generator=g)] = float("-inf")   # banned tokens
    flat.view(rows, beam, vocab)[0, 1:] = float("-inf")                      # the first step: beam 0 only
    flat[1] = float("-inf")
    flat[1, [5, 777]] = torch.tensor([0.5, 1.5])                           # fewer finite values than n
    values, index = _top(flat, n)
    want_values, want_index = flat.topk(n, dim=1)
    assert torch.equal(values, want_values)
    finite = torch.isfinite(want_values)
    assert torch.equal(index[finite], want_index[finite])
    assert torch.equal(flat.gather(1, index), values)                      # every index points at its value
