"""When a contrastive accuracy is an artefact: ties, the strict rule, and tokens the model cannot read.

A model whose vocabulary does not cover a test set's language maps the candidates' words to the unknown
token, so candidates that differ only in those words score exactly alike. Voita et al.'s rule (argmin of
the losses, first index on ties) then picks the first candidate, and since the correct candidate is the
first one in every deixis and ellipsis item, it reports 100%. Beside each publisher's rule, every set gets:

* ``ties``: items whose correct candidate's score equals the score of any other candidate (the best contrastive
  one or not: a set of identical unknown-token candidates ties them all, whichever wins), decided on exact
  equality of the stored scores -- the scorer rounds them to the scores file's 6 decimals, so a tie here is a
  tie for the publishers' scripts too;
* ``strict_accuracy``: the share of items whose correct candidate is strictly better than every
  contrastive one (ContraPro's rule; equal to ``accuracy`` where the publisher's rule is already strict);
* ``unknown_share``: of the target tokens of the candidates (every sentence of a candidate group) and of the
  source tokens of the items (context and current sentences), after the model's own tokenizer, the share
  that is the unknown token (``unk_id``); ``{"tgt": share, "src": share}``.

A set where more than 5% of the target tokens are unknown or more than 5% of the items are ties gets a
one-line ``warning``.
"""

from __future__ import annotations

from collections import Counter

from ctxmt_cli.evaluate.testsets.base import TestSet

TIE_LIMIT = 0.05          # share of items decided by a tie above which a result is flagged
UNKNOWN_LIMIT = 0.05      # share of unknown target tokens above which a result is flagged
DEFINITIONS = {
    "ties": "items whose correct candidate's score equals any other candidate's score, the best contrastive one's "
            "or not (exact equality of the stored scores, rounded to the scores file's 6 decimals)",
    "strict_accuracy": "share of items whose correct candidate scores strictly better than every contrastive one "
                       "(ContraPro's rule; ties lose)",
    "unknown_share": "share of tokens that are the model's unknown token after its tokenizer: tgt = every sentence of "
                     "every candidate, src = context and current source sentences of every item",
}


class RecordingTokenizer:
    """A tokenizer that keeps what ``encode_batch`` returned, so the unknown-token count re-encodes nothing.

    Every other attribute is the wrapped tokenizer's.
    """

    def __init__(self, tokenizer):
        self._tokenizer = tokenizer
        self.seen: dict[tuple[str, bool, str], list[int]] = {}

    def __getattr__(self, name):
        return getattr(self._tokenizer, name)

    def encode_batch(self, texts, side: str, pretokenized: bool = False) -> list[list[int]]:
        """The wrapped tokenizer's ids, remembered per (side, pretokenized, text)."""
        ids = self._tokenizer.encode_batch(texts, side, pretokenized=pretokenized)
        for text, row in zip(texts, ids, strict=True):
            self.seen[side, pretokenized, text] = list(row)
        return ids


def tie_count(testset: TestSet, scores: list[list[float]]) -> int:
    """Items whose correct candidate's score equals any other candidate's score (exact equality): a tie with a
    contrastive candidate below the best one counts too (``DEFINITIONS["ties"]``)."""
    return sum(any(row[item.correct] == s for k, s in enumerate(row) if k != item.correct)
               for item, row in zip(testset.items, scores, strict=True))


def strict_decisions(testset: TestSet, scores: list[list[float]]) -> list[bool]:
    """Per item: is the correct candidate strictly better than every contrastive one?"""
    return [all(row[item.correct] > s for k, s in enumerate(row) if k != item.correct)
            for item, row in zip(testset.items, scores, strict=True)]


def _sentences(testset: TestSet) -> dict[str, Counter]:
    """How often each sentence occurs, per side: candidates (with their own group sentences) and sources."""
    tgt, src = Counter(), Counter()
    for item in testset.items:
        src.update([*item.src_context, item.src])
        for k, candidate in enumerate(item.candidates):
            own = item.candidate_contexts[k] if item.candidate_contexts is not None else []
            tgt.update([*own, candidate])
    return {"tgt": tgt, "src": src}


def unknown_shares(tokenizer, testset: TestSet) -> dict[str, float]:
    """``{"tgt": share, "src": share}`` of tokens equal to ``tokenizer.unk_id`` (0.0 for a side without tokens).

    Reuses the ids a :class:`RecordingTokenizer` kept while scoring; encodes only what it has not seen.
    """
    seen = getattr(tokenizer, "seen", {})
    shares = {}
    for side, counts in _sentences(testset).items():
        missing = [s for s in counts if (side, testset.pretokenized, s) not in seen]
        ids = {}
        if missing:
            encoded = tokenizer.encode_batch(missing, side, pretokenized=testset.pretokenized)
            ids = dict(zip(missing, encoded, strict=True))
        total = unknown = 0
        for sentence, n in counts.items():
            row = ids[sentence] if sentence in ids else seen[side, testset.pretokenized, sentence]
            total += n * len(row)
            unknown += n * sum(1 for t in row if t == tokenizer.unk_id)
        shares[side] = unknown / total if total else 0.0
    return shares


def artefact_report(testset: TestSet, scores: list[list[float]], tokenizer) -> dict:
    """``{"ties", "strict_accuracy", "unknown_share": {"tgt", "src"}, "warning"}`` for one scored set."""
    strict = strict_decisions(testset, scores)
    report = {"ties": tie_count(testset, scores), "strict_accuracy": sum(strict) / max(len(strict), 1),
              "unknown_share": unknown_shares(tokenizer, testset)}
    report["warning"] = artefact_warning(testset.name, report, len(testset.items))
    return report


def artefact_warning(name: str, report: dict, n: int) -> str | None:
    """One line when the set's accuracy may be an artefact of ties or unknown tokens, else None."""
    tie_share, unknown = report["ties"] / max(n, 1), report["unknown_share"]["tgt"]
    reasons = []
    if unknown > UNKNOWN_LIMIT:
        reasons.append(f"{100 * unknown:.1f}% of its target tokens are unknown to the model's vocabulary")
    if tie_share > TIE_LIMIT:
        reasons.append(f"{report['ties']} of {n} items ({100 * tie_share:.1f}%) are ties (the correct "
                       "candidate's score equals another candidate's)")
    if not reasons:
        return None
    return (f"{name}: {' and '.join(reasons)}; its accuracy may be an artefact of the tie rule "
            f"(strict accuracy {100 * report['strict_accuracy']:.2f}%): score it with a model of the set's language")
