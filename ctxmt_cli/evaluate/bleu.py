"""Corpus BLEU and chrF with sacrebleu (signatures kept for reporting)."""

from __future__ import annotations

from dataclasses import dataclass

from sacrebleu.metrics import BLEU, CHRF


@dataclass
class Score:
    name: str
    score: float
    signature: str


def corpus_scores(hypotheses: list[str], references: list[str], lowercase: bool = False, tokenize: str = "13a") -> list[Score]:
    """BLEU and chrF of aligned hypothesis/reference lines."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    bleu = BLEU(lowercase=lowercase, tokenize=tokenize)
    chrf = CHRF()
    b = bleu.corpus_score(hypotheses, [references])
    c = chrf.corpus_score(hypotheses, [references])
    return [Score("BLEU", b.score, str(bleu.get_signature())), Score("chrF", c.score, str(chrf.get_signature()))]
