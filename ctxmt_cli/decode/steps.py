"""The batch of one translation step: source windows, the target context prefix, document caches.

The source window of sentence j is the previous ``src_context_sentences`` sentences of
the same document (oldest first), each followed by ``<brk>``, then sentence j
and ``</s>`` — the layout of ``ctxmt_cli.data.windows``; the oldest context
sentences are dropped while the window exceeds ``max_window_tokens``. A model reading next sentences
(``src_next_sentences``) also gets the following sentences of the document (nearest first, after the
previous ones), with ``Batch.src_next`` and the truncation rule of training
(:func:`~ctxmt_cli.data.windows.fit_window`): a window holds exactly what the training window of the same
sentence holds. The target prefix is ``<s>`` and the previous translations (each + ``<brk>``); a
document-memory model gets the current sentence and its document's cached entries instead of the window
(:func:`with_memory`). :mod:`ctxmt_cli.decode.slots` runs the steps.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from ctxmt_cli.core.batch import Batch, VocabInfo
from ctxmt_cli.data.batching import pad_rows
from ctxmt_cli.data.windows import fit_window
from ctxmt_cli.decode.search import Hypothesis
from ctxmt_cli.decode.settings import DecodeSettings
from ctxmt_cli.models.inputs import Inputs


@dataclass
class StepInput:
    """One step's batched input: the batch, per-row ``max_len`` and the target context count per row."""

    batch: Batch
    max_len: torch.Tensor                        # (B,) long
    expected: list[int] = field(default_factory=list)  # context sentences in each row's target window


# ---- windows ----------------------------------------------------------------------------------
def fit_context(previous: Sequence[Sequence[int]], wanted: int, budget: int) -> int:
    """How many of the most recent ``previous`` sentences fit: at most ``wanted``, and their
    lengths plus one separator each at most ``budget`` (the oldest dropped first)."""
    recent = previous[max(len(previous) - wanted, 0):]
    return fit_window([len(s) for s in recent], [], wanted, 0, budget)[0]


def window_sizes(sentences: Sequence[Sequence[int]], j: int, context: int, following: int,
                 limit: int) -> tuple[int, int]:
    """(previous, next) context sentences in sentence ``j``'s source window of at most ``limit`` tokens."""
    before = sentences[max(j - context, 0):j]
    after = sentences[j + 1:j + 1 + following]
    return fit_window([len(s) for s in before], [len(s) for s in after], context, following,
                      limit - len(sentences[j]) - 1)


def join_context(sentences: Sequence[Sequence[int]], brk: int) -> list[int]:
    """Sentences oldest → newest, each followed by ``<brk>``."""
    out: list[int] = []
    for s in sentences:
        out.extend(s)
        out.append(brk)
    return out


def source_window(sentences: Sequence[Sequence[int]], j: int, context: int, limit: int, sp: VocabInfo,
                  following: int = 0) -> list[int]:
    """Source window of sentence ``j``: up to ``context`` previous sentences (oldest first) and ``following``
    next ones (nearest first), ``<brk>`` after each, then sentence j and ``</s>``."""
    c, m = window_sizes(sentences, j, context, following, limit)
    context = list(sentences[j - c:j]) + list(sentences[j + 1:j + 1 + m])
    return join_context(context, sp.brk) + list(sentences[j]) + [sp.eos]


def target_context_ids(
    outputs: Sequence[Sequence[int]], context: int, limit: int, current_len: int, sp: VocabInfo,
) -> tuple[list[int], int]:
    """Previous translations (+ ``<brk>`` each) for the target window, and how many there are.

    The current translation's length is not known yet; the current source
    length stands in for it so the target window stays near ``limit``.
    """
    c = fit_context(outputs, context, limit - current_len - 1)
    return join_context(outputs[len(outputs) - c:], sp.brk), c


def generate_context(sents: Sequence[Sequence[int]], j: int, plan: DecodeSettings) -> tuple[int, int]:
    """Generate mode: (context sentences the target window of sentence ``j`` holds, longest window).

    The window is a function of the source alone, as the model sees it (Lupo et al. 2022 generate the whole
    target window from the source window), so every window of a document can be decoded at once: the source
    sentences stand in for the translations in the window limit, and each sentence may take as many tokens
    (+ its ``<brk>``) as it would alone."""
    current = len(sents[j])
    c = fit_context(sents[:j], plan.tgt_context_sentences, plan.max_window_tokens - current - 1)

    def longest(n: int) -> int:                        # the output length limit of an n-token sentence
        return int(plan.max_len_a * n + plan.max_len_b)

    return c, longest(current) + sum(longest(len(s)) + 1 for s in sents[j - c:j])


def step_batch(
    sources: Sequence[Sequence[Sequence[int]]], outputs: Sequence[Sequence[Sequence[int]]],
    j: int | Sequence[int], plan: DecodeSettings, sp: VocabInfo, mode: str = "prefix",
    inputs: Inputs | None = None,
) -> StepInput:
    """The batch translating sentence ``j`` of each document (one row per document; ``j`` one index for all of
    them, or one per row).

    ``sources[d]`` holds document d's sentence ids, ``outputs[d]`` its
    translations of sentences 0..j-1 (ids, no ``</s>``; unread in generate mode).
    """
    following = plan.src_next_sentences or 0
    js = [j] * len(sources) if isinstance(j, int) else list(j)
    src_rows, prefixes, max_len, expected, n_sent, n_next = [], [], [], [], [], []
    for sents, outs, i in zip(sources, outputs, js, strict=True):
        current = len(sents[i])
        src_rows.append(source_window(sents, i, plan.src_context_sentences, plan.max_window_tokens, sp, following))
        n_next.append(window_sizes(sents, i, plan.src_context_sentences, following, plan.max_window_tokens)[1])
        if mode == "generate":                                             # the model writes the context too
            c, length = generate_context(sents, i, plan)
            prefixes.append([sp.bos])
        else:
            ctx, c = target_context_ids(outs[:i], plan.tgt_context_sentences, plan.max_window_tokens, current, sp)
            prefixes.append([sp.bos] + ctx)
            length = int(plan.max_len_a * current + plan.max_len_b)
        max_len.append(length)
        expected.append(c)
        n_sent.append(c + 1)
    batch = Batch(
        src=pad_rows(src_rows, sp.pad), tgt_prefix=pad_rows(prefixes, sp.pad),       # (B, S), (B, P)
        tgt_sentences=torch.tensor(n_sent, dtype=torch.long),
        src_next=torch.tensor(n_next, dtype=torch.long) if following else None,   # (B,)
    )
    if inputs is not None:
        inputs.step_rows(batch, sources, j, plan, sp)                   # e.g. a bilingual model's target concatenation
    return StepInput(batch, torch.tensor(max_len, dtype=torch.long), expected)


def with_memory(step: StepInput, sources, memories, j: int | Sequence[int], plan: DecodeSettings,
                sp: VocabInfo) -> StepInput:
    """Swap the source windows of ``step`` for the current sentences (sentence ``j``: one index, or one per
    document) plus each document's cached entries.

    The number of cached sentences is the one the window would hold (``fit_context``
    over the same lengths and budget), so the two paths see the same context.
    """
    rows, memory = [], []
    js = [j] * len(sources) if isinstance(j, int) else j
    for sents, mem, i in zip(sources, memories, js, strict=True):
        current = list(sents[i])
        c = fit_context(sents[:i], plan.src_context_sentences, plan.max_window_tokens - len(current) - 1)
        rows.append(current + [sp.eos])
        memory.append(mem[len(mem) - c:] if c else [])
    batch = Batch(src=pad_rows(rows, sp.pad), tgt_prefix=step.batch.tgt_prefix, tgt_sentences=step.batch.tgt_sentences,
                  memory=memory)
    return StepInput(batch, step.max_len, step.expected)


def split_generated(tokens: Sequence[int], expected: int, brk: int) -> list[int] | None:
    """The current sentence of a generated target window (after the last ``<brk>``), or None when the
    window does not hold exactly ``expected`` separators."""
    marks = [i for i, t in enumerate(tokens) if t == brk]
    if len(marks) != expected:
        return None
    return list(tokens[marks[-1] + 1:]) if marks else list(tokens)


def generated_sentence(hyp: Hypothesis, expected: int, brk: int) -> Hypothesis | None:
    """The current sentence of a generated window as a hypothesis (None: wrong separator count). Its
    log-probability covers the whole window, not the sentence: NaN, never reported."""
    tokens = split_generated(hyp.tokens, expected, brk)
    return None if tokens is None else Hypothesis(tokens, hyp.score, hyp.steps, logprob=float("nan"))
