"""Training-corpus cleaning in the manner of Moses ``clean-corpus-n.perl``: length limits and a length ratio.

Lengths are counted in words (runs of non-space characters) of the raw text, as Moses does, so the limits
mean the same whatever the vocabulary. A pair is dropped when either side has fewer than ``min_words`` or
more than ``max_words`` words, or when the longer side has more than ``max_length_ratio`` times the words
of the shorter. Each dropped pair is counted under the first reason it meets, in that order
(:data:`REASONS`); nothing is dropped without being counted.

Only the train split is cleaned: validation and test sentences are what a model is scored on, never removed.

Documents: a dropped sentence leaves a gap in its document, and a model that reads neighbouring sentences
as context would otherwise read, across the gap, a context that the document never had. So a document is
cut at every dropped sentence: the sentences before and after the gap become two documents (counted as
``documents_split``); a document whose sentences are all dropped disappears (``documents_dropped``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ctxmt_cli.errors import CtxmtError, option

#: the reasons a pair is dropped, in the order they are checked
REASONS = ("too_short", "too_long", "length_ratio")


@dataclass(frozen=True)
class CleanRules:
    """The cleaning options; 0 turns a rule off (the default: nothing is cleaned)."""

    min_words: int = 0
    max_words: int = 0
    max_length_ratio: float = 0.0

    @property
    def active(self) -> bool:
        """Whether any rule is on."""
        return bool(self.min_words or self.max_words or self.max_length_ratio)

    def check(self) -> None:
        """Refuse contradictory or meaningless values (one line naming the options)."""
        if self.min_words < 0 or self.max_words < 0:
            raise CtxmtError(f"{option('min_words')} and {option('max_words')} must be ≥ 0 (0 turns the limit off)")
        if self.max_words and self.min_words > self.max_words:
            raise CtxmtError(f"{option('min_words')} {self.min_words} is above {option('max_words')} {self.max_words}; "
                             f"nothing would be kept: lower {option('min_words')} or raise {option('max_words')}")
        if self.max_length_ratio and self.max_length_ratio < 1:
            raise CtxmtError(f"{option('max_length_ratio')} {self.max_length_ratio} is below 1; give a ratio ≥ 1 "
                             "(Moses uses 9), or 0 to turn it off")

    def reason(self, src: str, tgt: str) -> str | None:
        """Why the pair ``(src, tgt)`` is dropped (one of :data:`REASONS`), or None to keep it."""
        ls, lt = len(src.split()), len(tgt.split())
        if self.min_words and min(ls, lt) < self.min_words:
            return "too_short"
        if self.max_words and max(ls, lt) > self.max_words:
            return "too_long"
        if self.max_length_ratio and max(ls, lt) > self.max_length_ratio * max(min(ls, lt), 1):
            return "length_ratio"
        return None

    def to_meta(self) -> dict:
        """The rules as ``meta.json`` records them."""
        return {"min_words": self.min_words, "max_words": self.max_words,
                "max_length_ratio": self.max_length_ratio, "splits": ["train"]}


def new_counts() -> dict[str, int]:
    """Zeroed cleaning counts: one per reason, plus the documents cut or emptied."""
    return {**dict.fromkeys(REASONS, 0), "documents_split": 0, "documents_dropped": 0}


def clean_document(rules: CleanRules, pairs: Sequence[tuple[str, str]], counts: dict[str, int]) -> list[list[int]]:
    """The runs of kept sentences of one document (indices into ``pairs``), cut at every dropped one;
    ``counts`` (:func:`new_counts`) gains what was dropped."""
    runs: list[list[int]] = [[]]
    for k, (src, tgt) in enumerate(pairs):
        why = rules.reason(src, tgt)
        if why is None:
            runs[-1].append(k)
            continue
        counts[why] += 1
        if runs[-1]:
            runs.append([])
    runs = [run for run in runs if run]
    if not runs:
        counts["documents_dropped"] += 1
    elif len(runs) > 1:
        counts["documents_split"] += 1
    return runs
