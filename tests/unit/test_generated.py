"""Generate mode across documents: every window at once gives what the slot translator gives sentence by sentence."""

from dataclasses import replace

import pytest
import torch

from ctxmt_cli.core.batch import VocabInfo
from ctxmt_cli.decode.settings import DecodeSettings, TranslationStats
from ctxmt_cli.decode.slots import Search, SlotTranslator
from ctxmt_cli.decode.translator import decode_documents
from ctxmt_cli.models.families import inputs_of
from tests.unit.test_translator import documents, make_model

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/unit/conftest.py

SETTINGS = DecodeSettings(src_context_sentences=2, tgt_context_sentences=2, beam=3, max_len_b=6,
                          target_mode="generate")


def _slots(model, tokenizer, settings, stats):
    inputs = inputs_of(model.cfg)
    return SlotTranslator(model, settings.resolved(inputs), VocabInfo.of(tokenizer), Search(torch.device("cpu")),
                          inputs, False, stats)


def _tokens(found):
    return [[tuple(best[0].tokens) for best in doc] for doc in found]


@pytest.mark.parametrize("brk_bias", [0.0, -3.0])
def test_all_windows_at_once_equal_the_slot_translator(tokenizer, brk_bias):
    """Some windows write the separators due and some do not (retried in prefix mode, reading the document's
    earlier translations, retried ones included): the same translations and fallbacks as one step per sentence."""
    model = make_model(tokenizer, brk="free", eos_bias=1.0)
    model.brk = brk_bias
    docs = documents(seed=3, sizes=(5, 1, 4, 3))
    stats = TranslationStats()
    batched = _tokens(decode_documents(model, tokenizer, docs, SETTINGS, stats=stats))
    slot_stats = TranslationStats()
    ids = [[tokenizer.encode_src(s) for s in doc] for doc in docs]
    slots = _slots(model, tokenizer, SETTINGS, slot_stats)
    by_slots = [[tuple(h.tokens) for h in doc] for doc in slots.translate(ids, [[] for _ in ids])]
    assert batched == by_slots
    assert stats.fallbacks == slot_stats.fallbacks
    assert 0 < stats.fallbacks < stats.total                          # windows of both kinds


def test_batches_of_any_size_give_the_same_translations(tokenizer):
    model = make_model(tokenizer, brk="free", eos_bias=1.0)
    model.brk = 3.0
    docs = documents(seed=4, sizes=(4, 2, 3))
    found = [_tokens(decode_documents(model, tokenizer, docs, replace(SETTINGS, batch_docs=n))) for n in (1, 3, 64)]
    assert found[0] == found[1] == found[2]
    alone = [_tokens(decode_documents(model, tokenizer, [d], SETTINGS))[0] for d in docs]
    assert found[2] == alone
