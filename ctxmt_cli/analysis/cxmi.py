"""Conditional cross-mutual information: how much a model uses its context (Fernandes et al. 2021).

CXMI(C -> Y | X) = H(Y | X) - H(Y | X, C), estimated with one model on a test split:
the same model scores each reference sentence y given its source x with no context and
with up to K context sentences C (the gold previous source and target sentences of the
same document, fewer at a document start, the oldest dropped when the window would
exceed the recipe's ``max_window_tokens``, exactly as in training), and

    CXMI = mean over sentences of  log q(y | x, C) - log q(y | x).

Two normalisations are reported: per sentence (the difference of summed token
log-probabilities, the paper's formula) and per token (the difference of the sentences'
mean token log-probabilities, as the authors' public script). The scored tokens are the
current target sentence and its ``</s>``, identical in both rows. Per-sentence values
(P-CXMI) go to a JSON-lines file.

``random_context``: the control. The context of each sentence is drawn (seeded) from
another document: as many consecutive sentence pairs as the gold context could have, the
source and target sides kept aligned; the window limit applies as for gold context.

A model that reads next source sentences (``src_next_sentences``, the offline setting of Yang et al.'s
HanoiT) gets them from the document in the context row, as in training
(:func:`ctxmt_cli.data.windows.fit_window`: the farthest context sentence dropped first when the window is
too long); with ``random_context`` they too come from another document.

Both rows of every sentence go through the contrastive scorer
(:func:`ctxmt_cli.evaluate.contrastive.score_rows`), which scores identical rows once: a
sentence-level model reads no context, so its two rows are the same row and its CXMI is
exactly 0; a sentence at a document start has no context and contributes exactly 0.

On the synthetic benchmark the per-sentence discourse events (which phenomenon, at which
distance) are re-derived from the source by the generator's own translation rules and
checked against the reference; the figures are then also given per tag (``by_tag``).

``tokens``: the figures restricted to chosen target words (P-CXMI averaged over their tokens, e.g. the French
pronouns; matching rules in :mod:`ctxmt_cli.analysis.cxmi_words`), under ``restricted``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ctxmt_cli.analysis.cxmi_words import check_words, render_words, word_figures
from ctxmt_cli.config_base import DEFAULT_MAX_TOKENS
from ctxmt_cli.errors import CtxmtError, OptionError, option
from ctxmt_cli.outputs import remove_stale, write_atomic
from ctxmt_cli.paths import check_not_input, check_output_file

log = logging.getLogger(__name__)

DEFINITION = ("CXMI = mean over sentences of log q(y|x,C) - log q(y|x) (Fernandes et al. 2021), nats; per_token: "
              "difference of the sentence's mean token log-probabilities (current target sentence + </s>), "
              "per_sentence: difference of their sums; C = up to K previous gold (or, with random context, "
              "another document's) source and target sentences, fewer at a document start (and, for a model "
              "reading them, next source sentences, fewer at a document end); a sentence without context counts 0")
TAGS = ("synthetic benchmark: the discourse events of each sentence, re-derived from the source by the generator's "
        "translation rules; context-dependent = an event whose antecedent is >= 1 sentence back (by phenomenon, "
        "and by the farthest such distance d), other = the rest")

# a document: (source ids, target ids) per sentence
Document = list[tuple[tuple[int, ...], tuple[int, ...]]]


@dataclass
class CxmiRequest:
    """What ``ctxmt cxmi`` was asked to do (the CLI's options, one field each)."""

    checkpoint: Path
    data: Path | None = None
    split: str = "test"
    context: int | None = None
    random_context: bool = False
    seed: int = 1
    max_tokens: int = DEFAULT_MAX_TOKENS
    device: str = "cpu"
    out: str | Path | None = None               # as given: a trailing slash names a folder, refused
    per_sentence: str | Path | None = None
    tokens: Sequence[str] | None = None         # P-CXMI restricted to these target words too
    force: bool = False                            # replace an existing --out / --per-sentence file
    log_format: str | None = None               # rows scored so far, on stderr (None: a bar on a terminal)


@dataclass(frozen=True)
class SentencePair:
    """One reference sentence: its scoring row without and with context, and the context sizes it got."""

    doc: int
    sentence: int
    plain: tuple
    contextual: tuple
    context: tuple[int, int]                       # (source, target) previous context sentences in ``contextual``
    next: int = 0                                  # next source sentences in ``contextual``


def document_pairs(split) -> list[Document]:
    """The split's documents as (source ids, target ids) per sentence."""
    return [[(tuple(split.src(i).tolist()), tuple(split.tgt(i).tolist())) for i in range(start, end)]
            for start, end in split.documents()]


def random_donor(docs: list[Document], keep: int, rng: np.random.Generator) -> Callable[[int, int], list]:
    """Context of sentence ``j`` of document ``d`` drawn from another document: as many consecutive
    pairs as the gold context could hold (``min(keep, j)``), from a random start."""
    if len(docs) < 2:
        raise CtxmtError(f"{option('random_context')} draws context from another document, but the split has one; "
                         "use a split with several documents")

    def donor(d: int, j: int, wanted: int | None = None) -> list:
        """``wanted`` pairs (default: what the previous context of sentence ``j`` could hold)."""
        wanted = min(keep, j) if wanted is None else wanted
        if wanted == 0:
            return []
        other = int(rng.integers(len(docs) - 1))
        other += other >= d                                              # any document but d
        start = int(rng.integers(max(len(docs[other]) - wanted, 0) + 1))
        return docs[other][start:start + wanted]

    return donor


def cxmi_context(cfg, context: int | None, docs: list[Document]) -> tuple[int, int]:
    """(source, target) previous sentences of the contextual rows: those the model translates with (``context``: K
    on each side it reads), or, for a model that reads the sentences around it as one group (mbe), every previous
    sentence the window limit holds, as contrastive scoring gives it (:meth:`Inputs.scoring_context`)."""
    from ctxmt_cli.models.families import inputs_of

    return inputs_of(cfg).scoring_context(context, max((len(doc) for doc in docs), default=1) - 1)


def sentence_pairs(docs: list[Document], keep: tuple[int, int], limit: int,
                   donor: Callable[..., list] | None = None, following: int = 0) -> list[SentencePair]:
    """Rows without and with context for every sentence; ``donor(d, j)`` replaces the gold previous pairs
    (``donor(d, j, n)`` the ``n`` gold next ones); ``following``: next source sentences, for a model reading them."""
    from ctxmt_cli.data.windows import fit_window
    from ctxmt_cli.decode.steps import fit_context

    pairs = []
    for d, doc in enumerate(docs):
        for j, (x, y) in enumerate(doc):
            previous = doc[:j] if donor is None else donor(d, j)                  # (src, tgt) pairs, oldest first
            n_after = min(following, len(doc) - 1 - j)                            # never past the document end
            after = [p[0] for p in (doc[j + 1:j + 1 + n_after] if donor is None else donor(d, j, n_after))]
            sides = [[p[0] for p in previous], [p[1] for p in previous]]
            recent = sides[0][max(len(previous) - keep[0], 0):]
            c_src, m = fit_window([len(s) for s in recent], [len(s) for s in after], keep[0], following,
                                  limit - len(x) - 1)                            # the window limit of training
            c_tgt = fit_context(sides[1], keep[1], limit - len(y) - 1)
            contextual = (sides[0][len(previous) - c_src:] + after[:m] + [x], sides[1][len(previous) - c_tgt:] + [y],
                          1) + ((m,) if following else ())                  # a row's next sentences: score_rows
            pairs.append(SentencePair(d, j, ([x], [y], 1), contextual, (c_src, c_tgt), m))
    return pairs


def score_pairs(model, tokenizer, pairs: list[SentencePair], max_tokens: int, per_token: bool = False, *,
                progress: Callable[[int], None] | None = None) -> tuple:
    """Summed log-probabilities without and with context, and the scored token counts, per sentence; with
    ``per_token``, a fourth element: each sentence's scored tokens' log-probability differences (context minus
    none, ``</s>`` last). ``progress(n)``: after each batch of n distinct rows (a sentence without context is one
    row, not two)."""
    from ctxmt_cli.evaluate.contrastive import score_rows

    rows = [p.plain for p in pairs] + [p.contextual for p in pairs]
    logprob, tokens, *kept = score_rows(model, tokenizer, rows, max_tokens=max_tokens, per_token=per_token,
                                        progress=progress)
    n = len(pairs)
    if not per_token:
        return logprob[:n], logprob[n:], tokens[:n]
    return logprob[:n], logprob[n:], tokens[:n], [c - p for p, c in zip(kept[0][:n], kept[0][n:], strict=True)]


def figures(plain: np.ndarray, contextual: np.ndarray, tokens: np.ndarray) -> dict:
    """CXMI per token and per sentence over the given sentences."""
    if len(plain) == 0:
        return {"cxmi_per_token": None, "cxmi_per_sentence": None, "n": 0}
    delta = contextual - plain
    return {"cxmi_per_token": float(np.mean(delta / tokens)), "cxmi_per_sentence": float(np.mean(delta)),
            "n": int(len(plain))}


def synthetic_tags(prepared, split: str, docs: list[Document]) -> list[list[str]] | None:
    """Per-sentence tags of a prepared synthetic benchmark split, or None when they cannot be re-derived.

    Tags: ``context-dependent`` or ``other``; for each context-dependent event its phenomenon, and
    ``d=N`` (``d>3``) for the farthest antecedent.
    """
    from ctxmt_cli.decode.documents import read_documents as read_text_documents
    from ctxmt_cli.synthetic.lexicon import build_lexicon, translate_document

    source = prepared.meta.get("source") or {}
    raw = prepared.dir / str(source.get("raw", "raw"))
    if source.get("format") != "synthetic" or not (raw / f"{split}.src").is_file():
        return None
    src_docs, tgt_docs = (read_text_documents(raw / f"{split}.{side}") for side in ("src", "tgt"))
    src_docs, tgt_docs = [d for d in src_docs if d], [d for d in tgt_docs if d]
    if [len(d) for d in src_docs] != [len(d) for d in docs] or [len(d) for d in tgt_docs] != [len(d) for d in docs]:
        return None
    lexicon = build_lexicon(int(source.get("seed", 1)))
    tags = []
    for src, tgt in zip(src_docs, tgt_docs, strict=True):
        translated = translate_document(src, lexicon)
        if [t for t, _ in translated] != tgt:                              # not the generator's output (edited?)
            return None
        for _, events in translated:
            far = [(p, dist) for p, dist in events if dist >= 1]
            if not far:
                tags.append(["other"])
                continue
            top = max(dist for _, dist in far)
            tags.append(["context-dependent", *sorted({p for p, _ in far}), f"d={top}" if top <= 3 else "d>3"])
    return [tags[start:start + len(d)] for start, d in zip(np.cumsum([0] + [len(d) for d in docs]), docs, strict=False)]


def _check_request(req: CxmiRequest) -> None:
    """Checks that need no model or data: run before any work."""
    if req.context is not None and req.context < 0:
        raise OptionError("context", req.context, "give a number of context sentences >= 0")
    if req.max_tokens < 16:
        raise OptionError("max_tokens", req.max_tokens, "give a token budget >= 16")
    if req.tokens is not None:
        check_words(req.tokens)
    for path, what in ((req.out, option("out")), (req.per_sentence, option("per_sentence"))):
        if path is not None:
            check_output_file(path, what, force=req.force, inputs=(req.checkpoint, req.data), make_parents=True)
    both = req.out is not None and req.per_sentence is not None
    if both and Path(req.out).resolve() == Path(req.per_sentence).resolve():
        raise CtxmtError(f"{option('out')} and {option('per_sentence')} are the same file {req.out}; give two file "
                         "names")


def run_cxmi(req: CxmiRequest) -> dict:
    """Score the split without and with context; returns the figures and writes --out / --per-sentence."""
    _check_request(req)
    loaded, prepared, docs = _model_and_split(req)
    keep, following = _context_sizes(req, loaded.recipe.model, docs)
    donor = random_donor(docs, max(keep), np.random.default_rng(req.seed)) if req.random_context else None
    pairs = sentence_pairs(docs, keep, loaded.recipe.data.max_window_tokens, donor, following)
    plain, contextual, tokens, *deltas = _scored(loaded, pairs, req)
    tags = synthetic_tags(prepared, req.split, docs)
    flat_tags = None if tags is None else [t for doc in tags for t in doc]
    result = summarize(plain, contextual, tokens, pairs, flat_tags)
    if req.tokens is not None:
        result["restricted"] = word_figures([p.plain[1][0] for p in pairs], deltas[0],
                                            lambda token: loaded.tokenizer.piece(token, "tgt"), req.tokens)
    result.update({
        "context": max(*keep, following) if req.context is None else req.context,
        "context_sentences": {"src": keep[0], "tgt": keep[1], "src_next": following},
        "random_context": req.random_context,
        "seed": req.seed if req.random_context else None, "checkpoint": str(req.checkpoint),
        "data": str(prepared.dir), "split": req.split, "definition": DEFINITION,
    })
    if req.per_sentence is not None:
        lines = per_sentence_lines(plain, contextual, tokens, pairs, flat_tags)
        _write(Path(req.per_sentence), "".join(json.dumps(line) + "\n" for line in lines))
    if req.out is not None:
        _write(Path(req.out), json.dumps(result, indent=2) + "\n")
    return result


def _model_and_split(req: CxmiRequest) -> tuple:
    """The checkpoint's model (one reading source context only), its prepared data (the recipe's data folder
    unless ``req.data`` names one; no output file inside it) and the split's documents."""
    from ctxmt_cli.data.store import PreparedData
    from ctxmt_cli.evaluate.translation import check_vocabulary
    from ctxmt_cli.models.families import inputs_of
    from ctxmt_cli.models.loading import load_model, torch_device

    loaded = load_model(req.checkpoint, device=torch_device(req.device))
    if inputs_of(loaded.recipe.model).target_concat:                  # its target context needs a first pass
        raise CtxmtError(f"{req.checkpoint} is a {loaded.recipe.model.family} model reading target context; cxmi "
                         "scores source context only and gives it no target context (first pass): use a "
                         "source-context checkpoint")
    prepared = PreparedData(Path(req.data or loaded.recipe.data.path))
    for path, what in ((req.out, option("out")), (req.per_sentence, option("per_sentence"))):
        if path is not None:                        # the recipe's data folder, when --data did not name it
            check_not_input(Path(path), [prepared.dir], what)
    docs = document_pairs(prepared.split(req.split))
    check_vocabulary(loaded, prepared, req.checkpoint)
    return loaded, prepared, docs


def _context_sizes(req: CxmiRequest, model_cfg, docs) -> tuple[tuple[int, int], int]:
    """The (source, target) context sentences and the next sentences scored with context; a warning when there
    are none (CXMI is then 0 by construction)."""
    from ctxmt_cli.models.families import next_sentences

    keep = cxmi_context(model_cfg, req.context, docs)
    following = next_sentences(model_cfg, req.context)
    if max(*keep, following) == 0:          # correct, but a column of zeros without a word reads like a fault
        why = (f"{option('context')} 0 gives no context sentences" if req.context == 0 else
               f"{req.checkpoint} is a sentence-level model: it reads no context")
        log.warning(f"{why}, so CXMI is 0 by construction")
    return keep, following


def _scored(loaded, pairs: list[SentencePair], req: CxmiRequest) -> tuple:
    """:func:`score_pairs`, the rows scored so far on stderr in ``req.log_format``; the total counts both rows of
    every sentence, so the count jumps to it at the end where identical rows were scored once."""
    from ctxmt_cli.logs import CountLog

    log, done, total = CountLog.periodic(req.log_format, "rows"), 0, 2 * len(pairs)

    def advance(n: int) -> None:
        nonlocal done
        done += n
        log.update("cxmi", done, total)

    log.update("cxmi", 0, total)
    try:
        scored = score_pairs(loaded.model, loaded.tokenizer, pairs, req.max_tokens, per_token=req.tokens is not None,
                             progress=advance)
        log.update("cxmi", total, total)
        return scored
    finally:
        log.close()


def summarize(plain, contextual, tokens, pairs: list[SentencePair], tags: list[list[str]] | None) -> dict:
    """The overall figures, those of the sentences that had context, and (with tags) per tag."""
    had = np.array([max(p.context) > 0 or p.next > 0 for p in pairs], dtype=bool)
    result = {**figures(plain, contextual, tokens), "tokens": int(tokens.sum()), "n_with_context": int(had.sum()),
              "with_context": figures(plain[had], contextual[had], tokens[had])}
    if tags is not None:
        names = sorted({t for ts in tags for t in ts}, key=lambda t: (t not in ("context-dependent", "other"), t))
        result["by_tag"] = {name: figures(*(a[[name in ts for ts in tags]] for a in (plain, contextual, tokens)))
                            for name in names}
        result["tags"] = TAGS
    return result


def per_sentence_lines(plain, contextual, tokens, pairs: list[SentencePair], tags) -> list[dict]:
    """P-CXMI: one record per sentence (document and sentence index from 0)."""
    lines = []
    for i, pair in enumerate(pairs):
        delta = float(contextual[i] - plain[i])
        line = {"doc": pair.doc, "sentence": pair.sentence, "p_cxmi_per_token": delta / float(tokens[i]),
                "p_cxmi_per_sentence": delta, "tokens": int(tokens[i]),
                "has_context": max(pair.context) > 0 or pair.next > 0,
                "context_sentences": list(pair.context), "next_sentences": pair.next,
                "logprob": {"context": float(contextual[i]), "no_context": float(plain[i])}}
        if tags is not None:
            line["tags"] = tags[i]
        lines.append(line)
    return lines


def _write(path: Path, text: str) -> None:
    """Write through a temporary file and a rename: a crash never leaves half a file."""
    remove_stale(path.parent)
    write_atomic(path, text)


def render(result: dict) -> str:
    """The printed report: one row per group of sentences."""
    side = result["context_sentences"]
    if result["random_context"]:
        kind = f"random context from other documents (seed {result['seed']})"
    else:
        kind = "gold context"
    after = f" + {side['src_next']} next" if side.get("src_next") else ""
    lines = [f"CXMI, split {result['split']}: K = {result['context']} (source {side['src']}{after}, "
             f"target {side['tgt']} context sentences), {kind}; {result['n']} sentences, "
             f"{result['n_with_context']} with context, "
             f"{result['tokens']} tokens",
             f"{'sentences':<20}{'n':>7}{'per token':>13}{'per sentence':>15}"]
    groups = {"all": result, "with context": result["with_context"], **result.get("by_tag", {})}
    for name, fig in groups.items():
        values = [f"{fig[k]:.4f}" if fig[k] is not None else "-" for k in ("cxmi_per_token", "cxmi_per_sentence")]
        lines.append(f"{name:<20}{fig['n']:>7}{values[0]:>13}{values[1]:>15}")
    if "tags" in result:
        lines.append(f"tags: {result['tags']}")
    return "\n".join(lines + render_words(result.get("restricted")))
