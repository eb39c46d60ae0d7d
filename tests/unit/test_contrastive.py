"""Contrastive scorer: forced decoding equals forward, batching/order invariance, group spans, tie rules."""

import random

import numpy as np
import pytest
import torch

from ctxmt_cli.config import validate_recipe
from ctxmt_cli.core.batch import VocabInfo
from ctxmt_cli.data.batching import collate
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.evaluate.contrastive import candidate_rows, decisions, score_testset, summarize
from ctxmt_cli.evaluate.contrastive_report import check_language_pair
from ctxmt_cli.evaluate.testsets import ContrastiveItem, TestSet, scores_lines
from ctxmt_cli.models.families import build_model
from tests.unit.tiny_text import sentence

TINY = {"preset": None, "d_model": 32, "ffn_dim": 64, "heads": 4, "encoder_layers": 1, "decoder_layers": 1}


def make_model(tokenizer, context: int):
    torch.manual_seed(0)
    spec = {"family": "sentence"} if context == 0 else {
        "family": "concat", "shift": 2, "segment": "learned", "src_context_sentences": context,
        "tgt_context_sentences": context}
    cfg = validate_recipe({"model": {**TINY, **spec}}).model
    vocab = VocabInfo(src_size=tokenizer.src_vocab_size, tgt_size=tokenizer.tgt_vocab_size, brk=tokenizer.brk_id)
    return build_model(cfg, vocab).eval()


def make_set(n_items=12, groups=False, seed=1, tie_rule="strict") -> TestSet:
    rng = random.Random(seed)
    items = []
    for i in range(n_items):
        k = rng.randint(0, 3)
        cands = [sentence(rng) for _ in range(rng.randint(2, 3))]
        item = ContrastiveItem([sentence(rng) for _ in range(k)], sentence(rng), [sentence(rng) for _ in range(k)],
                               cands, correct=rng.randrange(len(cands)),
                               tags={"phenomenon": f"p{i % 2}", "distance": k})
        if groups:
            item.candidate_contexts = [[sentence(rng) for _ in range(k)] for _ in cands]
        items.append(item)
    return TestSet(name="toy", kind="jsonl", items=items, tie_rule=tie_rule,
                   groupings=("phenomenon", "phenomenon/distance"))


def forward_logprob(model, tok, src_sents, tgt_sents, last=1) -> tuple[float, int]:
    """Reference: one unbatched forward pass, log-prob of the last ``last`` target sentences."""

    def window(side: str, sentences: list[str]) -> np.ndarray:
        """The sentences joined by <brk>, closed by </s>."""
        encode = getattr(tok, f"encode_{side}")
        context = sum(([*encode(s), tok.brk_id] for s in sentences[:-1]), [])
        return np.asarray(context + encode(sentences[-1]) + [tok.eos_id])

    batch = collate([window("src", src_sents)], [window("tgt", tgt_sents)], tok.pad_id, tok.bos_id)
    with torch.no_grad():
        lp = model(batch).logits.log_softmax(-1)[0].gather(-1, batch.tgt_out[0].unsqueeze(-1)).squeeze(-1)
    out = batch.tgt_out[0].tolist()
    brks = [i for i, t in enumerate(out) if t == tok.brk_id]
    start = brks[-last] + 1 if len(brks) >= last else 0
    return float(lp[start:].sum()), len(out) - start


@pytest.mark.parametrize("context", [0, 2])
@pytest.mark.parametrize("max_tokens", [200, 1])   # 1: one row per batch, so no batch shares a source row
def test_scores_equal_an_unbatched_forward_pass(tokenizer, context, max_tokens):
    model, ts = make_model(tokenizer, context), make_set()
    scores = score_testset(model, tokenizer, ts, normalize="none", max_tokens=max_tokens)
    for item, row in zip(ts.items, scores, strict=True):
        for k, cand in enumerate(item.candidates):
            src = item.src_context[len(item.src_context) - context:] if context else []
            tgt = item.tgt_context[len(item.tgt_context) - context:] if context else []
            ref, _ = forward_logprob(model, tokenizer, src + [item.src], tgt + [cand])
            assert row[k] == pytest.approx(ref, abs=1e-4)


def test_batch_budget_and_item_order_do_not_change_scores(tokenizer):
    model, ts = make_model(tokenizer, 2), make_set(groups=True)
    small = score_testset(model, tokenizer, ts, max_tokens=64)
    large = score_testset(model, tokenizer, ts, max_tokens=100_000)
    reversed_set = TestSet("toy", "jsonl", ts.items[::-1])
    backwards = score_testset(model, tokenizer, reversed_set, max_tokens=300)[::-1]
    np.testing.assert_allclose(np.concatenate(small), np.concatenate(large), atol=1e-5)
    np.testing.assert_allclose(np.concatenate(small), np.concatenate(backwards), atol=1e-5)


def test_mean_is_sum_over_scored_tokens(tokenizer):
    model, ts = make_model(tokenizer, 2), make_set(n_items=4)
    total = score_testset(model, tokenizer, ts, normalize="none")
    mean = score_testset(model, tokenizer, ts, normalize="mean")
    for item, t_row, m_row in zip(ts.items, total, mean, strict=True):
        for k, cand in enumerate(item.candidates):
            n_tokens = len(tokenizer.encode_tgt(cand)) + 1  # + </s>
            assert m_row[k] == pytest.approx(t_row[k] / n_tokens, rel=1e-5)


def test_group_span_covers_every_sentence(tokenizer):
    """span=all: one window pass when the model sees the whole group, else each sentence with its own context."""
    ts = make_set(n_items=6, groups=True)
    wide, narrow = make_model(tokenizer, 3), make_model(tokenizer, 0)
    for model, context in ((wide, 3), (narrow, 0)):
        scores = score_testset(model, tokenizer, ts, normalize="none", span="all")
        current = score_testset(model, tokenizer, ts, normalize="none", span="current")
        for item, row, cur in zip(ts.items, scores, current, strict=True):
            for k, cand in enumerate(item.candidates):
                src, tgt = item.src_context + [item.src], item.candidate_contexts[k] + [cand]
                if context:
                    ref = forward_logprob(model, tokenizer, src, tgt, last=len(tgt))[0]
                    ref_current = forward_logprob(model, tokenizer, src, tgt)[0]
                else:
                    ref = sum(forward_logprob(model, tokenizer, [s], [t])[0] for s, t in zip(src, tgt, strict=True))
                    ref_current = forward_logprob(model, tokenizer, [src[-1]], [tgt[-1]])[0]
                assert row[k] == pytest.approx(ref, abs=1e-4)
                assert cur[k] == pytest.approx(ref_current, abs=1e-4)


def test_rows_keep_context_oldest_first_and_stop_at_the_window():
    item = ContrastiveItem(["s1", "s2", "s3"], "s4", ["t1", "t2", "t3"], ["c", "x"],
                           candidate_contexts=[["a1", "a2", "a3"], ["b1", "b2", "b3"]])
    assert candidate_rows(item, 0, 2, 2, "current") == [(["s2", "s3", "s4"], ["a2", "a3", "c"], 1)]
    assert candidate_rows(item, 1, 3, 3, "all") == [(["s1", "s2", "s3", "s4"], ["b1", "b2", "b3", "x"], 4)]
    assert candidate_rows(item, 1, 1, 1, "all") == [
        (["s1"], ["b1"], 1), (["s1", "s2"], ["b1", "b2"], 1), (["s2", "s3"], ["b2", "b3"], 1),
        (["s3", "s4"], ["b3", "x"], 1)]
    plain = ContrastiveItem(["s1", "s2"], "s3", ["t1", "t2"], ["c", "x"])
    assert candidate_rows(plain, 1, 0, 0, "all") == [(["s3"], ["x"], 1)]


def test_tie_rules():
    items = [ContrastiveItem([], "s", [], ["a", "b", "c"], correct=c) for c in (0, 1, 1, 2)]
    scores = [[-1.0, -1.0, -2.0], [-1.0, -1.0, -3.0], [-2.0, -1.0, -1.0], [-3.0, -2.0, -1.0]]
    strict = decisions(TestSet("t", "jsonl", items, tie_rule="strict"), scores)
    first = decisions(TestSet("t", "jsonl", items, tie_rule="first_index"), scores)
    assert strict == [False, False, False, True]      # ties lose (ContraPro)
    assert first == [True, False, True, True]          # argmax, first index on ties (Voita)


def test_summary_groupings_and_scores_file():
    items = [ContrastiveItem([], "s", [], ["a", "b"], tags={"phenomenon": p, "distance": d})
             for p, d in (("x", 1), ("x", 2), ("y", 1), ("y", 10))]
    ts = TestSet("t", "jsonl", items, groupings=("phenomenon", "distance", "phenomenon/distance"))
    summary = summarize(ts, [True, False, True, True])
    assert summary["accuracy"] == 0.75 and summary["n"] == 4
    assert summary["by"]["phenomenon"] == {"x": 0.5, "y": 1.0}
    assert list(summary["by"]["distance"]) == ["1", "2", "10"]
    assert summary["by"]["phenomenon/distance"]["x/2"] == 0.0
    assert scores_lines([[-0.5, -1.25], [-2.0, 0.0]]) == ["0.500000", "1.250000", "2.000000", "0.000000"]


def test_language_pair_mismatch_is_refused(tokenizer):
    ts = TestSet("deixis_test", "voita", [], src_lang="en", tgt_lang="ru")
    tokenizer.src_lang, tokenizer.tgt_lang = "en", "de"
    try:
        with pytest.raises(CtxmtError, match="en->ru.*en->de"):
            check_language_pair(ts, tokenizer, "model.pt")
        tokenizer.tgt_lang = "ru"
        check_language_pair(ts, tokenizer, "model.pt")
    finally:
        tokenizer.src_lang, tokenizer.tgt_lang = "src", "tgt"


def test_a_model_reading_next_sentences_is_scored_without_them(tokenizer):
    """Contrastive sets carry previous context only: every source row says 0 next sentences (shared rows too)."""
    model, ts = make_model(tokenizer, 2), make_set(groups=True)
    plain = score_testset(model, tokenizer, ts, max_tokens=100_000)
    model.cfg = model.cfg.model_copy(update={"src_next_sentences": 1})   # concat ignores the counts: a spy
    seen, real = [], model.target_logprobs
    model.target_logprobs = lambda batch, mask: (seen.append(batch), real(batch, mask))[1]
    scores = score_testset(model, tokenizer, ts, max_tokens=100_000)
    assert any(b.src_index is not None for b in seen)                  # sources shared between candidates
    assert all(b.src_next.tolist() == [0] * b.src.size(0) for b in seen)
    np.testing.assert_allclose(np.concatenate(scores), np.concatenate(plain), atol=1e-6)
