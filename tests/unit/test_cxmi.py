"""CXMI (Fernandes et al. 2021): rows with and without context, exact zeros, random context, synthetic tags."""

from __future__ import annotations

import shutil
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from ctxmt_cli.analysis.cxmi import (
    CxmiRequest,
    document_pairs,
    random_donor,
    run_cxmi,
    score_pairs,
    sentence_pairs,
    summarize,
    synthetic_tags,
)
from ctxmt_cli.config import validate_recipe
from ctxmt_cli.core.batch import VocabInfo
from ctxmt_cli.data.batching import collate
from ctxmt_cli.data.store import PreparedData
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.models.families import build_model, context_sentences

TINY = {"preset": None, "d_model": 32, "ffn_dim": 64, "heads": 4, "encoder_layers": 1, "decoder_layers": 1}


@pytest.fixture(scope="module")
def data(prepared):
    """The tiny prepared synthetic corpus, its tokenizer and the valid split's documents."""
    store = PreparedData(prepared)
    return store, document_pairs(store.split("valid"))


def make_model(tokenizer, family: str, **model):
    torch.manual_seed(0)
    spec = {"family": family, **TINY, **model}
    if family == "concat":
        spec = {"shift": 2, "src_context_sentences": 2, "tgt_context_sentences": 2, **spec}
    cfg = validate_recipe({"model": spec}).model
    vocab = VocabInfo(src_size=tokenizer.src_vocab_size, tgt_size=tokenizer.tgt_vocab_size, brk=tokenizer.brk_id)
    return build_model(cfg, vocab).eval()


def test_sentence_model_gets_identical_rows_and_exactly_zero(data, one_thread):
    store, docs = data
    model = make_model(store.tokenizer, "sentence")
    keep = context_sentences(model.cfg)                         # a sentence-level model reads no context
    assert keep == (0, 0)
    with pytest.raises(CtxmtError, match="reads no context"):
        context_sentences(model.cfg, 3)
    pairs = sentence_pairs(docs, keep, 1024)
    assert all(p.plain == p.contextual for p in pairs)
    plain, contextual, tokens = score_pairs(model, store.tokenizer, pairs, max_tokens=256)
    result = summarize(plain, contextual, tokens, pairs, None)
    assert np.array_equal(plain, contextual) and result["n"] == len(pairs) == sum(map(len, docs))
    assert result["cxmi_per_token"] == 0.0 and result["cxmi_per_sentence"] == 0.0 and result["n_with_context"] == 0


def test_gold_context_is_the_previous_sentences_of_the_document(data):
    store, docs = data
    pairs = sentence_pairs(docs, (2, 1), 1024)
    for pair in pairs:
        doc, j = docs[pair.doc], pair.sentence
        src, tgt, scored = pair.contextual
        assert scored == 1 and pair.plain == ([doc[j][0]], [doc[j][1]], 1)
        assert src == [s for s, _ in doc[max(0, j - 2): j + 1]] and tgt == [t for _, t in doc[max(0, j - 1): j + 1]]
        assert pair.context == (min(j, 2), min(j, 1))


def test_window_limit_drops_the_oldest_context_sentences(data):
    _, docs = data
    limit = 2 * max(len(s) for doc in docs for s, _ in doc) + 2          # the current sentence and about one more
    for pair in sentence_pairs(docs, (3, 3), limit):
        for side, count in zip(pair.contextual[:2], pair.context, strict=True):
            assert len(side) == count + 1
            assert sum(map(len, side)) + count + 1 <= limit               # ids + <brk> per context sentence + </s>
    assert any(p.context[0] < min(p.sentence, 3) for p in sentence_pairs(docs, (3, 3), limit))


def test_concat_scores_equal_a_direct_forward_pass_and_context_changes_them(data, one_thread):
    store, docs = data
    tok = store.tokenizer
    model = make_model(tok, "concat")
    pairs = sentence_pairs(docs, context_sentences(model.cfg), 1024)
    plain, contextual, tokens = score_pairs(model, tok, pairs, max_tokens=300)

    def window(sentences):
        """The sentences' ids joined by <brk>, closed by </s>."""
        return np.asarray(sum(([*s, tok.brk_id] for s in sentences[:-1]), []) + [*sentences[-1], tok.eos_id])

    for i in (0, 3, 7):                                               # a document start and two sentences with context
        for row, score in ((pairs[i].plain, plain[i]), (pairs[i].contextual, contextual[i])):
            batch = collate([window(row[0])], [window(row[1])], tok.pad_id, tok.bos_id)
            with torch.no_grad():
                lp = model(batch).logits.log_softmax(-1)[0].gather(-1, batch.tgt_out[0].unsqueeze(-1)).squeeze(-1)
            n = len(row[1][-1]) + 1                                   # the current sentence and </s>
            assert tokens[i] == n and score == pytest.approx(float(lp[-n:].sum()), abs=1e-4)
    start = np.array([p.sentence == 0 for p in pairs])
    assert np.array_equal(plain[start], contextual[start])           # no context: the same row, exactly 0
    result = summarize(plain, contextual, tokens, pairs, None)
    assert result["cxmi_per_sentence"] != 0.0 and result["cxmi_per_token"] != 0.0
    assert result["n_with_context"] == len(pairs) - start.sum() == result["with_context"]["n"]
    # the two normalisations: per sentence = mean of sums, per token = mean of per-sentence means
    delta = contextual - plain
    assert result["cxmi_per_sentence"] == pytest.approx(delta.mean())
    assert result["cxmi_per_token"] == pytest.approx((delta / tokens).mean())


def test_random_context_comes_from_another_document_aligned_and_seeded(data):
    _, docs = data
    donor = random_donor(docs, 3, np.random.default_rng(5))
    for d, doc in enumerate(docs):
        for j in range(len(doc)):
            drawn, n = donor(d, j), min(3, j)
            assert len(drawn) == n
            # consecutive (source, target) pairs of one other document
            others = [other for e, other in enumerate(docs) if e != d]
            assert n == 0 or any(other[s:s + n] == drawn for other in others for s in range(len(other)))

    def rows(seed):
        donor = random_donor(docs, 2, np.random.default_rng(seed))
        return [p.contextual for p in sentence_pairs(docs, (2, 2), 1024, donor)]

    assert rows(1) == rows(1) and rows(1) != rows(2)
    with pytest.raises(CtxmtError, match="another document"):
        random_donor(docs[:1], 2, np.random.default_rng(0))


def test_synthetic_tags_follow_the_generators_events(prepared, data, tmp_path):
    _, docs = data
    fake = SimpleNamespace(dir=prepared, meta={"source": {"format": "synthetic", "seed": 1, "raw": "../raw"}})
    tags = synthetic_tags(fake, "valid", docs)
    assert [len(t) for t in tags] == [len(d) for d in docs]
    flat = [(j, t) for doc in tags for j, t in enumerate(doc)]
    assert all(("context-dependent" in t) != ("other" in t) for _, t in flat)
    assert all(j > 0 for j, t in flat if "context-dependent" in t)    # the antecedent is in the same document
    for j, t in flat:
        distance = [x for x in t if x.startswith("d=")]
        assert not distance or int(distance[0][2:]) <= j
    assert {x for _, t in flat for x in t} >= {"context-dependent", "other", "pronoun", "d=1"}
    # a reference that is not the generator's translation: no tags rather than wrong ones
    raw = tmp_path / "raw"
    (tmp_path / "p").mkdir()
    shutil.copytree(prepared.parent / "raw", raw)
    lines = (raw / "valid.tgt").read_text().split("\n")
    (raw / "valid.tgt").write_text("\n".join(["x " + lines[0]] + lines[1:]))
    assert synthetic_tags(SimpleNamespace(dir=tmp_path / "p", meta=fake.meta), "valid", docs) is None
    assert synthetic_tags(SimpleNamespace(dir=prepared, meta={"source": {"format": "text"}}), "valid", docs) is None


@pytest.mark.parametrize("bad, needle", [({"context": -1}, "context=-1"), ({"max_tokens": 4}, "max_tokens=4")])
def test_bad_requests_fail_before_any_work(tmp_path, bad, needle):
    with pytest.raises(CtxmtError, match=needle):
        run_cxmi(CxmiRequest(checkpoint=tmp_path / "missing.pt", **bad))


def test_next_sentences_come_from_the_document_as_in_training(data, one_thread):
    """A model reading next sentences: the context row's source is its training window (the same tokens and
    next-sentence count, truncation included); the scorer hands the counts to the model as ``Batch.src_next``."""
    from ctxmt_cli.data.windows import WindowDataset, WindowSpec

    store, docs = data
    tok, split = store.tokenizer, store.split("valid")
    for limit in (1024, 40):
        ds = WindowDataset(split, WindowSpec(1, 1, limit, src_next_sentences=2), tok.brk_id, tok.eos_id)
        pairs = sentence_pairs(docs, (1, 1), limit, following=2)
        starts = np.cumsum([0] + [len(d) for d in docs])
        for pair in pairs:
            j = starts[pair.doc] + pair.sentence
            src, _, _, nxt = pair.contextual
            assert nxt == pair.next <= min(2, len(docs[pair.doc]) - 1 - pair.sentence)   # never past the document end
            if j in ds.indices:
                window = sum(([*s, tok.brk_id] for s in src[:-1]), []) + [*src[-1], tok.eos_id]
                assert window == ds.source(j).tolist() and nxt == ds.src_next[j]
    model = make_model(tok, "concat", src_context_sentences=1, tgt_context_sentences=1)
    model.cfg = model.cfg.model_copy(update={"src_next_sentences": 2})   # concat ignores the counts: a spy
    seen, real = [], model.target_logprobs
    model.target_logprobs = lambda batch, mask: (seen.append(batch), real(batch, mask))[1]
    pairs = sentence_pairs(docs, (1, 1), 1024, following=2)
    score_pairs(model, tok, pairs, max_tokens=300)
    counts = [n for b in seen for n in b.src_next.tolist()]
    assert all(len(b.src_next) == len(b.src) for b in seen) and sorted(set(counts)) == [0, 1, 2]
    assert sum(max(p.context) > 0 or p.next > 0 for p in pairs) == summarize(*score_pairs(model, tok, pairs, 300),
                                                                                 pairs, None)["n_with_context"]


def test_random_context_draws_next_sentences_from_another_document(data):
    _, docs = data
    pairs = sentence_pairs(docs, (1, 1), 1024, random_donor(docs, 1, np.random.default_rng(3)), following=1)
    gold = 0
    for pair in pairs:
        doc, j, src = docs[pair.doc], pair.sentence, pair.contextual[0]
        assert pair.next == min(1, len(doc) - 1 - j)                          # as many as the document has
        if pair.next:                                                         # a sentence of another document
            assert any(src[-2] == s for e, other in enumerate(docs) if e != pair.doc for s, _ in other)
            gold += src[-2] == doc[j + 1][0]
    assert gold < sum(p.next for p in pairs) / 4                              # not the document's own next sentence


def test_mbe_is_scored_with_its_previous_sentences_as_a_group(data, one_thread):
    """An mbe model reads no window but the sentences around it as a group: its contextual rows hold every previous
    sentence the window limit allows (as contrastive scoring gives it), so its CXMI measures the group, not a
    context-free row against itself (which was exactly 0)."""
    from ctxmt_cli.analysis.cxmi import cxmi_context

    store, docs = data
    model = make_model(store.tokenizer, "mbe")
    keep = cxmi_context(model.cfg, None, docs)
    assert keep == (max(map(len, docs)) - 1, 0) and cxmi_context(make_model(store.tokenizer, "concat").cfg, None,
                                                                 docs) == (2, 2)
    pairs = sentence_pairs(docs, keep, 1024)
    assert all(p.context[0] == p.sentence for p in pairs)             # short documents: all previous sentences
    plain, contextual, tokens = score_pairs(model, store.tokenizer, pairs, max_tokens=600)
    start = np.array([p.sentence == 0 for p in pairs])
    assert np.array_equal(plain[start], contextual[start]) and not np.array_equal(plain[~start], contextual[~start])
