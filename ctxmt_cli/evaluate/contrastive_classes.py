"""Context use, not priors: accuracy per class, balanced accuracy and the context's gain on a contrastive set.

Raw accuracy rewards a model's priors as much as its use of context. SCAT's 997 scorable test items (Yin et al.
2021) are il 322 / elle 298 / elles 377, so a model that always picks the masculine pronoun scores 32.3% and one
that always picks the feminine 67.7%. Two figures separate the two:

* per class: each set's reader declares which tag names an item's class, the kind of its correct candidate
  (:attr:`~ctxmt_cli.evaluate.testsets.base.TestSet.classes`: SCAT the correct pronoun's gender, Lopes and
  ContraPro the correct pronoun, Voita the phenomenon and antecedent distance); ``balanced_accuracy`` is the
  unweighted mean of the per-class accuracies. A model that always makes the same choice is right on the classes
  that choice wins only; the readers pick classes that one choice each wins (SCAT's test split has no correct
  ``ils``, so its classes are the genders), so such a model scores 1 / (number of classes), whatever their shares;
* context gain: the same model scored in the same run with every item's source and target context dropped
  (``context=0``; the rows a sentence-level model scores do not change, so its gain is exactly 0). The gain is
  the difference in accuracy and in balanced accuracy, with McNemar's exact p on the paired per-item decisions
  (:func:`ctxmt_cli.evaluate.mcnemar.mcnemar`: A = with context, B = without).
"""

from __future__ import annotations

from ctxmt_cli.evaluate.contrastive import grouped
from ctxmt_cli.evaluate.mcnemar import mcnemar
from ctxmt_cli.evaluate.testsets.base import TestSet

DEFINITIONS = {
    "balanced_accuracy": "unweighted mean of the accuracies per class (by_class; the class is the tag class_key "
                         "names, e.g. the correct pronoun): a model choosing by the classes' priors cannot raise it",
    "context_gain": "the same model scored in the same run with every item's source and target context dropped: "
                    "accuracy and balanced_accuracy with context minus without, McNemar's exact two-sided p on the "
                    "paired decisions (only_with_context: right with context only; only_without_context: right "
                    "without it only)",
}


def class_accuracy(testset: TestSet, correct: list[bool]) -> dict:
    """``{"class_key", "by_class": {CLASS: {"accuracy", "n"}}, "balanced_accuracy"}`` of one set's decisions; a set
    that declares no class is one class, ``"all"``."""
    by_class = {name: {"accuracy": sum(oks) / len(oks), "n": len(oks)}
                for name, oks in grouped(testset.items, correct, testset.classes).items()}
    balanced = sum(c["accuracy"] for c in by_class.values()) / len(by_class) if by_class else 0.0
    return {"class_key": testset.classes, "by_class": by_class, "balanced_accuracy": balanced}


def context_gain(testset: TestSet, with_context: list[bool], without_context: list[bool]) -> dict:
    """What context adds to the decisions of one set: the differences in accuracy and balanced accuracy (with
    minus without), McNemar's test on the paired decisions, and the figures without context."""
    if len(with_context) != len(testset.items) or len(without_context) != len(testset.items):
        raise ValueError(f"{len(with_context)} and {len(without_context)} decisions for {len(testset.items)} items")
    scored = [(sum(d) / max(len(d), 1), class_accuracy(testset, d)) for d in (with_context, without_context)]
    test = mcnemar(with_context, without_context)
    (acc, classes), (acc0, classes0) = scored
    return {"accuracy": acc - acc0, "balanced_accuracy": classes["balanced_accuracy"] - classes0["balanced_accuracy"],
            "p_exact": test["p_exact"], "only_with_context": test["only_a"],
            "only_without_context": test["only_b"],
            "without_context": {"accuracy": acc0, "balanced_accuracy": classes0["balanced_accuracy"],
                                "by_class": {k: v["accuracy"] for k, v in classes0["by_class"].items()}}}
