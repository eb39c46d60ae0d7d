"""Translating an exported folder with CTranslate2 (ctxmt_cli.export.ct2_engine) gives what ctxmt gives.

Real CTranslate2 models exported from tiny random checkpoints: greedy translations are ctxmt's and their sentence
log-probabilities equal ctxmt's to 1e-4, for sentence-level (pre- and post-norm, per-side vocabularies) and
concatenation models (target context forced as CTranslate2's target_prefix over multi-sentence documents; given
target context; generate mode; other window sizes; windows at the token limit). Rows whose prefix or limit differ
from the batch's are searched again under their own limits. Beam n-best lists are CTranslate2's own: each
candidate's log-probability is ctxmt's forced-decoding score of it. int8 exports translate too.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from ctxmt_cli import api
from ctxmt_cli.decode.settings import TranslationStats
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.evaluate.testsets.base import ContrastiveItem
from ctxmt_cli.export.ct2_export import export_ctranslate2
from tests.unit.ct2_fixtures import CONCAT, SENTENCE, prepare_per_side, read_documents, write_checkpoint

pytest.importorskip("ctranslate2")
pytestmark = pytest.mark.usefixtures("one_thread")  # tests/unit/conftest.py


@pytest.fixture(scope="module")
def documents(prepared) -> list[list[str]]:
    """Four documents of 3, 1, 5 and 4 sentences (several in one step, windows of every size)."""
    return read_documents(prepared)

VARIANTS = {
    "sentence": (SENTENCE, None),
    "sentence-post-norm": ({**SENTENCE, "normalize_before": False}, None),
    "concat": (CONCAT, None),
    "concat-sKto1-post-norm": ({**CONCAT, "tgt_context_sentences": 0, "normalize_before": False}, None),
    "concat-short-windows": (CONCAT, {"max_window_tokens": 24}),     # windows cut to 24 tokens: the position table
}


@pytest.fixture(scope="module")
def pairs(prepared, tmp_path_factory) -> dict[str, tuple[api.Model, api.Model]]:
    """Variant -> (the checkpoint under ctxmt, its float32 export under CTranslate2)."""
    root, out = tmp_path_factory.mktemp("ct2"), {}
    for name, (model, data) in VARIANTS.items():
        ckpt = write_checkpoint(prepared, root / f"{name}.pt", model, data=data)
        export_ctranslate2(ckpt, root / name)
        out[name] = (api.load(ckpt, device="cpu"), api.load(root / name, device="cpu", engine="ctranslate2"))
    return out


def assert_same(ours, theirs, scores: bool = True) -> None:
    assert [d.translations for d in theirs] == [d.translations for d in ours]
    if scores:
        assert logprobs(theirs) == pytest.approx(logprobs(ours), abs=1e-4)


def logprobs(results) -> list[float]:
    """Every translated sentence's log-probability, document after document."""
    return [x for d in results for x in d.logprobs]


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_greedy_translations_and_scores_equal_ctxmt(variant, pairs, documents):
    torch_model, ct2_model = pairs[variant]
    ours = torch_model.translate(documents, beam=1, scores=True)
    theirs = ct2_model.translate(documents, beam=1, scores=True)
    assert_same(ours, theirs)
    assert all(math.isfinite(s) and s < 0 for d in theirs for s in d.logprobs)


def test_per_side_vocabularies(prepared, documents, tmp_path):
    per_side = prepare_per_side(tmp_path, prepared.parent / "raw")
    ckpt = write_checkpoint(per_side, tmp_path / "concat.pt", CONCAT)
    export_ctranslate2(ckpt, tmp_path / "ct2")
    torch_model, ct2_model = api.load(ckpt, device="cpu"), api.load(tmp_path / "ct2", device="cpu",
                                                                    engine="ctranslate2")
    assert not ct2_model.loaded.tokenizer.joint
    assert_same(torch_model.translate(documents, beam=1, scores=True), ct2_model.translate(documents, beam=1,
                                                                                          scores=True))


def test_generate_mode_and_other_window_sizes(pairs, documents):
    torch_model, ct2_model = pairs["concat"]
    mine, theirs = TranslationStats(), TranslationStats()
    assert_same(torch_model.translate(documents, beam=1, target_mode="generate", stats=mine),
                ct2_model.translate(documents, beam=1, target_mode="generate", stats=theirs), scores=False)
    assert theirs.fallbacks == mine.fallbacks                       # the same windows needed re-decoding
    for k in (0, 1, 3):
        assert_same(torch_model.translate(documents, beam=1, scores=True, context=k),
                    ct2_model.translate(documents, beam=1, scores=True, context=k))


def test_given_target_context_is_forced(pairs, documents):
    torch_model, ct2_model = pairs["concat"]
    given = [["ka lu mi no re sa ti vo ze ."], [], ["x"], documents[0][:2]]      # prefixes of several lengths
    docs = [api.Document(src, tgt_context=g) for src, g in zip(documents, given, strict=True)]
    assert_same(torch_model.translate(docs, beam=1, scores=True), ct2_model.translate(docs, beam=1, scores=True))


def eos_first(net) -> None:
    """``</s>`` wins every step: the decoder's last LayerNorm ends near a fixed vector that only ``</s>`` matches."""
    direction = np.random.default_rng(0).standard_normal(net.cfg.d_model).astype("float32")
    net.decoder_norm.weight.fill_(0.01)
    net.decoder_norm.bias.copy_(net.decoder_norm.bias.new_tensor(direction))
    net.output.weight[net.vocab.eos] = net.output.weight.new_tensor(direction)     # logit ~ |direction|^2 = d_model


def test_rows_are_searched_again_under_their_own_limits(prepared, documents, tmp_path, monkeypatch):
    """Every sentence is one token (``</s>`` is banned only first): a row whose target prefix is longer than the
    batch's shortest would end at once under the batch's minimum length, so it is searched again alone."""
    ckpt = write_checkpoint(prepared, tmp_path / "eos.pt", {**CONCAT, "share_embeddings": "none"}, edit=eos_first)
    export_ctranslate2(ckpt, tmp_path / "ct2")
    torch_model = api.load(ckpt, device="cpu")
    ct2_model = api.load(tmp_path / "ct2", device="cpu", engine="ctranslate2")
    calls = []
    search = ct2_model.engine._translate
    monkeypatch.setattr(ct2_model.engine, "_translate", lambda src, *a, **k: calls.append(len(src)) or
                        search(src, *a, **k))
    given = [["ka lu mi no ."], [], ["x"], []]
    docs = [api.Document(src, tgt_context=g) for src, g in zip(documents, given, strict=True)]
    for beam in (1, 3):
        calls.clear()
        ours, theirs = torch_model.translate(docs, beam=beam, scores=True), ct2_model.translate(docs, beam=beam,
                                                                                               scores=True)
        assert all(len(t.split()) == 1 for d in ours for t in d.translations)
        assert_same(ours, theirs)
        assert 1 in calls and max(calls) > 1                       # batched steps, and rows searched alone


def test_nbest_candidates_are_scored_as_ctxmt_scores_them(pairs, documents):
    torch_model, ct2_model = pairs["concat"]
    lenpen = ct2_model.recipe.decode.lenpen
    out = ct2_model.translate(documents, beam=3, nbest=3, scores=True)
    items = []
    for src, result in zip(documents, out, strict=True):
        context = []
        for j, sent in enumerate(result.sentences):
            assert sent.nbest[0].text == sent.text and sent.logprob == sent.nbest[0].logprob
            assert 1 <= len(sent.nbest) <= 3 and len({c.tokens for c in sent.nbest}) == len(sent.nbest)
            limit = len(ct2_model.loaded.tokenizer.encode_src(src[j])) + 3          # max_len_a 1.0, max_len_b 3
            for c in sent.nbest:
                assert 1 <= len(c.tokens) <= limit
                assert c.score == pytest.approx(c.logprob / (len(c.tokens) + 1) ** lenpen, rel=1e-6)
            items.append(ContrastiveItem(src[:j], src[j], list(context), [c.tokens for c in sent.nbest]))
            context.append(sent.nbest[0].tokens)
    forced = torch_model.score(items)                               # ctxmt's forced decoding of each candidate
    assert [c.logprob for d in out for s in d.sentences for c in s.nbest] == \
        pytest.approx([x for row in forced for x in row], abs=1e-4)


def test_an_int8_export_translates(prepared, documents, tmp_path):
    ckpt = write_checkpoint(prepared, tmp_path / "concat.pt", CONCAT)
    for q in ("float32", "int8"):
        export_ctranslate2(ckpt, tmp_path / q, quantization=q)
    size = {q: (tmp_path / q / "model.bin").stat().st_size for q in ("float32", "int8")}
    assert size["int8"] < size["float32"]                           # weight matrices as int8 (position tables stay)
    out = api.load(tmp_path / "int8", device="cpu", engine="ctranslate2").translate(documents, scores=True)
    assert [len(d.translations) for d in out] == [len(d) for d in documents]
    assert all(t.strip() for d in out for t in d.translations)
    assert all(math.isfinite(s) and s < 0 for d in out for s in d.logprobs)


def test_what_the_engine_cannot_do_is_refused(pairs, prepared, documents, tmp_path):
    torch_model, ct2_model = pairs["concat"]
    folder = ct2_model.checkpoint
    with pytest.raises(CtxmtError, match="Model.score runs ctxmt's own network"):
        ct2_model.score([api.ScoreItem([], [], "ka .", ["ka ."])])
    with pytest.raises(CtxmtError, match="Model.analyze"):
        ct2_model.analyze(documents, documents)
    with pytest.raises(CtxmtError, match="repair: the ctranslate2 engine"):
        api.load(folder, engine="ctranslate2", repair=torch_model.checkpoint)
    with pytest.raises(CtxmtError, match="first_pass: the ctranslate2 engine"):
        api.load(folder, engine="ctranslate2", first_pass=torch_model.checkpoint)
    with pytest.raises(CtxmtError, match="group_sentences=2: this concat model does not read sentence groups"):
        ct2_model.translate(documents, group_sentences=2)
    with pytest.raises(CtxmtError, match="group_order='length': this concat model does not read sentence groups"):
        ct2_model.translate(documents, group_order="length")
    with pytest.raises(CtxmtError, match="is a file; `engine` ctranslate2 takes the folder"):
        api.load(torch_model.checkpoint, engine="ctranslate2")
    with pytest.raises(CtxmtError, match="no ctxmt.json"):
        api.load(tmp_path, engine="ctranslate2")
    with pytest.raises(CtxmtError, match="missing not found; `engine` ctranslate2 takes the folder"):
        api.load(tmp_path / "missing", engine="ctranslate2")
    with pytest.raises(CtxmtError, match="engine='onnx': choose one of torch, ctranslate2"):
        api.load(folder, engine="onnx")
    with pytest.raises(CtxmtError, match="is a folder written by ctxmt export ctranslate2: translate it with `engine` "
                       "ctranslate2"):
        api.load(folder)
