"""Translating and scoring with a bilingual HanoiT (Yang et al., §2.3): a sentence's target concatenation in
translation is the one its training row holds, the translator hands it to the model, a bilingual model needs a
first pass and another model refuses one; contrastive rows carry the items' target context."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from ctxmt_cli.config import validate_recipe
from ctxmt_cli.core.batch import VocabInfo
from ctxmt_cli.data.store import MemorySplit
from ctxmt_cli.data.target_concat import TargetConcat, target_concat_row
from ctxmt_cli.data.windows import WindowDataset, WindowSpec
from ctxmt_cli.decode.settings import DecodeSettings
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.evaluate.contrastive import candidate_rows
from ctxmt_cli.evaluate.testsets import ContrastiveItem
from ctxmt_cli.models.families import build_model, inputs_of
from tests.unit.test_target_concat import Side
from tests.unit.tiny_text import sentence

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/unit/conftest.py

BRK, EOS = 4, 3
TINY = {"preset": None, "d_model": 32, "ffn_dim": 64, "heads": 4, "encoder_layers": 2, "decoder_layers": 1,
        "dropout": 0.0}
#: greedy translation with one source context sentence
GREEDY_S2 = DecodeSettings(src_context_sentences=1, beam=1)


@pytest.mark.parametrize("limit", [64, 14, 9])
@pytest.mark.parametrize("context, following", [(1, 1), (2, 1), (1, 0), (2, 2)])
def test_translation_rows_are_the_training_rows(limit, context, following):
    """Random sentence lengths, two documents: for every sentence, the row the translator builds from the
    document and its first pass equals the training row of the same sentence (same truncation)."""
    rng = np.random.default_rng(limit * 10 + context)
    docs, first = [], []
    for n in (5, 3):
        src = [list(rng.integers(10, 40, rng.integers(1, 5))) for _ in range(n)]
        fp = [list(rng.integers(10, 40, rng.integers(0, 6))) for _ in range(n)]
        docs.append(src)
        first.append(fp)
    split = MemorySplit([[(s, s) for s in doc] for doc in docs])
    spec = WindowSpec(context, 0, limit, src_next_sentences=following)
    ds = WindowDataset(split, spec, BRK, EOS, TargetConcat(Side([s for doc in first for s in doc])))
    j = 0
    for doc, fp in zip(docs, first, strict=True):
        for k in range(len(doc)):
            if ds.src_ctx[j] >= 0:                                          # sentences a window can hold
                vocab = VocabInfo(40, 40, brk=BRK, eos=EOS)
                row, m = target_concat_row(doc[k], fp, k, context, following, limit, vocab)
                expected, m_expected = ds.tgt_concat(j)
                assert row == expected.tolist() and m == m_expected, (j, limit)
            j += 1


def bilingual_model(tokenizer, **spec):
    torch.manual_seed(0)
    cfg = validate_recipe({"model": {**TINY, "family": "hanoit", "bilingual": True, **spec}}).model
    vocab = VocabInfo(src_size=tokenizer.src_vocab_size, tgt_size=tokenizer.tgt_vocab_size, brk=tokenizer.brk_id)
    return build_model(cfg, vocab).eval()


def test_the_translator_hands_each_sentence_its_first_pass(tokenizer, monkeypatch):
    import ctxmt_cli.decode.slots as translator
    from ctxmt_cli.decode.translator import translate_documents

    seen, real = [], translator.beam_search
    monkeypatch.setattr(translator, "beam_search", lambda model, batch, **kw: (seen.append(batch), real(model, batch,
                                                                                                       **kw))[1])
    rng = random.Random(1)
    documents = [[sentence(rng) for _ in range(3)], [sentence(rng) for _ in range(2)]]
    first = [[sentence(rng) for _ in doc] for doc in documents]
    model = bilingual_model(tokenizer)
    out = translate_documents(model, tokenizer, documents, GREEDY_S2, first_pass=first)
    assert [len(d) for d in out] == [3, 2]
    src = [[tokenizer.encode_src(s) for s in doc] for doc in documents]
    fp = [[tokenizer.encode_tgt(s) for s in doc] for doc in first]
    row, m = target_concat_row(src[0][1], fp[0], 1, 1, 1, 1024, VocabInfo.of(tokenizer))
    assert row == fp[0][0] + [tokenizer.brk_id] + fp[0][2] + [tokenizer.brk_id] + src[0][1] + [tokenizer.eos_id]
    handed = [([t for t in tokens.tolist() if t != tokenizer.pad_id], int(n))   # TargetConcatRows of every search
              for batch in seen for tokens, n in zip(batch.extras.tokens, batch.extras.next_sentences, strict=True)]
    assert len(handed) == 5 and (row, m) in handed and m == 1


def test_a_target_context_model_translates_from_its_first_pass_alone(tokenizer, monkeypatch):
    """context_side: target: each step's source rows are the target concatenations (the first pass of the context
    sentences, then the current source sentence), nothing beside them; the translation reads the first pass and
    not the source context (another source context sentence, the same output)."""
    import ctxmt_cli.decode.slots as translator
    from ctxmt_cli.decode.translator import translate_documents

    seen, real = [], translator.beam_search
    monkeypatch.setattr(translator, "beam_search", lambda model, batch, **kw: (seen.append(batch), real(model, batch,
                                                                                                       **kw))[1])
    rng = random.Random(2)
    documents = [[sentence(rng) for _ in range(3)]]
    first = [[sentence(rng) for _ in doc] for doc in documents]
    model = bilingual_model(tokenizer, bilingual=False, context_side="target")
    out = translate_documents(model, tokenizer, documents, GREEDY_S2, first_pass=first)
    src = [tokenizer.encode_src(s) for s in documents[0]]
    fp = [tokenizer.encode_tgt(s) for s in first[0]]
    assert all(batch.extras is None for batch in seen)
    rows = [[t for t in r.tolist() if t != tokenizer.pad_id] for batch in seen for r in batch.src]
    assert len(rows) == 3 and fp[0] + [tokenizer.brk_id] + fp[2] + [tokenizer.brk_id] + src[1] + [tokenizer.eos_id] \
        in rows
    other = [[sentence(random.Random(9)), documents[0][1], sentence(random.Random(8))]]
    assert translate_documents(model, tokenizer, other, GREEDY_S2, first_pass=first)[0][1] == out[0][1]


def test_a_bilingual_model_needs_a_first_pass_and_others_refuse_one(tokenizer):
    model, docs = bilingual_model(tokenizer), [["ka lu", "mi no"]]
    with pytest.raises(CtxmtError, match="give `first_pass` SENTENCE_CKPT"):
        inputs_of(model.cfg).check_first_pass(docs, None)
    with pytest.raises(CtxmtError, match="one translation per sentence"):
        inputs_of(model.cfg).check_first_pass(docs, [["ka"]])
    inputs_of(model.cfg).check_first_pass(docs, [["a", "b"]])
    torch.manual_seed(0)
    plain = build_model(validate_recipe({"model": {**TINY, "family": "hanoit"}}).model, model.vocab)
    with pytest.raises(CtxmtError, match="reads no target context"):
        inputs_of(plain.cfg).check_first_pass(docs, [["a", "b"]])


def test_contrastive_rows_carry_the_items_target_context():
    """A candidate group (Voita): sentence j's row reads the candidate's own earlier sentences, as many as its
    source context; a single-sentence item: the item's target context."""
    group = ContrastiveItem(["s0", "s1"], "s2", ["t0", "t1"], ["c2", "d2"],
                            candidate_contexts=[["c0", "c1"], ["d0", "d1"]])
    rows = candidate_rows(group, 1, 1, 0, "all", bilingual=True)
    assert [r[4] for r in rows] == [[], ["d0"], ["d1"]] and [r[0] for r in rows] == [["s0"], ["s0", "s1"], ["s1", "s2"]]
    single = ContrastiveItem(["s0", "s1"], "s2", ["t0", "t1"], ["c", "d"])
    assert candidate_rows(single, 0, 2, 0, "all", bilingual=True) == [(["s0", "s1", "s2"], ["c"], 1, 0, ["t0", "t1"])]
    assert candidate_rows(single, 0, 2, 0, "all") == [(["s0", "s1", "s2"], ["c"], 1)]


def test_a_target_context_model_scores_by_its_target_context_alone(tokenizer):
    """Contrastive scoring of a context_side: target model: another source context sentence gives the very same
    score (the model does not read it), another target context sentence another score; a row without context
    (no target context given) is scored on the sentence alone."""
    from ctxmt_cli.evaluate.contrastive import score_rows

    model = bilingual_model(tokenizer, bilingual=False, context_side="target")
    rows = [(["ka lu mi", "no ka"], ["lu no"], 1, 0, ["mi mi ka"]),
            (["lu lu no", "no ka"], ["lu no"], 1, 0, ["mi mi ka"]),
            (["ka lu mi", "no ka"], ["lu no"], 1, 0, ["no lu lu ka"]),
            (["no ka"], ["lu no"], 1)]
    logprob, tokens = score_rows(model, tokenizer, rows)
    assert logprob[0] == logprob[1] and logprob[0] != logprob[2] and np.isfinite(logprob).all()
    assert len(set(tokens.tolist())) == 1
