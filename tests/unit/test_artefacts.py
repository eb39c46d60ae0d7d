"""Ties, strict accuracy and unknown-token shares: hand-made scores and a real SentencePiece tokenizer."""

from __future__ import annotations

import pytest

from ctxmt_cli.evaluate.artefacts import (
    DEFINITIONS,
    RecordingTokenizer,
    artefact_report,
    artefact_warning,
    strict_decisions,
    tie_count,
    unknown_shares,
)
from ctxmt_cli.evaluate.contrastive import decisions
from ctxmt_cli.evaluate.contrastive_report import render, warning_lines
from ctxmt_cli.evaluate.testsets import ContrastiveItem, TestSet

# correct index, scores (higher = better): what each item shows
CASES = [
    (0, [-1.0, -1.0, -2.0]),        # tie with the best contrastive: first_index wins it, strict loses it
    (0, [-1.0, -2.0]),              # clear win
    (1, [-1.5, -1.5, -3.0]),        # tie, the correct one second: both rules lose it
    (2, [-3.0, -2.0, -2.0]),        # tie, the correct one last
    (0, [-2.0, -1.0]),              # clear loss
    (1, [-4.0, -0.25]),             # clear win, correct not first
    (0, [-0.5, -0.500001]),         # not a tie: the stored scores differ in the 6th decimal
]


def _set(tie_rule: str, cases=CASES) -> TestSet:
    items = [ContrastiveItem([], f"s{n}", [], [f"c{k}" for k in range(len(row))], correct=c)
             for n, (c, row) in enumerate(cases)]
    return TestSet("hand", "jsonl", items, tie_rule=tie_rule)


def test_ties_and_the_strict_rule_on_hand_made_scores():
    scores = [row for _, row in CASES]
    for rule in ("first_index", "strict"):
        testset = _set(rule)
        assert tie_count(testset, scores) == 3
        assert strict_decisions(testset, scores) == [False, True, False, False, False, True, True]
    # the publisher's rule decides ties its own way; the strict rule never counts one as correct
    assert decisions(_set("first_index"), scores) == [True, True, False, False, False, True, True]
    assert decisions(_set("strict"), scores) == strict_decisions(_set("strict"), scores)


def test_a_tie_with_a_contrastive_candidate_below_the_best_counts_too():
    # the correct candidate equals a contrastive one that is not the best: a tie, lost under both rules
    cases = [(0, [-2.0, -1.0, -2.0]), (1, [-0.5, -3.0, -3.0, -4.0]), (0, [-1.0, -2.0, -3.0]), (2, [-9.0, -1.0, -9.0])]
    scores = [row for _, row in cases]
    for rule in ("first_index", "strict"):
        assert tie_count(_set(rule, cases), scores) == 3
    assert decisions(_set("first_index", cases), scores) == [False, False, True, False]
    assert "any other candidate" in DEFINITIONS["ties"]


def test_every_item_a_tie_reads_as_a_perfect_score_only_under_first_index(tokenizer):
    cases = [(0, [-2.0, -2.0])] * 20
    scores = [row for _, row in cases]
    testset = _set("first_index", cases)
    assert sum(decisions(testset, scores)) == 20  # 100% under Voita's rule
    report = artefact_report(testset, scores, tokenizer)
    assert report["ties"] == 20 and report["strict_accuracy"] == 0.0
    assert "20 of 20 items (100.0%) are ties" in report["warning"] and "\n" not in report["warning"]


def test_unknown_shares_count_the_unk_id(tokenizer):
    unk = tokenizer.unk_id
    known = ContrastiveItem(["ka lu"], "mi no", [], ["re sa", "ti vo"])
    foreign = ContrastiveItem([], "mi no", [], ["привет мир", "пока мир"], candidate_contexts=[["ka"], ["жук"]])
    testset = TestSet("mixed", "jsonl", [known, foreign])
    ids = {s: tokenizer.encode_batch([s], "tgt")[0] for s in ["re sa", "ti vo", "привет мир", "пока мир", "ka", "жук"]}
    assert all(unk not in ids[s] for s in ("re sa", "ti vo", "ka")) and unk in ids["привет мир"]
    candidates = ["re sa", "ti vo", "ka", "привет мир", "жук", "пока мир"]  # with the group's own sentences
    expected = sum(ids[s].count(unk) for s in candidates) / sum(len(ids[s]) for s in candidates)
    shares = unknown_shares(tokenizer, testset)
    assert shares["tgt"] == pytest.approx(expected) and 0 < shares["tgt"] < 1
    assert shares["src"] == 0.0                      # every source word is in the vocabulary
    recording = RecordingTokenizer(tokenizer)
    recording.encode_batch(candidates, "tgt")         # what the scorer encoded is not encoded again
    assert unknown_shares(recording, testset) == shares
    assert unknown_shares(tokenizer, TestSet("empty", "jsonl", [])) == {"tgt": 0.0, "src": 0.0}


def test_warning_thresholds_and_the_printed_table():
    clean = {"ties": 5, "strict_accuracy": 0.9, "unknown_share": {"tgt": 0.05, "src": 0.3}}
    assert artefact_warning("set", clean, 100) is None  # 5% is not more than 5%; the source side never warns
    unknown = dict(clean, unknown_share={"tgt": 0.051, "src": 0.0})
    assert "5.1% of its target tokens are unknown" in artefact_warning("set", unknown, 100)
    ties = dict(clean, ties=6)
    line = artefact_warning("deixis_test", ties, 100)
    assert line.startswith("deixis_test: 6 of 100 items (6.0%) are ties") and "strict accuracy 90.00%" in line
    results = {"sets": {"deixis_test": {"accuracy": 1.0, "n": 100, "by": {}, "tie_rule": "first_index",
                                        **ties, "warning": line}}, "aggregates": {}}
    assert warning_lines(results) == [line]
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(render(results))
    text = console.export_text()
    assert all(word in text for word in ("strict", "ties", "unk tgt/src", "100.00 (first_index)", "90.00", "5.0/30.0"))
