"""P-CXMI restricted to chosen target words (Fernandes et al. 2021): word matching over SentencePiece pieces,
every word = the all-word figure, no match = an honest n of 0, a sentence-level model exactly 0, bad word lists."""

from __future__ import annotations

import pytest

from ctxmt_cli.analysis.cxmi import (
    CxmiRequest,
    document_pairs,
    render,
    run_cxmi,
    score_pairs,
    sentence_pairs,
    summarize,
)
from ctxmt_cli.analysis.cxmi_words import parse_words, render_words, word_figures, words_of
from ctxmt_cli.data.store import PreparedData
from ctxmt_cli.errors import OptionError
from ctxmt_cli.models.families import context_sentences
from tests.unit.test_cxmi import make_model


@pytest.fixture(scope="module")
def data(prepared):
    store = PreparedData(prepared)
    docs = document_pairs(store.split("valid"))
    return store.tokenizer, docs, [y for doc in docs for _, y in doc]


def piece_of(tokenizer):
    return lambda token: tokenizer.piece(token, "tgt")


def test_words_are_the_pieces_between_word_boundaries(data):
    tok, _, targets = data
    assert not tok.moses
    multi = 0
    for ids in targets:
        words = words_of(ids, piece_of(tok))
        assert [w for w, _, _ in words] == tok.decode_tgt(ids).casefold().split()       # the sentence's words
        ends = [e for _, _, e in words]
        assert [(s, e) for _, s, e in words] == list(zip([0] + ends[:-1], ends, strict=True))   # adjacent spans
        assert words[-1][2] == len(ids)
        multi += sum(e - s > 1 for _, s, e in words)
    assert multi > 0                                                                     # multi-piece words occur
    pieces = {7: "\u2581Il", 8: "s", 9: "\u2581", 10: "elle", 11: "\u2581a"}
    assert words_of([7, 8, 9, 10, 11], pieces.get) == [("ils", 0, 2), ("elle", 2, 4), ("a", 4, 5)]


def test_every_word_gives_the_all_word_figure_and_pieces_sum_to_the_sentences(data, one_thread):
    tok, docs, targets = data
    model = make_model(tok, "concat")
    pairs = sentence_pairs(docs, context_sentences(model.cfg), 1024)
    plain, contextual, tokens, deltas = score_pairs(model, tok, pairs, 300, per_token=True)
    assert [len(d) for d in deltas] == list(tokens) == [len(y) + 1 for y in targets]
    vocabulary = sorted({w for ids in targets for w, _, _ in words_of(ids, piece_of(tok))})
    every = word_figures(targets, deltas, piece_of(tok), vocabulary)
    figures = ("n", "tokens", "p_cxmi_per_word", "p_cxmi_per_token")
    assert {k: every[k] for k in figures} == every["all_words"]
    assert every["n"] == sum(len(words_of(y, piece_of(tok))) for y in targets) and every["p_cxmi_per_word"] != 0.0
    assert every["tokens"] == tokens.sum() - len(pairs)                    # every scored token but the </s>
    eos = sum(float(d[-1]) for d in deltas)
    assert every["p_cxmi_per_word"] * every["n"] + eos == pytest.approx(float((contextual - plain).sum()), abs=1e-3)
    assert sum(f["n"] for f in every["by_word"].values()) == every["n"]
    some = word_figures(targets, deltas, piece_of(tok), [vocabulary[0].upper(), vocabulary[1]])
    assert some["words"] == vocabulary[:2] and 0 < some["n"] < every["n"]  # case-folded
    assert some["n"] == some["by_word"][vocabulary[0]]["n"] + some["by_word"][vocabulary[1]]["n"]
    assert "all words" in "\n".join(render_words(some))


def test_no_matching_word_is_an_honest_zero(data, one_thread):
    tok, docs, targets = data
    pairs = sentence_pairs(docs, (2, 2), 1024)
    *_, deltas = score_pairs(make_model(tok, "concat"), tok, pairs, 300, per_token=True)
    none = word_figures(targets, deltas, piece_of(tok), ["zzzz"])
    assert none["n"] == none["tokens"] == 0 and none["p_cxmi_per_word"] is None and none["p_cxmi_per_token"] is None
    assert none["by_word"] == {"zzzz": {"n": 0, "tokens": 0, "p_cxmi_per_word": None, "p_cxmi_per_token": None}}
    lines = render_words(none)
    assert len(lines) == 1 and "no target word matched (n = 0" in lines[0]


def test_a_sentence_level_model_gives_exactly_zero_on_any_word(data, one_thread):
    tok, docs, targets = data
    model = make_model(tok, "sentence")
    pairs = sentence_pairs(docs, context_sentences(model.cfg), 1024)
    plain, contextual, tokens, deltas = score_pairs(model, tok, pairs, 300, per_token=True)
    word = words_of(targets[0], piece_of(tok))[0][0]
    figures = word_figures(targets, deltas, piece_of(tok), [word])
    assert figures["n"] > 0 and figures["p_cxmi_per_word"] == 0.0 and figures["all_words"]["p_cxmi_per_token"] == 0.0
    result = {**summarize(plain, contextual, tokens, pairs, None), "restricted": figures, "split": "valid",
              "context": 0, "context_sentences": {"src": 0, "tgt": 0}, "random_context": False, "seed": None}
    assert f"P-CXMI on target words {word}" in render(result)


@pytest.mark.parametrize("value", ["", ",", "il,,elle", " , ", "il elle"])
def test_a_bad_word_list_is_refused(value, tmp_path):
    with pytest.raises(OptionError, match="tokens="):
        parse_words(value)
    with pytest.raises(OptionError, match="tokens="):                        # before the checkpoint is read
        run_cxmi(CxmiRequest(checkpoint=tmp_path / "missing.pt", tokens=value.split(",")))
    assert parse_words(" il, elle,il ") == ("il", "elle")
