"""Generate mode across documents: every target window generated at once, not one sentence per document and step.

In ``generate`` mode a concatenation model writes the whole target window of a sentence from ``<s>`` and its
source window (Lupo et al. 2022), so no window reads an earlier output: the windows of all documents are
decoded side by side, ``batch_docs`` rows a batch, longest source window first (rows of a batch have similar
lengths: less padding). Slots (:mod:`ctxmt_cli.decode.slots`) would run one step per sentence of the longest
document with at most one row per document: a few long documents (Europarl's 14 debates) kept a dozen rows a step.

A window whose separators are not the expected number is decoded again in prefix mode
(:attr:`~ctxmt_cli.decode.settings.TranslationStats.fallbacks`), after every window was generated: those
retries read the document's earlier translations, so the n-th retry of every document goes in one wave, once
the earlier ones are known. The windows, limits and retries are those of the slot translator; only the order
of the work changes, so the translations are the ones slots give.
"""

from __future__ import annotations

from collections.abc import Callable

from ctxmt_cli.decode.search import Hypothesis
from ctxmt_cli.decode.slots import SlotTranslator
from ctxmt_cli.decode.steps import generated_sentence, source_window, step_batch


def _batches(rows: list, size: int):
    for start in range(0, len(rows), size):
        yield rows[start:start + size]


def _generate_all(slots: SlotTranslator, sources: list,
                  step_done: Callable[[int], None]) -> list[list[Hypothesis | None]]:
    """Every window generated; per document and sentence the kept sentence (None: wrong separator count)."""
    s, vocab = slots.s, slots.vocab
    following = s.src_next_sentences or 0
    size = {(d, j): len(source_window(doc, j, s.src_context_sentences, s.max_window_tokens, vocab, following))
            for d, doc in enumerate(sources) for j in range(len(doc))}
    order = sorted(size, key=lambda row: -size[row])                          # stable: ties keep document order
    found: list[list[Hypothesis | None]] = [[None] * len(doc) for doc in sources]
    for chunk in _batches(order, s.batch_docs):
        docs, js = [sources[d] for d, _ in chunk], [j for _, j in chunk]
        step = step_batch(docs, [[]] * len(chunk), js, s, vocab, "generate", slots.inputs)
        for (d, j), hyp, c in zip(chunk, slots.decode(step, ()), step.expected, strict=True):
            found[d][j] = generated_sentence(hyp, c, vocab.brk)
        step_done(len(chunk))
    return found


def _retry(slots: SlotTranslator, sources: list, found: list[list[Hypothesis | None]]) -> int:
    """Decode the failed windows again in prefix mode, in waves (the n-th failure of every document in wave n,
    when its earlier translations are all known); returns how many there were."""
    failed = [[j for j, hyp in enumerate(doc) if hyp is None] for doc in found]
    brk = slots.vocab.brk
    for wave in range(max(map(len, failed), default=0)):
        rows = [(d, js[wave]) for d, js in enumerate(failed) if wave < len(js)]
        for chunk in _batches(rows, slots.s.batch_docs):
            outs = [[hyp.tokens for hyp in found[d][:j]] for d, j in chunk]
            step = step_batch([sources[d] for d, _ in chunk], outs, [j for _, j in chunk], slots.s, slots.vocab,
                              "prefix", slots.inputs)
            for (d, j), hyp in zip(chunk, slots.decode(step, [brk]), strict=True):
                found[d][j] = hyp
    return sum(map(len, failed))


def translate_generated(slots: SlotTranslator, sources: list,
                        step_done: Callable[[int], None]) -> list[list[Hypothesis | None]]:
    """Translate documents ``sources`` (their sentence ids) in generate mode, all windows at once (module
    docstring); each document's hypothesis per sentence. ``step_done(sentences)`` after each search (the call's
    counters and progress)."""
    found = _generate_all(slots, sources, step_done)
    slots.stats.fallbacks += _retry(slots, sources, found)
    return found
