"""BLEU/chrF through ctxmt equal sacrebleu's own numbers; the papers' conventions change scores as they should."""

from __future__ import annotations

import pytest
import sacrebleu

from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.evaluate.bleu import (
    TOKENIZERS,
    check_tokenize,
    corpus_scores,
    document_scores,
    format_score,
    make_metrics,
)

REFS = ["The cat sat on the mat.", "A dog barked loudly at night.", "We went to the market today.",
        "She reads a book.", "It is raining again."]
HYPS = ["the cat sat on a mat.", "A dog barked at night .", "We go to the market today.",
        "She read a book.", "It rains again."]


def by_name(scores):
    return {s.name: s for s in scores}


def test_equal_to_sacrebleu_own_numbers():
    scores = by_name(corpus_scores(HYPS, REFS))
    assert scores["BLEU"].score == pytest.approx(sacrebleu.corpus_bleu(HYPS, [REFS]).score)
    assert scores["chrF"].score == pytest.approx(sacrebleu.corpus_chrf(HYPS, [REFS]).score)
    assert "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:" in scores["BLEU"].signature
    assert "nc:6|nw:0" in scores["chrF"].signature


def test_lowercase_raises_bleu_on_case_errors_and_says_so():
    mixed = by_name(corpus_scores(HYPS, REFS))["BLEU"]
    lower = by_name(corpus_scores(HYPS, REFS, lowercase=True))["BLEU"]
    assert lower.score > mixed.score
    assert lower.score == pytest.approx(sacrebleu.corpus_bleu(HYPS, [REFS], lowercase=True).score)
    assert "case:lc" in lower.signature


def test_tokenize_none_is_tokenized_bleu():
    # "night ." vs "night.": 13a splits the period off both sides, 'none' leaves "night." one token
    t13a = by_name(corpus_scores(HYPS, REFS, tokenize="13a"))["BLEU"]
    none = by_name(corpus_scores(HYPS, REFS, tokenize="none"))["BLEU"]
    assert none.score < t13a.score and "tok:none" in none.signature
    assert none.score == pytest.approx(sacrebleu.corpus_bleu(HYPS, [REFS], tokenize="none").score)
    char = by_name(corpus_scores(HYPS, REFS, tokenize="char"))["BLEU"]
    assert "tok:char" in char.signature and char.score != t13a.score


def test_unknown_tokenizer_is_a_user_error_listing_choices():
    with pytest.raises(CtxmtError, match="unknown `tokenize` 'moses'.*13a"):
        check_tokenize("moses")
    with pytest.raises(CtxmtError):
        make_metrics(tokenize="moses")
    assert {"13a", "intl", "none", "char", "zh"} <= set(TOKENIZERS)


def test_document_level_joins_each_documents_sentences():
    hyp_docs, ref_docs = [HYPS[:2], HYPS[2:]], [REFS[:2], REFS[2:]]
    doc = by_name(document_scores(hyp_docs, ref_docs))
    joined_h = [" ".join(HYPS[:2]), " ".join(HYPS[2:])]
    joined_r = [" ".join(REFS[:2]), " ".join(REFS[2:])]
    assert doc["doc-BLEU"].score == pytest.approx(sacrebleu.corpus_bleu(joined_h, [joined_r]).score)
    assert doc["doc-chrF"].score == pytest.approx(sacrebleu.corpus_chrf(joined_h, [joined_r]).score)
    assert doc["doc-BLEU"].score != pytest.approx(by_name(corpus_scores(HYPS, REFS))["BLEU"].score)
    # a document empty on both sides is dropped, not scored as an empty segment pair
    with_empty = by_name(document_scores([*hyp_docs, []], [*ref_docs, []]))
    assert with_empty["doc-BLEU"].score == pytest.approx(doc["doc-BLEU"].score)


def test_format_score_line():
    line = format_score(by_name(corpus_scores(HYPS, REFS))["BLEU"])
    assert line.startswith("BLEU = ") and "  (nrefs:1|" in line
    assert float(line.split()[2]) == pytest.approx(sacrebleu.corpus_bleu(HYPS, [REFS]).score, abs=0.005)
