"""The translation loops (ctxmt_cli/decode/loops.py): a family declares how a document is translated and the loop
of that name runs it; the loops themselves are tested where they run (test_translator, test_pieces,
test_generated, test_caching, test_groups)."""

from __future__ import annotations

import pytest
import torch

import ctxmt_cli.decode.translator as translator
from ctxmt_cli.decode.loops import LOOPS, DocumentCall, translate_call
from ctxmt_cli.decode.settings import DecodeSettings, TranslationStats
from ctxmt_cli.decode.slots import Search
from ctxmt_cli.decode.translator import decode_documents
from ctxmt_cli.models.inputs import TRANSLATIONS, Inputs
from ctxmt_cli.models.mbe.inputs import MbeInputs
from tests.unit.test_translator import documents, make_model

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/unit/conftest.py


def test_every_declared_way_has_its_loop():
    assert set(LOOPS) == set(TRANSLATIONS) == {"slots", "memory", "groups", "first_pass"}


class Windows(Inputs):
    """A family declaring a way to translate that no loop runs."""

    def translation(self):
        return "windows"


def test_a_way_no_loop_runs_is_refused_naming_it(tokenizer):
    model = make_model(tokenizer, family="sentence")
    call = DocumentCall(model=model, tokenizer=tokenizer, inputs=Windows(model.cfg), encoded=[], results=[],
                        settings=DecodeSettings(), searcher=Search(torch.device("cpu")), stats=TranslationStats())
    with pytest.raises(ValueError, match="Windows.translation.. declares 'windows'; declare one of slots, memory"):
        translate_call(call)


class MbeInSlots(MbeInputs):
    """mbe's inputs declaring sentence slots instead of groups: each sentence then reads a summary of itself."""

    def translation(self):
        return "slots"


def test_the_declaration_picks_the_loop(tokenizer, monkeypatch):
    """An mbe model translated by its declaration (groups) reads its document; declared as slots, each sentence
    alone, which is what groups of one sentence give."""
    model, docs = make_model(tokenizer, family="mbe"), documents(sizes=(4, 1, 3))

    def texts(**options):
        found = decode_documents(model, tokenizer, docs, DecodeSettings(beam=2, max_len_b=6, **options))
        return [[best[0].text for best in doc] for doc in found]

    grouped, singles = texts(), texts(group_sentences=1)
    assert grouped != singles                                               # the group is what the model reads
    monkeypatch.setattr(translator, "inputs_of", MbeInSlots)
    assert texts() == singles
