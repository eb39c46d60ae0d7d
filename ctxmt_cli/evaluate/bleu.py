"""Corpus BLEU and chrF with sacrebleu, sentence- and document-level, signatures kept for reporting.

The papers' conventions are options of :func:`make_metrics`: detokenized BLEU with
sacrebleu's default ``13a`` tokenizer, lowercased BLEU (Voita et al. for Russian),
and "tokenized BLEU" (``tokenize="none"`` on text that is already tokenized).
Document-level scores join each document's sentences with a space into one
segment on both sides, so n-grams may cross sentence boundaries inside a document.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sacrebleu.metrics import BLEU, CHRF

from ctxmt_cli.errors import CtxmtError, OptionError, option

# every name sacrebleu's BLEU accepts; some need extras (ja-mecab, ko-mecab) or a download (spm, flores*)
TOKENIZERS: tuple[str, ...] = tuple(BLEU.TOKENIZERS)
DEFAULT_TOKENIZE = BLEU.TOKENIZER_DEFAULT  # "13a", the WMT / mteval-v13a convention


@dataclass
class Score:
    """One corpus-level figure: ``name`` (``BLEU``, ``chrF``, ``doc-BLEU`` ...), its value and sacrebleu signature."""

    name: str
    score: float
    signature: str


def check_tokenize(tokenize: str) -> None:
    """Refuse a tokenizer name sacrebleu does not know, listing the ones it does."""
    if tokenize not in TOKENIZERS:
        raise CtxmtError(f"unknown {option('tokenize')} {tokenize!r}; sacrebleu accepts: {', '.join(TOKENIZERS)}")


def make_metrics(lowercase: bool = False, tokenize: str = DEFAULT_TOKENIZE) -> dict:
    """Fresh ``{"BLEU": BLEU, "chrF": CHRF}`` sacrebleu metric objects for these options.

    ``lowercase`` applies to BLEU only, as sacrebleu's own ``--lowercase`` does (chrF
    keeps its case-sensitive default), so the signatures read as the papers' do.
    """
    check_tokenize(tokenize)
    try:
        bleu = BLEU(lowercase=lowercase, tokenize=tokenize)
    except Exception as err:  # tokenizers import optional packages or download models: any failure is the user's setup
        raise OptionError("tokenize", tokenize, f"sacrebleu could not set up this tokenizer "
                         f"({type(err).__name__}: {err}); install what it needs or choose another") from None
    return {"BLEU": bleu, "chrF": CHRF()}


def corpus_scores(hypotheses: Sequence[str], references: Sequence[str], lowercase: bool = False,
                  tokenize: str = DEFAULT_TOKENIZE, prefix: str = "") -> list[Score]:
    """BLEU and chrF of aligned hypothesis/reference segments (one reference per segment)."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    scores = []
    for name, metric in make_metrics(lowercase, tokenize).items():
        result = metric.corpus_score(list(hypotheses), [list(references)])
        scores.append(Score(prefix + name, result.score, str(metric.get_signature())))
    return scores


def document_scores(hyp_docs: Sequence[Sequence[str]], ref_docs: Sequence[Sequence[str]],
                    lowercase: bool = False, tokenize: str = DEFAULT_TOKENIZE) -> list[Score]:
    """Document-level BLEU and chrF (``doc-BLEU``, ``doc-chrF``) of aligned documents."""
    if len(hyp_docs) != len(ref_docs):
        raise ValueError(f"{len(hyp_docs)} hypothesis documents but {len(ref_docs)} reference documents")
    # a document empty on both sides has no sentence to score; dropping it keeps the pairs aligned
    pairs = [(h, r) for h, r in zip(hyp_docs, ref_docs, strict=True) if h or r]
    hyps = [" ".join(h) for h, _ in pairs]
    refs = [" ".join(r) for _, r in pairs]
    return corpus_scores(hyps, refs, lowercase=lowercase, tokenize=tokenize, prefix="doc-")


def format_score(score: Score) -> str:
    """``BLEU = 34.12  (nrefs:1|case:mixed|...)``, the line ctxmt prints for a figure."""
    return f"{score.name} = {score.score:.2f}  ({score.signature})"
