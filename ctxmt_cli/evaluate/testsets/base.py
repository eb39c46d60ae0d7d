"""What every contrastive test-set reader returns: items in one layout, plus the publisher's rules.

A reader turns a publisher's files into :class:`TestSet` objects. The scorer
(:mod:`ctxmt_cli.evaluate.contrastive`) never asks which publisher a set came
from: it scores :class:`ContrastiveItem` candidates, applies ``tie_rule`` and
reports accuracy grouped by the tag keys in ``groupings`` and per class (``classes``).

Candidate order is the publisher's order (ContraPro/Lopes/SCAT: correct first,
then each contrastive variant; Voita: the ``dst`` list order), so the scores
file -- one score per line, ``-log p`` (lower = better), items in file order,
candidates in candidate order -- is exactly what the publisher's script reads.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

TieRule = Literal["strict", "first_index"]


@dataclass
class ContrastiveItem:
    """One test item.

    ``src_context`` / ``tgt_context`` are oldest -> newest. ``candidates`` are
    current target sentences. Where candidates differ in their context
    sentences too (Voita groups), ``candidate_contexts[k]`` is candidate k's own
    target context (same length as ``src_context``) and replaces ``tgt_context``.
    """

    src_context: list[str]
    src: str
    tgt_context: list[str]
    candidates: list[str]
    correct: int = 0
    tags: dict = field(default_factory=dict)
    candidate_contexts: list[list[str]] | None = None

    def target_context(self, k: int) -> list[str]:
        """Target context of candidate ``k`` (its own where the set has one, else the gold one)."""
        return self.candidate_contexts[k] if self.candidate_contexts is not None else self.tgt_context


@dataclass
class TestSet:
    """A contrastive set as its publisher defines it.

    name:        the publisher's file stem (``deixis_test``, ``contrapro``, ...); names ``OUT/NAME.scores``.
    kind:        reader name (``voita``, ``contrapro``, ``lopes``, ``scat``, ``synthetic``, ``jsonl``).
    tie_rule:    ``strict`` = the correct candidate must beat every other one strictly (ties lose;
                 ContraPro, Lopes, SCAT, ctxmt); ``first_index`` = argmax with ties to the lowest index
                 (Voita's ``evaluate_consistency.py``, argmin of losses).
    groupings:   tag keys to report accuracy by (e.g. ``("ctx_dist",)``, ``("distance", "pronoun")``).
    classes:     the tag key (``KEY`` or ``KEY/KEY``) whose value is an item's class, the kind of its correct
                 candidate (SCAT: the correct pronoun's gender; ContraPro: er/sie/es; Voita: phenomenon and
                 distance): accuracy per class and the balanced accuracy, their unweighted mean, which a model
                 picking by the classes' priors cannot raise above chance; None: the whole set is one class.
    files:       every file read, for the checksums in results.json.
    src_lang / tgt_lang: the language pair, checked against the checkpoint's where both are known.
    pretokenized: the text is already Moses-tokenized (Voita's sets): skip Moses, apply SentencePiece only.
    """

    __test__ = False  # not a pytest class

    name: str
    kind: str
    items: list[ContrastiveItem]
    tie_rule: TieRule = "strict"
    groupings: tuple[str, ...] = ()
    classes: str | None = None
    files: list[Path] = field(default_factory=list)
    src_lang: str | None = None
    tgt_lang: str | None = None
    pretokenized: bool = False

    def checksums(self) -> dict[str, str]:
        """sha256 of every file read, keyed by file name."""
        return {str(p): hashlib.sha256(Path(p).read_bytes()).hexdigest() for p in self.files}


def scores_lines(scores: list[list[float]]) -> list[str]:
    """The publisher-layout scores file: one ``-log p`` per line (lower = better), candidates in order."""
    return [f"{0.0 - s:.6f}" for row in scores for s in row]  # 0.0 - s: no "-0.000000"
