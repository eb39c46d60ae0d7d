"""Bilingual windows (Yang et al.'s bilingual ECT and Dual Encoder baselines: ``concat`` and ``caching`` with
``bilingual: true``): the row layout, the window limit, that a translated sentence's row is its training row, the
scoring rows, and the recipe checks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ctxmt_cli.config import validate_recipe
from ctxmt_cli.core.batch import Batch, VocabInfo
from ctxmt_cli.data.batching import pad_rows
from ctxmt_cli.data.store import MemorySplit
from ctxmt_cli.data.target_concat import TargetConcat
from ctxmt_cli.data.windows import WindowSpec
from ctxmt_cli.decode.encoded import DocumentIds
from ctxmt_cli.decode.settings import DecodeSettings
from ctxmt_cli.decode.steps import source_window
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.models.bilingual_windows import BilingualWindows
from ctxmt_cli.models.families import build_model, inputs_of
from tests.unit.test_target_concat import Side
from tests.unit.tiny_text import sentence

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/unit/conftest.py

BRK, EOS, PAD = 4, 3, 0
VOCAB = VocabInfo(60, 60, brk=BRK, eos=EOS)
BILINGUAL = {"family": "concat", "src_context_sentences": 1, "src_next_sentences": 1, "tgt_context_sentences": 0,
             "bilingual": True, "target_context_from": "reference"}
#: the bilingual Dual Encoder's section (caching reads previous sentences only)
DUAL = {"family": "caching", "src_context_sentences": 1, "repr": "tokens", "integration": "parallel", "gate": True,
        "encoder": "separate", "grad_context_sentences": 2, "bilingual": True, "target_context_from": "reference"}


def windows(docs, first, prev=1, nxt=1, limit=64) -> BilingualWindows:
    split = MemorySplit([[(s, s) for s in doc] for doc in docs])
    spec = WindowSpec(prev, 0, limit, src_next_sentences=nxt)
    return BilingualWindows(split, spec, BRK, EOS, TargetConcat(Side([s for doc in first for s in doc])))


def test_the_row_holds_the_target_context_then_the_source_window():
    docs = [[[10 + j] for j in range(3)], [[13], [14]]]
    first = [[[50 + j, 50 + j] for j in range(3)], [[53, 53], [54, 54]]]
    ds = windows(docs, first)
    assert ds.source(1).tolist() == [50, 50, BRK, 52, 52, BRK, 10, BRK, 12, BRK, 11, EOS]
    assert ds.source(3).tolist() == [54, 54, BRK, 14, BRK, 13, EOS]                # no crossing of documents
    assert [len(ds.source(j)) for j in range(5)] == ds.src_len.tolist()           # the budget counts the row


def test_the_target_context_fits_in_what_the_source_window_leaves():
    docs = [[[10 + j] * 3 for j in range(3)]]
    first = [[[50 + j] * 4 for j in range(3)]]
    ds = windows(docs, first, limit=13)                        # window 3 + 1 + 3 + 1 + 3 + 1 = 12: no target room
    assert ds.source(1).tolist() == [10] * 3 + [BRK] + [12] * 3 + [BRK] + [11] * 3 + [EOS]
    ds = windows(docs, first, limit=17)                        # room for one target sentence: the previous one
    assert ds.source(1).tolist()[:5] == [50] * 4 + [BRK] and len(ds.source(1)) == 17


@pytest.mark.parametrize("limit", [64, 16, 10])
@pytest.mark.parametrize("prev, nxt", [(1, 1), (2, 1), (1, 0), (2, 2)])
def test_a_translated_sentence_reads_its_training_row(limit, prev, nxt):
    """Random lengths, two documents: the row :meth:`ConcatInputs.step_rows` builds from the source window and
    the document's first pass equals the training row of the same sentence (the same truncation)."""
    rng = np.random.default_rng(limit + 10 * prev + nxt)
    docs = [[list(rng.integers(10, 40, rng.integers(1, 5))) for _ in range(n)] for n in (4, 3)]
    first = [[list(rng.integers(10, 40, rng.integers(0, 6))) for _ in doc] for doc in docs]
    ds = windows(docs, first, prev, nxt, limit)
    cfg = validate_recipe({"model": {**BILINGUAL, "src_context_sentences": prev, "src_next_sentences": nxt}}).model
    inputs = inputs_of(cfg)
    plan = DecodeSettings(src_context_sentences=prev, beam=1, max_window_tokens=limit, src_next_sentences=nxt)
    j0 = 0
    for doc, fp in zip(docs, first, strict=True):
        for k in range(len(doc)):
            if ds.src_ctx[j0 + k] >= 0:
                batch = Batch(src=pad_rows([np.asarray(source_window(doc, k, prev, limit, VOCAB, nxt))], PAD))
                inputs.step_rows(batch, [DocumentIds(doc, fp)], k, plan, VOCAB)
                assert batch.src[0].tolist() == ds.source(j0 + k).tolist(), (j0 + k, limit)
        j0 += len(doc)


def test_scoring_rows_put_the_items_target_context_before_the_window():
    inputs = inputs_of(validate_recipe({"model": BILINGUAL}).model)
    batch = Batch(src=pad_rows([np.array([10, BRK, 11, EOS]), np.array([12, EOS])], PAD))
    concat = [np.array([50, 51, BRK, 11, EOS]), np.array([12, EOS])]              # the second: no context
    out = inputs.scoring_batch(batch, VOCAB, concat)
    assert out.src.tolist() == [[50, 51, BRK, 10, BRK, 11, EOS], [12, EOS, PAD, PAD, PAD, PAD, PAD]]


def test_a_bilingual_model_needs_a_first_pass_and_others_refuse_one():
    inputs = inputs_of(validate_recipe({"model": BILINGUAL}).model)
    with pytest.raises(CtxmtError, match="first.pass.? SENTENCE_CKPT"):
        inputs.check_first_pass([["a"]], None)
    with pytest.raises(CtxmtError, match="shape"):
        inputs.check_first_pass([["a", "b"]], [["x"]])
    plain = inputs_of(validate_recipe({"model": {**BILINGUAL, "bilingual": False,
                                                 "target_context_from": None}}).model)
    with pytest.raises(CtxmtError, match="reads no target context"):
        plain.check_first_pass([["a"]], [["x"]])


@pytest.mark.parametrize("change, message", [
    ({"tgt_context_sentences": 1, "src_next_sentences": 0}, "sKto1"),
    ({"src_context_sentences": 0, "src_next_sentences": 0}, "set one of them >= 1"),
    ({"bilingual": False}, "target_context_from: for a model reading target context"),
    ({"first_pass_stream": "fp"}, "with reference"),
    ({"context_order": "random"}, "context_order: random"),
])
def test_the_recipe_refuses_what_a_bilingual_window_cannot_read(change, message):
    with pytest.raises(CtxmtError, match=message):
        validate_recipe({"model": {**BILINGUAL, **change}})


@pytest.mark.parametrize("change, message", [
    ({"src_context_sentences": 0, "grad_context_sentences": 0, "include_current": True}, "src_context_sentences is 0"),
    ({"grad_context_sentences": 3}, r"exceeds the context sentences a window holds \(2"),
    ({"bilingual": False, "grad_context_sentences": 1}, "target_context_from: for a model reading target context"),
])
def test_the_caching_recipe_refuses_what_a_bilingual_memory_cannot_read(change, message):
    with pytest.raises(CtxmtError, match=message):
        validate_recipe({"model": {**DUAL, **change}})


def test_a_bilingual_caching_model_gives_each_target_sentence_its_own_slot():
    cfg = validate_recipe({"model": {**DUAL, "target_context_from": None, "src_context_sentences": 2,
                                     "grad_context_sentences": 1}}).model
    assert (cfg.target_context_from, cfg.first_pass_stream, cfg.context_slots) == ("first_pass", "first-pass", 4)
    torch.manual_seed(0)
    assert build_model(cfg, VOCAB).segment.num_embeddings == 5
    with pytest.raises(CtxmtError, match="one vocabulary for both sides"):
        build_model(cfg, VocabInfo(60, 70, brk=BRK, eos=EOS, joint=False))


def test_defaults_segments_and_the_joint_vocabulary():
    cfg = validate_recipe({"model": {**BILINGUAL, "target_context_from": None}}).model
    assert (cfg.target_context_from, cfg.first_pass_stream, cfg.max_segments) == ("first_pass", "first-pass", 5)
    with pytest.raises(CtxmtError, match="one vocabulary for both sides"):
        build_model(cfg, VocabInfo(60, 70, brk=BRK, eos=EOS, joint=False))
    torch.manual_seed(0)
    assert build_model(cfg, VOCAB) is not None


def tiny_model(tokenizer, family: str = "concat"):
    torch.manual_seed(0)
    section = {**BILINGUAL, "segment": "learned"} if family == "concat" else DUAL
    cfg = validate_recipe({"model": {**section, "preset": None, "d_model": 32, "ffn_dim": 64, "heads": 4,
                                     "encoder_layers": 1, "decoder_layers": 1, "dropout": 0.0}}).model
    return build_model(cfg, VocabInfo.of(tokenizer)).eval()


@pytest.mark.parametrize("family", ["concat", "caching"])
def test_the_translator_reads_the_first_pass_before_each_window(tokenizer, monkeypatch, family):
    """Every searched row is the sentence's first-pass context, then its source window (a bilingual caching model
    too: it translates window by window, not from a memory)."""
    import random

    import ctxmt_cli.decode.slots as translator
    from ctxmt_cli.decode.translator import translate_documents

    seen, real = [], translator.beam_search
    monkeypatch.setattr(translator, "beam_search", lambda model, batch, **kw: (seen.append(batch), real(model, batch,
                                                                                                       **kw))[1])
    rng = random.Random(3)
    documents = [[sentence(rng) for _ in range(3)]]
    first = [[sentence(rng) for _ in documents[0]]]
    model = tiny_model(tokenizer, family)
    translate_documents(model, tokenizer, documents, DecodeSettings(src_context_sentences=1, beam=1), first_pass=first)
    src = [tokenizer.encode_src(s) for s in documents[0]]
    fp = [tokenizer.encode_tgt(s) for s in first[0]]
    brk, eos = tokenizer.brk_id, tokenizer.eos_id
    rows = [[t for t in r.tolist() if t != tokenizer.pad_id] for batch in seen for r in batch.src]
    assert len(rows) == 3 and all(batch.memory is None for batch in seen)
    if family == "concat":                                               # 1 previous + 1 next sentence
        assert fp[0] + [brk] + fp[2] + [brk] + src[0] + [brk] + src[2] + [brk] + src[1] + [eos] in rows
    else:                                                                # 1 previous sentence
        assert fp[0] + [brk] + src[0] + [brk] + src[1] + [eos] in rows


@pytest.mark.parametrize("family", ["concat", "caching"])
def test_contrastive_scores_read_the_items_target_context(tokenizer, family):
    """The same source rows with another target context sentence score differently; the same rows the same."""
    from ctxmt_cli.evaluate.contrastive import score_rows

    rows = [(["ka lu mi", "no ka"], ["lu no"], 1, 0, ["mi mi ka"]),
            (["ka lu mi", "no ka"], ["lu no"], 1, 0, ["no lu lu ka"]),
            (["ka lu mi", "no ka"], ["lu no"], 1, 0, ["mi mi ka"])]             # 1 previous source + target sentence
    logprob, _ = score_rows(tiny_model(tokenizer, family), tokenizer, rows)
    assert logprob[0] == logprob[2] and logprob[0] != logprob[1] and np.isfinite(logprob).all()
