"""The Python API (ctxmt_cli.api) on tiny random checkpoints: translate equals the CLI and the translator, given
target context is forced, n-best lists, scores equal the contrastive scorer's, score() equals `ctxmt contrastive`."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from ctxmt_cli import api
from ctxmt_cli.cli import app
from ctxmt_cli.config import recipe_to_dict, validate_recipe
from ctxmt_cli.core.batch import VocabInfo
from ctxmt_cli.data.store import PreparedData
from ctxmt_cli.decode.settings import DecodeSettings
from ctxmt_cli.decode.translator import translate_documents
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.evaluate.testsets.base import ContrastiveItem
from ctxmt_cli.models.families import build_model, context_sentences, resolve_model_config
from ctxmt_cli.outputs import torch_save
from ctxmt_cli.train.checkpoint import model_payload

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/unit/conftest.py

TINY = {"preset": None, "d_model": 32, "ffn_dim": 64, "heads": 4, "encoder_layers": 1, "decoder_layers": 1}
FAMILIES = {
    "sentence": {"family": "sentence"},
    "concat": {"family": "concat", "src_context_sentences": 1, "tgt_context_sentences": 1},   # s2to2
    "caching": {"family": "caching", "src_context_sentences": 2},                            # document memory
}
# short outputs keep the random models fast; beam 3 leaves room for 3-best lists
DECODE = {"beam": 3, "max_len_a": 1.0, "max_len_b": 3, "batch_docs": 2}


def write_checkpoint(prepared: Path, family: str, out: Path, spec: dict | None = None) -> Path:
    """A checkpoint of a tiny ``family`` model (or ``spec``) with random (peaked) weights and the prepared
    vocabulary."""
    data = PreparedData(prepared)
    tok = data.tokenizer
    recipe = validate_recipe({"data": {"path": str(prepared)}, "model": {**TINY, **(spec or FAMILIES[family])},
                              "decode": DECODE})
    recipe = recipe.model_copy(update={"model": resolve_model_config(recipe.model, data.meta)})
    vocab = VocabInfo(src_size=tok.src_vocab_size, tgt_size=tok.tgt_vocab_size, brk=tok.brk_id,
                      joint=data.meta.get("joint", True))
    torch.manual_seed(0)
    model = build_model(recipe.model, vocab)
    with torch.no_grad():                                                   # varied outputs, not one token
        for p in model.parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.35)
    return torch_save(model_payload(recipe_to_dict(recipe), tok, vocab, data.meta, model), out)


@pytest.fixture(scope="module")
def checkpoints(prepared, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("api")
    return {family: write_checkpoint(prepared, family, root / f"{family}.pt") for family in FAMILIES}


@pytest.fixture(scope="module")
def documents(prepared) -> list[list[str]]:
    """Three documents of 3, 1 and 4 sentences from the synthetic test split."""
    docs = (prepared.parent / "raw" / "test.src").read_text(encoding="utf-8").strip().split("\n\n")
    return [doc.splitlines()[:n] for doc, n in zip(docs, (3, 1, 4), strict=False)]


def cli_translate(checkpoint: Path, documents: list[list[str]], tmp_path: Path) -> list[list[str]]:
    src = tmp_path / "docs.txt"
    src.write_text("\n\n".join("\n".join(doc) for doc in documents) + "\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["translate", str(src), "-c", str(checkpoint), "-o", str(tmp_path / "out.txt"),
                                      "--device", "cpu"])
    assert result.exit_code == 0, result.output
    return [doc.split("\n") for doc in (tmp_path / "out.txt").read_text(encoding="utf-8").rstrip("\n").split("\n\n")]


@pytest.mark.parametrize("family", ["sentence", "concat"])
def test_translate_equals_the_cli_and_the_translator(family, checkpoints, documents, tmp_path):
    model = api.load(checkpoints[family], device="cpu")
    out = model.translate(documents)
    assert [len(d.translations) for d in out] == [len(d) for d in documents]
    assert [d.translations for d in out] == cli_translate(checkpoints[family], documents, tmp_path)
    src_ctx, tgt_ctx = context_sentences(model.recipe.model)
    settings = DecodeSettings(src_context_sentences=src_ctx, tgt_context_sentences=tgt_ctx, beam=3, max_len_a=1.0,
                              max_len_b=3)
    plain = translate_documents(model.loaded.model, model.loaded.tokenizer, documents, settings)
    assert [d.translations for d in out] == plain
    assert all(s.logprob is None and s.nbest is None for d in out for s in d.sentences)   # not asked for


def scorer_items(documents, results, given=None) -> list[ContrastiveItem]:
    """One item per translated sentence: its source context, the target context it was translated with (its
    document's earlier best translations, as token ids) and its n-best candidates (token ids)."""
    items = []
    for d, (doc, res) in enumerate(zip(documents, results, strict=True)):
        context = list((given or {}).get(d, []))
        for j, sent in enumerate(res.sentences, start=len(context)):
            items.append(ContrastiveItem(doc[:j], doc[j], list(context), [c.tokens for c in sent.nbest]))
            context.append(sent.nbest[0].tokens)
    return items


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_scores_equal_the_contrastive_scorer(family, checkpoints, documents):
    model = api.load(checkpoints[family], device="cpu")
    out = model.translate(documents, scores=True, nbest=3)
    sentences = [s for d in out for s in d.sentences]
    assert [s.logprob for s in sentences] == [s.nbest[0].logprob for s in sentences]
    scored = model.score(scorer_items(documents, out))                  # forced decoding, summed log-probabilities
    for row, sent in zip(scored, sentences, strict=True):
        assert row == pytest.approx([c.logprob for c in sent.nbest], abs=1e-4)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_document_continued_with_its_own_tokens_gives_the_same_translations(family, checkpoints, documents):
    model = api.load(checkpoints[family], device="cpu")
    doc = documents[2]
    whole = model.translate([doc], scores=True)[0]
    for k in (1, 3):
        given = [s.nbest[0].tokens for s in model.translate([doc], nbest=1)[0].sentences[:k]]
        rest = model.translate([api.Document(doc, tgt_context=given)], scores=True)[0]
        assert rest.translations == whole.translations[k:]
        assert rest.logprobs == pytest.approx(whole.logprobs[k:], abs=1e-5)


def test_given_target_context_is_forced(checkpoints, documents, prepared):
    model = api.load(checkpoints["concat"], device="cpu")
    doc = documents[0]
    gold = (prepared.parent / "raw" / "test.tgt").read_text(encoding="utf-8").split("\n")[:1]
    forced = model.translate([doc], tgt_context=[gold], scores=True, nbest=3)[0]
    assert len(forced.sentences) == len(doc) - 1                           # the given sentence is not translated
    # sentence 2's log-probabilities are those of its candidates after the gold sentence, not the model's own
    [scored] = model.score([ContrastiveItem(doc[:1], doc[1], gold, [c.tokens for c in forced.sentences[0].nbest])])
    assert scored == pytest.approx([c.logprob for c in forced.sentences[0].nbest], abs=1e-4)
    own = model.translate([doc], scores=True)[0]
    assert forced.logprobs[0] != pytest.approx(own.logprobs[1], abs=1e-3)
    same = model.translate([api.Document(doc, tgt_context=gold)], scores=True, nbest=3)[0]
    assert same == forced                                                 # Document.tgt_context = tgt_context
    with pytest.warns(FutureWarning, match=r"translate\(target_context=...\) is now tgt_context"):
        assert model.translate([doc], target_context=[gold], scores=True, nbest=3)[0] == forced   # the old name
    with pytest.raises(CtxmtError, match="at most one translation per source sentence"):
        model.translate([doc], tgt_context=[gold * 4])
    with pytest.raises(CtxmtError, match="generate"):
        model.translate([doc], tgt_context=[gold], target_mode="generate")
    renamed = pytest.warns(FutureWarning, match=r"mode=...\) is now target_mode")
    with pytest.raises(CtxmtError, match="generate"), renamed:
        model.translate([doc], tgt_context=[gold], mode="generate")


def test_nbest_lists_are_ranked_and_sized(checkpoints, documents):
    model = api.load(checkpoints["concat"], device="cpu")
    best = model.translate(documents)
    for n in (1, 2, 3):
        out = model.translate(documents, nbest=n)
        assert [d.translations for d in out] == [d.translations for d in best]
        for sent in (s for d in out for s in d.sentences):
            scores = [c.score for c in sent.nbest]
            assert len(sent.nbest) == n and scores == sorted(scores, reverse=True)
            assert len({c.tokens for c in sent.nbest}) == n                 # distinct hypotheses
            assert sent.nbest[0].text == sent.text
            for c in sent.nbest:                                            # the score is the normalised log-prob
                assert c.score == pytest.approx(c.logprob / (len(c.tokens) + 1) ** model.recipe.decode.lenpen,
                                                rel=1e-5)
    with pytest.raises(CtxmtError, match="nbest=4.*beam of 4"):
        model.translate(documents, nbest=4)
    assert len(model.translate(documents, nbest=4, beam=4)[0].sentences[0].nbest) == 4
    with pytest.raises(CtxmtError, match="prefix"):
        model.translate(documents, scores=True, target_mode="generate")


def test_score_equals_the_contrastive_command(checkpoints, documents, tmp_path):
    items = [{"src_context": documents[2][:j], "src": documents[2][j], "tgt_context": documents[0][:j],
              "candidates": [documents[0][j], documents[2][j], "ka ka ."]} for j in range(3)]
    path = tmp_path / "mine.jsonl"
    path.write_text("".join(json.dumps(item) + "\n" for item in items), encoding="utf-8")
    result = CliRunner().invoke(app, ["contrastive", f"jsonl:{path}", "-c", str(checkpoints["concat"]),
                                      "--out", str(tmp_path / "run"), "--device", "cpu"])
    assert result.exit_code == 0, result.output
    written = [float(line) for line in (tmp_path / "run" / "mine.scores").read_text().split()]  # -log p per candidate
    model = api.load(checkpoints["concat"], device="cpu")
    mine = [api.ScoreItem(i["src_context"], i["tgt_context"], i["src"], i["candidates"]) for i in items]
    assert [-s for row in model.score(mine, normalize="mean") for s in row] == pytest.approx(written, abs=1e-6)
    summed = model.score(mine)                                              # normalize="none": whole log-probs
    mean = model.score(mine, normalize="mean")
    assert all(s < m for row_s, row_m in zip(summed, mean, strict=True) for s, m in zip(row_s, row_m, strict=True))


def test_analyze_equals_the_analysis_command(checkpoints, documents, prepared, tmp_path):
    refs = (prepared.parent / "raw" / "test.tgt").read_text(encoding="utf-8").strip().split("\n\n")
    refs = [doc.splitlines()[:len(src)] for doc, src in zip(refs, documents, strict=False)]
    for name, docs in (("src.txt", documents), ("ref.txt", refs)):
        (tmp_path / name).write_text("\n\n".join("\n".join(d) for d in docs) + "\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["analyze-attention", "-c", str(checkpoints["concat"]), "--src",
                                      str(tmp_path / "src.txt"), "--ref", str(tmp_path / "ref.txt"), "--no-plots",
                                      "--out", str(tmp_path / "run"), "--device", "cpu"])
    assert result.exit_code == 0, result.output
    written = json.loads((tmp_path / "run" / "analysis.json").read_text())
    mine = api.load(checkpoints["concat"], device="cpu").analyze(documents, refs)
    assert mine["sentences"] == sum(len(d) for d in documents)
    assert {k: v for k, v in mine.items() if k not in ("checkpoint", "split")} == \
        {k: v for k, v in written.items() if k not in ("checkpoint", "split")}


def test_a_bilingual_model_reads_a_given_first_pass_or_its_first_pass_model(checkpoints, documents, prepared,
                                                                            tmp_path):
    spec = {"family": "hanoit", "bilingual": True, "encoder_layers": 2, "src_next_sentences": 1}
    bilingual = write_checkpoint(prepared, "hanoit", tmp_path / "bilingual.pt", spec)
    with pytest.raises(CtxmtError, match="`first_pass` SENTENCE_CKPT"):
        api.load(bilingual, device="cpu").translate(documents)
    model = api.load(bilingual, device="cpu", first_pass=checkpoints["sentence"])
    auto = model.translate(documents, scores=True)
    first = [d.translations for d in api.load(checkpoints["sentence"], device="cpu").translate(documents)]
    pairs = list(zip(documents, first, strict=True))
    given = model.translate([api.Document(src, first_pass=f) for src, f in pairs], scores=True)
    partial = model.translate([api.Document(src, first_pass=f[:1]) for src, f in pairs], scores=True)
    assert given == auto and partial == auto                    # the first-pass model completes a given prefix
    other = model.translate([api.Document(src, first_pass=["ka ka ."] * len(src)) for src in documents], scores=True)
    assert logprobs(other) != pytest.approx(logprobs(auto), abs=1e-3)             # and it is read



def logprobs(results) -> list[float]:
    """Every translated sentence's log-probability, document after document."""
    return [x for d in results for x in d.logprobs]


def test_a_model_reading_its_sentence_group_keeps_given_sentences_in_the_group(documents, prepared, tmp_path):
    model = api.load(write_checkpoint(prepared, "mbe", tmp_path / "mbe.pt", {"family": "mbe"}), device="cpu")
    whole = model.translate(documents, nbest=2)
    for sent in (s for d in whole for s in d.sentences):
        assert len(sent.nbest) == 2 and sent.nbest[0].score >= sent.nbest[1].score and sent.nbest[0].text == sent.text
    given = model.translate(documents, tgt_context=[d.translations[:2] for d in whole], nbest=2)
    assert [d.sentences for d in given] == [d.sentences[2:] for d in whole]   # the group still reads their sources
    alone = model.translate([d[2:] for d in documents], nbest=2)              # groups without those sentences
    assert [d.sentences for d in alone] != [d.sentences for d in given]


def test_translate_stream_gives_what_translate_gives(checkpoints, documents):
    model = api.load(checkpoints["concat"], device="cpu")
    whole = model.translate(documents, scores=True)
    for streamed in (model.translate_stream(documents, scores=True, batch_docs=2),
                     model.translate_stream(iter(documents), scores=True, batch_docs=1)):   # a list, an iterator
        streamed = list(streamed)
        assert [d.translations for d in streamed] == [d.translations for d in whole]
        for mine, theirs in zip(streamed, whole, strict=True):               # other batches: float noise only
            assert mine.logprobs == pytest.approx(theirs.logprobs, abs=1e-4)
    with pytest.raises(CtxmtError, match="Document"):
        list(model.translate_stream(documents, tgt_context=[[]] * 3))


def test_refusals_are_one_line_errors(checkpoints, documents, tmp_path):
    model = api.load(checkpoints["sentence"], device="cpu")
    with pytest.raises(CtxmtError, match="list of documents"):
        model.translate(["one sentence"][0])
    with pytest.raises(CtxmtError, match="2 entries for 3 documents"):
        model.translate(documents, tgt_context=[[], []])
    with pytest.raises(CtxmtError, match="reads no target context"):
        api.load(checkpoints["sentence"], device="cpu", first_pass=checkpoints["sentence"])
    with pytest.raises(CtxmtError, match="not found"):
        api.load(tmp_path / "missing.pt")


def test_importing_the_api_does_not_import_torch():
    code = "import sys, ctxmt_cli.api; print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() \
        == "False"


def test_every_setting_is_a_named_keyword_and_none_means_the_recipes(checkpoints, documents):
    """The settings are keyword-only parameters of translate and translate_stream (visible to help() and editors),
    each None by default; None is the recipe's value, so naming the recipe's value changes nothing."""
    import inspect

    for method in (api.Model.translate, api.Model.translate_stream):
        params = list(inspect.signature(method).parameters.values())[2:]      # after self and documents
        assert all(p.kind is p.KEYWORD_ONLY for p in params)
        assert {"beam", "lenpen", "nbest", "target_mode", "context", "batch_docs", "group_sentences", "group_order",
                "warmup_sentences"} <= {p.name for p in params if p.default is None}
    model = api.load(checkpoints["concat"], device="cpu")
    with pytest.raises(TypeError):
        model.translate(documents, None)                                      # no setting travels by position
    dec = model.recipe.decode
    assert model.translate(documents, scores=True) == model.translate(
        documents, scores=True, beam=dec.beam, lenpen=dec.lenpen, target_mode=dec.target_mode,
        batch_docs=dec.batch_docs)


def unread_documents():
    """An input that must not be read: settings are refused before the first document is."""
    raise AssertionError("a document was read before the settings were checked")
    yield


@pytest.mark.parametrize("name, value, message", [
    ("beam", 0, "beam=0: give a beam size >= 1"),            # 0 was read as "not given": the recipe's beam 3
    ("beam", -2, "beam=-2: give a beam size >= 1"),
    ("beam", 10**9, "beam=1000000000: "),
    ("lenpen", float("nan"), "lenpen=nan: "),
    ("lenpen", float("inf"), "lenpen=inf: "),
    ("nbest", 0, "nbest=0: "),
    ("batch_docs", 0, "batch_docs=0: give 1 or more documents"),
    ("target_mode", "reference", "target_mode='reference': choose prefix or generate"),
    ("warmup_sentences", -1, "warmup_sentences=-1: "),
])
def test_a_setting_given_is_taken_as_it_is_and_refused_in_one_line(checkpoints, documents, name, value, message):
    model = api.load(checkpoints["sentence"], device="cpu")
    with pytest.raises(CtxmtError) as refused:
        model.translate(documents, **{name: value})
    assert str(refused.value).startswith(message) and "\n" not in str(refused.value)
    assert refused.value.option == name                       # the command line shows it under its own flag
    with pytest.raises(CtxmtError, match=re.escape(message)):
        list(model.translate_stream(unread_documents(), **{name: value}))


def test_an_old_name_and_its_new_name_together_are_refused(checkpoints, documents):
    model = api.load(checkpoints["concat"], device="cpu")
    with pytest.raises(CtxmtError, match="mode is the earlier name of target_mode: give target_mode alone"):
        model.translate(documents, mode="prefix", target_mode="prefix")
    with pytest.raises(CtxmtError, match="earlier name of tgt_context"):
        model.translate(documents, target_context=[[]] * 3, tgt_context=[[]] * 3)
    with pytest.warns(FutureWarning, match=r"mode=...\) is now target_mode"):
        streamed = list(model.translate_stream(documents, mode="prefix"))
    assert [d.translations for d in streamed] == [d.translations for d in model.translate(documents)]
