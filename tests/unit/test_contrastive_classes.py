"""Accuracy per class, balanced accuracy and the context gain (a sentence-level model gains exactly nothing)."""

from types import SimpleNamespace

import numpy as np
import pytest

from ctxmt_cli.evaluate.contrastive import decisions, score_contexts, score_testset
from ctxmt_cli.evaluate.contrastive_classes import class_accuracy, context_gain
from ctxmt_cli.evaluate.contrastive_report import render_classes, score_sets
from ctxmt_cli.evaluate.mcnemar import mcnemar
from ctxmt_cli.evaluate.testsets import ContrastiveItem, TestSet
from ctxmt_cli.evaluate.testsets.generic import class_key
from tests.unit.test_contrastive import make_model, make_set

PRONOUNS = ["il"] * 5 + ["elle"] * 2 + ["elles"] * 3          # uneven shares, as SCAT's


def pronoun_set() -> TestSet:
    items = [ContrastiveItem([], "s", [], ["a", "b"], tags={"pronoun": p}) for p in PRONOUNS]
    return TestSet("scatlike", "scat", items, groupings=("pronoun",), classes="pronoun")


def test_a_constant_choice_scores_its_share_but_chance_balanced():
    """Always answering one class is right on that class's items only: raw accuracy is its share, balanced
    accuracy 1 / (number of classes) whatever the shares."""
    ts = pronoun_set()
    for constant in ("il", "elle", "elles"):
        result = class_accuracy(ts, [p == constant for p in PRONOUNS])
        assert result["balanced_accuracy"] == pytest.approx(1 / 3)
        assert result["by_class"][constant] == {"accuracy": 1.0, "n": PRONOUNS.count(constant)}
        assert sum(c["n"] for c in result["by_class"].values()) == len(PRONOUNS)
    mixed = [True, False, True, True, True, True, False, False, True, True]
    result = class_accuracy(ts, mixed)
    assert result["class_key"] == "pronoun"
    assert result["balanced_accuracy"] == pytest.approx((4 / 5 + 1 / 2 + 2 / 3) / 3)


def test_a_set_without_classes_is_one_class_and_compound_classes_join_their_tags():
    items = [ContrastiveItem([], "s", [], ["a", "b"], tags={"phenomenon": "deixis", "ctx_dist": d}) for d in (1, 1, 3)]
    correct = [True, False, False]
    plain = class_accuracy(TestSet("t", "jsonl", items), correct)
    assert plain["by_class"] == {"all": {"accuracy": 1 / 3, "n": 3}} and plain["balanced_accuracy"] == 1 / 3
    voita = class_accuracy(TestSet("t", "voita", items, classes="phenomenon/ctx_dist"), correct)
    assert list(voita["by_class"]) == ["deixis/1", "deixis/3"] and voita["balanced_accuracy"] == 0.25
    assert class_key(["distance", "phenomenon", "pronoun"]) == "pronoun" and class_key(["class", "pronoun"]) == "class"
    assert class_key(["distance"]) is None


def test_gain_is_the_difference_of_the_two_runs_figures():
    ts = pronoun_set()
    with_context = [True] * 10
    without = [p == "il" for p in PRONOUNS]                        # the masculine prior alone
    gain = context_gain(ts, with_context, without)
    assert gain["accuracy"] == pytest.approx(1 - 0.5) and gain["balanced_accuracy"] == pytest.approx(1 - 1 / 3)
    assert gain["only_with_context"] == 5 and gain["only_without_context"] == 0
    assert gain["p_exact"] == mcnemar(with_context, without)["p_exact"] < 0.1
    assert gain["without_context"]["by_class"] == {"elle": 0.0, "elles": 0.0, "il": 1.0}
    with pytest.raises(ValueError):
        context_gain(ts, with_context, without[:-1])


def test_a_sentence_level_model_gains_exactly_nothing(tokenizer, one_thread):
    model, ts = make_model(tokenizer, 0), make_set(n_items=20)
    ts.classes = "phenomenon"
    loaded = SimpleNamespace(model=model, tokenizer=tokenizer)
    _, decided, summaries = score_sets(loaded, [ts], context_gain=True)
    gain = summaries["toy"]["context_gain"]
    assert gain["accuracy"] == 0.0 and gain["balanced_accuracy"] == 0.0 and gain["p_exact"] == 1.0
    assert gain["only_with_context"] == gain["only_without_context"] == 0
    assert gain["without_context"]["accuracy"] == summaries["toy"]["accuracy"] == sum(decided["toy"]) / 20
    assert "context_gain" not in score_sets(loaded, [ts])[2]["toy"]


def test_a_context_model_s_gain_equals_two_independent_runs(tokenizer, one_thread):
    """A concatenation model reading 2 sentences: the gain reported from the one-pass scoring equals the
    difference of the accuracies of two separate runs, with and without context, computed here by hand."""
    model, ts = make_model(tokenizer, 2), make_set(n_items=40, seed=3)
    ts.classes = "phenomenon"
    with_context = decisions(ts, score_testset(model, tokenizer, ts))
    without = decisions(ts, score_testset(model, tokenizer, ts, context=0))
    assert with_context != without                                  # the model reads its context
    _, _, summaries = score_sets(SimpleNamespace(model=model, tokenizer=tokenizer), [ts], context_gain=True)
    gain = summaries["toy"]["context_gain"]
    def accuracy(decisions):
        return sum(decisions) / len(decisions)

    assert gain["accuracy"] == pytest.approx(accuracy(with_context) - accuracy(without))

    def balanced(d):
        classes = {item.tags["phenomenon"] for item in ts.items}
        pairs = list(zip(ts.items, d, strict=True))
        return np.mean([accuracy([ok for item, ok in pairs if item.tags["phenomenon"] == c]) for c in classes])

    assert gain["balanced_accuracy"] == pytest.approx(balanced(with_context) - balanced(without))
    assert gain["p_exact"] == mcnemar(with_context, without)["p_exact"]
    differ = sum(a != b for a, b in zip(with_context, without, strict=True))
    assert gain["only_with_context"] + gain["only_without_context"] == differ
    one_pass = score_contexts(model, tokenizer, ts, contexts=(None, 0))
    separately = (score_testset(model, tokenizer, ts), score_testset(model, tokenizer, ts, context=0))
    for joint, alone in zip(one_pass, separately, strict=True):
        np.testing.assert_allclose(np.concatenate(joint), np.concatenate(alone), atol=2e-6)
    table = render_classes({"sets": summaries, "aggregates": {}})
    assert [c.header for c in table.columns][-3:] == ["without", "gain", "p (McNemar)"]
    assert table.row_count == len(summaries["toy"]["by_class"]) + 2              # every class, all, balanced
    assert list(table.columns[1].cells) == [*summaries["toy"]["by_class"], "all", "balanced"]
