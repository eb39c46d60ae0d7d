"""Document translator: windows, parallel slots, prefix/generate target context, file I/O."""

import random
from dataclasses import replace

import pytest
import torch

from ctxmt_cli.config import validate_recipe
from ctxmt_cli.core.batch import Batch, VocabInfo
from ctxmt_cli.decode.documents import write_documents
from ctxmt_cli.decode.search import beam_search
from ctxmt_cli.decode.settings import DecodeSettings, TranslationStats
from ctxmt_cli.decode.steps import split_generated, step_batch
from ctxmt_cli.decode.translator import translate_documents
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.models.families import build_model, context_sentences
from tests.unit.biased_model import Biased
from tests.unit.tiny_text import sentence

TINY = {"preset": None, "d_model": 32, "ffn_dim": 64, "heads": 4, "encoder_layers": 2, "decoder_layers": 2}


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/unit/conftest.py


def tiny_config(**model):
    """The model section of a tiny recipe with the given ``model`` fields."""
    return validate_recipe({"model": {**TINY, **model}}).model


def make_model(tokenizer, family="concat", eos_bias=2.0, brk="free", seed=0):
    torch.manual_seed(seed)
    spec = {"family": family}
    if family == "concat":
        spec.update(shift=2, segment="learned", src_context_sentences=2, tgt_context_sentences=2)
    cfg = validate_recipe({"model": {**TINY, **spec}}).model
    vocab = VocabInfo(src_size=tokenizer.src_vocab_size, tgt_size=tokenizer.tgt_vocab_size, brk=tokenizer.brk_id)
    model = build_model(cfg, vocab)
    with torch.no_grad():  # larger than the init: varied outputs instead of one repeated token
        for p in model.parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.35)
    return Biased(model, eos=eos_bias, brk_rule=brk).eval()


def documents(seed=1, sizes=(4, 1, 3)):
    rng = random.Random(seed)
    return [[sentence(rng) for _ in range(n)] for n in sizes]


def run(model, tok, docs, **kw):
    """Translate with the test's settings (``kw``: settings to change, or ``stats``/``progress``/``first_pass``)."""
    args = {"src_context_sentences": 2, "tgt_context_sentences": 2, "beam": 3, "max_len_b": 6}
    call = {k: kw.pop(k) for k in ("stats", "progress", "first_pass") if k in kw}
    return translate_documents(model, tok, docs, DecodeSettings(**{**args, **kw}), **call)


def test_one_output_per_input_line_and_blank_lines_kept(tokenizer, tmp_path):
    docs = documents(sizes=(4, 1, 3))
    docs[0][2] = "   "                                                       # an empty sentence inside a document
    out = run(make_model(tokenizer), tokenizer, docs)
    assert [len(d) for d in out] == [4, 1, 3]
    assert out[0][2] == ""
    assert all(line and "\n" not in line for d in out for line in d if line != out[0][2])
    path = tmp_path / "out.txt"
    write_documents(out, path)
    lines = path.read_text(encoding="utf-8").split("\n")
    assert len(lines) - 1 == 4 + 1 + 1 + 1 + 3                             # sentences + 2 separators
    assert lines[:4] == out[0] and lines[4] == "" and lines[5] == out[1][0] and lines[6] == ""


def test_parallel_documents_equal_each_document_alone(tokenizer):
    model, docs = make_model(tokenizer), documents(sizes=(3, 5, 1, 4))
    together = run(model, tokenizer, docs)
    alone = [run(model, tokenizer, [d])[0] for d in docs]
    assert together == alone
    assert run(model, tokenizer, docs, batch_docs=2) == alone              # groups of documents


def test_windows_never_cross_documents(tokenizer):
    model, docs = make_model(tokenizer), documents(sizes=(4, 3))
    together = run(model, tokenizer, docs)
    second_alone = run(model, tokenizer, [docs[1]])[0]
    assert together[1][0] == second_alone[0]
    sp = VocabInfo.of(tokenizer)
    s3to3 = DecodeSettings(src_context_sentences=3, tgt_context_sentences=3)
    step = step_batch([[[10, 11]], [[12]]], [[], []], 0, s3to3, sp)   # first sentences: no context at all
    assert not (step.batch.src == sp.brk).any() and not (step.batch.tgt_prefix == sp.brk).any()


def test_window_order_is_oldest_to_newest(tokenizer):
    sp = VocabInfo.of(tokenizer)
    src = [[10, 11], [12], [13, 14, 15], [16, 17]]                          # a 4-sentence document
    out = [[20], [21, 22], [23]]                                            # its first three translations
    s2to2 = DecodeSettings(src_context_sentences=2, tgt_context_sentences=2)
    step = step_batch([src], [out], 3, s2to2, sp)
    assert step.batch.src[0].tolist() == [12, sp.brk, 13, 14, 15, sp.brk, 16, 17, sp.eos]
    assert step.batch.tgt_prefix[0].tolist() == [sp.bos, 21, 22, sp.brk, 23, sp.brk]
    assert step.batch.tgt_sentences.tolist() == [3]
    assert step.max_len.tolist() == [int(1.5 * 2 + 10)]
    gen = step_batch([src], [out], 3, s2to2, sp, mode="generate")
    assert gen.batch.tgt_prefix[0].tolist() == [sp.bos] and gen.expected == [2]
    # each sentence of the generated window as long as it may be alone, + its <brk>: from the source only
    assert gen.max_len.tolist() == [int(1.5 * 2 + 10) + (int(1.5 * 1 + 10) + 1) + (int(1.5 * 3 + 10) + 1)]
    other = step_batch([src], [[[30, 31, 32, 33]] * 3], 3, s2to2, sp, mode="generate")
    assert other.max_len.tolist() == gen.max_len.tolist() and other.expected == gen.expected
    # a 7-token limit keeps only the newest context sentence on each side, never a part of one
    small = step_batch([src], [out], 3, replace(s2to2, max_window_tokens=7), sp)
    assert small.batch.src[0].tolist() == [13, 14, 15, sp.brk, 16, 17, sp.eos]
    assert small.batch.tgt_prefix[0].tolist() == [sp.bos, 23, sp.brk]


def test_prefix_mode_without_context_equals_sentence_level_beam_search(tokenizer):
    model, docs = make_model(tokenizer, family="sentence"), documents(sizes=(3, 2))
    out = run(model, tokenizer, docs, src_context_sentences=0, tgt_context_sentences=0)
    sp = VocabInfo.of(tokenizer)
    for doc, doc_out in zip(docs, out, strict=True):
        for text, got in zip(doc, doc_out, strict=True):
            ids = tokenizer.encode_src(text)
            batch = Batch(src=torch.tensor([ids + [sp.eos]]))
            hyp = beam_search(model, batch, beam=3, lenpen=0.6, max_len=int(1.5 * len(ids) + 6), banned=[sp.brk])[0]
            assert got == tokenizer.decode_tgt(hyp.tokens)


def test_generate_mode_falls_back_when_separators_are_missing(tokenizer):
    docs = documents(sizes=(4, 2))
    model = make_model(tokenizer, brk="ban")                               # can never write the context
    stats = TranslationStats()
    generated = run(model, tokenizer, docs, target_mode="generate", stats=stats)
    assert stats.fallbacks == 3 + 1                                         # every sentence with context
    assert generated == run(model, tokenizer, docs)                        # the fallback is prefix mode
    stats = TranslationStats()
    run(model, tokenizer, docs, target_mode="generate", tgt_context_sentences=0, stats=stats)
    assert stats.fallbacks == 0


def test_generate_mode_keeps_the_text_after_the_last_separator(tokenizer):
    docs = documents(sizes=(4, 2))
    model = make_model(tokenizer, brk="script", eos_bias=-1.0)            # writes exactly the separators due
    stats, seen = TranslationStats(), []
    out = run(model, tokenizer, docs, target_mode="generate", stats=stats, batch_docs=4,
              progress=lambda s: seen.append(s.sentences))
    assert stats.fallbacks == 0 and stats.sentences == stats.total == 6
    assert seen == [4, 6]                                  # after every batch of windows, across the documents
    assert all(line and "<brk>" not in line for d in out for line in d)
    prefix = run(model, tokenizer, docs)
    assert [d[0] for d in out] == [d[0] for d in prefix]                    # no context: the same search
    assert [d[1:] for d in out] != [d[1:] for d in prefix]                  # context written, not forced
    assert split_generated([5, 4, 6, 4, 7, 8], 2, 4) == [7, 8]
    assert split_generated([5, 4, 7, 8], 2, 4) is None
    assert split_generated([7, 8], 0, 4) == [7, 8]
    assert split_generated([7, 4], 0, 4) is None


def test_bad_mode_is_a_one_line_error():
    with pytest.raises(CtxmtError, match="target_mode"):
        translate_documents(None, None, [], DecodeSettings(target_mode="reference"))


def test_context_option_resizes_each_side_that_has_context(tokenizer):
    s2to2 = tiny_config(family="concat", src_context_sentences=2, tgt_context_sentences=2)
    assert [context_sentences(s2to2, k) for k in (None, 0, 1, 4)] == [(2, 2), (0, 0), (1, 1), (4, 4)]
    s2to1 = tiny_config(family="concat", src_context_sentences=2, tgt_context_sentences=0)
    assert context_sentences(s2to1, 4) == (4, 0)                             # sKto1: only the source side grows
    assert context_sentences(tiny_config(family="caching", src_context_sentences=1), 3) == (3, 0)   # 3 cached sentences
    sentence_level = tiny_config(family="sentence")
    assert context_sentences(sentence_level) == context_sentences(sentence_level, 0) == (0, 0)
    with pytest.raises(CtxmtError, match="reads no context"):
        context_sentences(sentence_level, 2)
    # a model trained with 2 context sentences per side, decoded with K = 4: windows of 5 sentences
    sp = VocabInfo.of(tokenizer)
    src, out = [[10 + j] for j in range(6)], [[30 + j] for j in range(5)]
    src_context, tgt_context = context_sentences(s2to2, 4)
    windows = DecodeSettings(src_context_sentences=src_context, tgt_context_sentences=tgt_context)
    step = step_batch([src], [out], 5, windows, sp)
    assert step.batch.src[0].tolist() == [11, sp.brk, 12, sp.brk, 13, sp.brk, 14, sp.brk, 15, sp.eos]
    assert step.batch.tgt_prefix[0].tolist() == [sp.bos, 31, sp.brk, 32, sp.brk, 33, sp.brk, 34, sp.brk]


def test_context_zero_translates_every_sentence_as_if_alone(tokenizer):
    model, docs = make_model(tokenizer), documents(sizes=(4, 3))
    no_context = run(model, tokenizer, docs, src_context_sentences=0, tgt_context_sentences=0)
    alone = run(model, tokenizer, [[s] for doc in docs for s in doc])
    assert [s for doc in no_context for s in doc] == [doc[0] for doc in alone]
    assert no_context != run(model, tokenizer, docs)                       # the trained window does see context
    wider = run(model, tokenizer, docs, src_context_sentences=3, tgt_context_sentences=3)
    assert [len(d) for d in wider] == [4, 3] and all(line for d in wider for line in d)


# ---- next sentences (a model reading them: the offline context of Yang et al.'s HanoiT) ----------
def reads_next(model, n=1):
    """``model`` (a concat model, which ignores ``Batch.src_next``) as a model whose config reads ``n`` next
    sentences: what the translator builds for such a model, before a family that reads them is at hand."""
    model.cfg = model.cfg.model_copy(update={"src_next_sentences": n})
    return model


def test_translation_windows_equal_training_windows(prepared):
    """Windows of a prepared split built by the translator (step by step, document by document) and by the
    training data loader hold the same tokens and the same next-sentence counts, truncation included."""
    from ctxmt_cli.data.store import PreparedData
    from ctxmt_cli.data.windows import WindowDataset, WindowSpec

    data = PreparedData(prepared)
    split, sp = data.split("valid"), VocabInfo.of(data.tokenizer)
    for prev, nxt, limit in ((2, 2, 1024), (1, 1, 1024), (2, 3, 40), (0, 2, 30)):
        ds = WindowDataset(split, WindowSpec(prev, 0, limit, src_next_sentences=nxt), sp.brk, sp.eos)
        plan = DecodeSettings(src_context_sentences=prev, max_window_tokens=limit, src_next_sentences=nxt)
        usable = set(ds.indices.tolist())
        for start, end in split.documents():
            doc = [split.src(i).tolist() for i in range(start, end)]
            for j in range(len(doc)):
                if start + j not in usable:                            # too long alone: training leaves it out
                    continue
                step = step_batch([doc], [[[5]] * j], j, plan, sp)
                assert step.batch.src[0].tolist() == ds.source(start + j).tolist()
                assert step.batch.src_next.tolist() == [ds.src_next[start + j]]
        wide = WindowDataset(split, WindowSpec(prev, 0, 1024, src_next_sentences=nxt), sp.brk, sp.eos)
        cut = (ds.src_ctx + ds.src_next < wide.src_ctx + wide.src_next)[ds.indices]
        assert ds.src_next.any() and cut.any() == (limit < 1024)      # the small limits do drop context sentences


def test_a_model_reading_next_sentences_translates_with_them(tokenizer, monkeypatch):
    import ctxmt_cli.decode.slots as translator

    seen, real = [], translator.beam_search
    monkeypatch.setattr(translator, "beam_search",
                        lambda model, batch, **kw: (seen.append(batch), real(model, batch, **kw))[1])
    model, docs = reads_next(make_model(tokenizer)), documents(sizes=(3, 1))
    run(model, tokenizer, docs, src_context_sentences=1, tgt_context_sentences=1)
    ids = [tokenizer.encode_src(s) for s in docs[0]]
    sp = VocabInfo.of(tokenizer)
    first = seen[0]                                                    # step 0: both documents' first sentences
    assert first.src[0][first.src[0] != sp.pad].tolist() == ids[1] + [sp.brk] + ids[0] + [sp.eos]
    assert first.src_next.tolist() == [1, 0]                           # the one-sentence document has none
    assert [b.src_next.tolist() for b in seen[1:]] == [[1], [0]]       # the last sentence: the document ends
    assert seen[2].src[0].tolist() == ids[1] + [sp.brk] + ids[2] + [sp.eos]
    seen.clear()
    run(model, tokenizer, docs, src_context_sentences=1, tgt_context_sentences=1, src_next_sentences=0)
    assert all(b.src_next is None for b in seen) and not (seen[0].src == sp.brk).any()   # None: 0 next sentences
    seen.clear()
    run(make_model(tokenizer), tokenizer, docs)                        # a model without next context: as before
    assert all(b.src_next is None for b in seen)
    with pytest.raises(CtxmtError, match="reads no next sentences"):
        run(make_model(tokenizer), tokenizer, docs, src_next_sentences=1)


def test_context_option_sets_next_sentences_too():
    from ctxmt_cli.models.families import next_sentences

    offline = tiny_config(family="concat", src_context_sentences=1, tgt_context_sentences=0).model_copy(
        update={"src_next_sentences": 1})
    assert [(context_sentences(offline, k), next_sentences(offline, k)) for k in (None, 0, 2)] == \
        [((1, 0), 1), ((0, 0), 0), ((2, 0), 2)]
    next_only = offline.model_copy(update={"src_context_sentences": 0})
    assert (context_sentences(next_only, 3), next_sentences(next_only, 3)) == ((0, 0), 3)   # not refused
    s2to2 = tiny_config(family="concat", src_context_sentences=2, tgt_context_sentences=2)
    assert next_sentences(s2to2) == next_sentences(s2to2, 4) == 0
    with pytest.raises(CtxmtError, match="reads no context"):
        next_sentences(tiny_config(family="sentence"), 1)


def test_given_target_context_stands_for_the_models_own_translations(tokenizer):
    from ctxmt_cli.decode.translator import decode_documents

    model, docs = make_model(tokenizer), documents(sizes=(4, 1, 3))
    docs[0][1] = ""                                                         # an empty line inside the given prefix
    settings = DecodeSettings(src_context_sentences=2, tgt_context_sentences=2, beam=3, max_len_b=6, batch_docs=2)
    whole = decode_documents(model, tokenizer, docs, settings)
    assert whole[0][1] == [] and all(c for i, d in enumerate(whole) for j, c in enumerate(d) if (i, j) != (0, 1))
    own = [[list(c[0].tokens) if c else "" for c in d[:k]] for d, k in zip(whole, (3, 0, 2), strict=True)]
    stats = TranslationStats()
    continued = decode_documents(model, tokenizer, docs, settings, given=own, stats=stats)
    for d, k in enumerate((3, 0, 2)):
        assert continued[d][:k] == [None] * k                               # given: not translated
        assert continued[d][k:] == whole[d][k:]                             # the rest as if the model wrote them
    assert stats.total == stats.sentences == 1 + 1 + 1                      # only the others were decoded
    other = [["ka lu mi no"] * 3, [], ["re sa ti"] * 2]                      # someone else's translations
    changed = decode_documents(model, tokenizer, docs, settings, given=other)
    assert [c[0].tokens for c in changed[0][3:] + changed[2][2:]] != [c[0].tokens for c in whole[0][3:] + whole[2][2:]]
    with pytest.raises(CtxmtError, match="at most one translation per source sentence"):
        decode_documents(model, tokenizer, docs, settings, given=[["a"] * 5, [], []])
    with pytest.raises(CtxmtError, match="target_mode=.generate.: given target context is forced.*use prefix"):
        decode_documents(model, tokenizer, docs, replace(settings, target_mode="generate"), given=other)


@pytest.mark.parametrize("family, spec, settings", [
    ("sentence", {}, {"src_context_sentences": 0, "tgt_context_sentences": 0}),
    ("concat", {"src_context_sentences": 2, "tgt_context_sentences": 0}, {"tgt_context_sentences": 0}),
    ("hanoit", {"src_context_sentences": 1, "src_next_sentences": 1, "q": 0.5},
     {"src_context_sentences": 1, "tgt_context_sentences": 0, "src_next_sentences": 1}),
    ("caching", {"src_context_sentences": 2}, {"tgt_context_sentences": 0}),
])
def test_documents_cut_into_pieces_translate_as_whole_documents(tokenizer, family, spec, settings):
    """A model reading no earlier translation translates pieces of documents side by side (each piece with the
    context sentences its windows or memory read): the same translations, log-probabilities and given sentences as
    one whole document after another, in a fraction of the steps."""
    from ctxmt_cli.decode.translator import decode_documents

    torch.manual_seed(0)
    cfg = validate_recipe({"model": {**TINY, "family": family, **spec}}).model
    vocab = VocabInfo(src_size=tokenizer.src_vocab_size, tgt_size=tokenizer.tgt_vocab_size, brk=tokenizer.brk_id)
    model = build_model(cfg, vocab).eval()
    docs = documents(seed=3, sizes=(7, 2, 5))
    given = [[sentence(random.Random(5))], [], []]                     # the first sentence of document 0 is given
    runs = {}
    for slots in (1, 64):                                              # 1: whole documents, one at a time
        stats = TranslationStats()
        s = DecodeSettings(**{"src_context_sentences": 2, "beam": 2, "max_len_b": 5, **settings, "batch_docs": slots})
        runs[slots] = (decode_documents(model, tokenizer, docs, s, given=given, stats=stats), stats.steps)
    (whole, whole_steps), (cut, cut_steps) = runs[1], runs[64]
    assert whole[0][0] is None and cut[0][0] is None
    for doc_whole, doc_cut in zip(whole, cut, strict=True):
        for a, b in zip(doc_whole, doc_cut, strict=True):
            assert (a is None) == (b is None)
            if a is not None:
                assert a[0].tokens == b[0].tokens and a[0].logprob == pytest.approx(b[0].logprob, abs=1e-4)
    # 13 sentences to translate in 64 slots: one piece each, and every piece translates its sentence in the first
    # step, however many context sentences it is given before it
    assert whole_steps == 6 + 2 + 5 and cut_steps == 1
