"""Documents cut into pieces: a model reading its earlier translations, in pieces with a lead-in
(``warmup_sentences``), keeps every sentence once and in order, each with the target context its piece wrote."""

import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxmt_cli.benchmarks.document import Copy
from ctxmt_cli.config import validate_recipe
from ctxmt_cli.core.batch import VocabInfo
from ctxmt_cli.decode.encoded import Encoded
from ctxmt_cli.decode.pieces import LEAD_SHARE, cut_pieces, lead_in, piece_length
from ctxmt_cli.decode.settings import DecodeSettings, TranslationStats
from ctxmt_cli.decode.translator import decode_documents
from ctxmt_cli.models.families import build_model
from tests.unit.test_translator import TINY, documents, make_model
from tests.unit.tiny_text import sentence

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/unit/conftest.py

CONTEXT = 2


def _settings(**kw) -> DecodeSettings:
    return DecodeSettings(**{"src_context_sentences": CONTEXT, "tgt_context_sentences": CONTEXT, "beam": 2,
                             "max_len_a": 1.0, "max_len_b": 2, **kw})


def _tokens(found):
    return [[None if best is None else tuple(best[0].tokens) for best in doc] for doc in found]


@pytest.fixture(scope="module")
def copying(tokenizer):
    """A concat model that copies its source window (benchmarks' Copy): each translation is its source, whatever
    the context, but only when the forced target context holds the window's previous sentences in order."""
    torch.manual_seed(0)
    spec = {**TINY, "family": "concat", "src_context_sentences": CONTEXT, "tgt_context_sentences": CONTEXT}
    vocab = VocabInfo(src_size=tokenizer.src_vocab_size, tgt_size=tokenizer.tgt_vocab_size, brk=tokenizer.brk_id)
    return Copy(build_model(validate_recipe({"model": spec}).model, vocab)).eval()


@settings(max_examples=15)
@given(sizes=st.lists(st.integers(1, 14), min_size=1, max_size=4), warmup=st.integers(0, 4),
       slots=st.integers(1, 12), seed=st.integers(0, 100), n_given=st.integers(0, 3))
def test_pieces_with_a_lead_in_keep_every_sentence_once_in_order(copying, tokenizer, sizes, warmup, slots, seed,
                                                                 n_given):
    """Any documents, lead-in, slots and given prefix: the copying model writes each source sentence back exactly
    as whole documents do (a sentence kept twice, dropped, shifted, or given the wrong target context would not)."""
    docs = documents(seed=seed, sizes=tuple(sizes))
    given = [doc[:n_given] if d == 0 else [] for d, doc in enumerate(docs)]
    whole = _tokens(decode_documents(copying, tokenizer, docs, _settings(), given=given))
    stats = TranslationStats()
    cut = _tokens(decode_documents(copying, tokenizer, docs, _settings(warmup_sentences=warmup, batch_docs=slots),
                                   given=given, stats=stats))
    assert cut == whole
    assert stats.sentences == stats.total == sum(map(len, docs)) - len(given[0]) + stats.dropped


def test_each_kept_sentence_is_its_piece_translated_as_a_document(tokenizer):
    """With a real model the kept sentences of a piece are those of its sentences translated as a document of
    their own (lead-in first, dropped), in fewer steps than whole documents take."""
    model = make_model(tokenizer, eos_bias=1.0)
    docs = documents(seed=5, sizes=(30, 9))
    lead, slots = 3, 4
    stats, whole_stats = TranslationStats(), TranslationStats()
    cut = _tokens(decode_documents(model, tokenizer, docs, _settings(warmup_sentences=lead, batch_docs=slots),
                                   stats=stats))
    whole = _tokens(decode_documents(model, tokenizer, docs, _settings(), stats=whole_stats))
    length = piece_length([Encoded(list(range(39)), [[1]] * 39, [])], slots, lead)            # what the translator cut
    assert length == max(10, LEAD_SHARE * lead) == 12
    for start in range(0, 30, length):                                         # document 0's pieces
        lo = max(0, start - lead)
        alone = _tokens(decode_documents(model, tokenizer, [docs[0][lo:start + length]], _settings()))[0]
        assert cut[0][start:start + length] == alone[start - lo:]
    assert cut[1] == whole[1]                                                  # shorter than a piece: whole
    assert cut[0][:length] == whole[0][:length]                                # the first piece has no lead-in
    assert stats.dropped == 2 * lead and stats.steps < whole_stats.steps
    assert "lead-in of 3: 6 sentences translated and dropped" in stats.summary()


def test_lead_in_counts_only_what_the_document_does_not_give():
    ids = [[1]] * 20
    e = Encoded(list(range(20)), ids, [[7]] * 6)                             # 6 given sentences
    pieces = cut_pieces([e], 3, 0, 5, lead=True)
    assert [(p.lo, p.first, p.end, p.lead) for p in pieces] == [
        (3, 6, 11, False), (8, 11, 16, True), (13, 16, 20, True)]              # the first starts after the given
    assert [lead_in(e, p) for p in pieces] == [0, 3, 3]
    short = cut_pieces([e], 3, 0, 2, lead=True)                               # pieces shorter than the lead-in
    assert (short[1].lo, short[1].first) == (5, 8) and lead_in(e, short[1]) == 2   # sentence 5 is given


def test_no_lead_in_is_whole_documents_and_a_model_without_target_context_ignores_it(tokenizer):
    model = make_model(tokenizer)
    docs = documents(seed=2, sizes=(6, 3))
    assert _tokens(decode_documents(model, tokenizer, docs, _settings(batch_docs=1))) == \
        _tokens(decode_documents(model, tokenizer, docs, _settings()))
    rng = random.Random(1)
    plain = build_model(validate_recipe({"model": {**TINY, "family": "sentence"}}).model,
                        VocabInfo(tokenizer.src_vocab_size, tokenizer.tgt_vocab_size)).eval()
    docs = [[sentence(rng) for _ in range(7)]]
    free = dict(src_context_sentences=0, tgt_context_sentences=0)
    stats = TranslationStats()
    assert _tokens(decode_documents(plain, tokenizer, docs, _settings(**free, warmup_sentences=2), stats=stats)) \
        == _tokens(decode_documents(plain, tokenizer, docs, _settings(**free)))
    assert stats.dropped == 0                                                  # cut exactly, nothing to drop
