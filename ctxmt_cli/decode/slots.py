"""Sentence-by-sentence translation of documents in parallel *slots*: what the ``slots``, ``first_pass`` and
``memory`` loops of :mod:`ctxmt_cli.decode.loops` run.

Step j translates sentence j of every document that still has one, in one batched beam search. Documents are
sorted by length first, so the active documents of a step are a prefix of the group and slots stay full until the
short documents run out. The batch of a step (source windows, target prefixes, document caches) is built by
:mod:`ctxmt_cli.decode.steps`; a family may add rows to it (:meth:`~ctxmt_cli.models.inputs.Inputs.step_rows`).
With a document memory (caching), each sentence is encoded once and its entry kept for the next sentences.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from ctxmt_cli.core.batch import VocabInfo
from ctxmt_cli.decode.search import Hypothesis, beam_search, greedy_search
from ctxmt_cli.decode.settings import DecodeSettings, TranslationStats
from ctxmt_cli.decode.steps import StepInput, generated_sentence, step_batch, with_memory

#: another engine's search of one step: ``(step, banned, beam, lenpen, nbest)`` -> the best hypothesis of every row
#: (token ids after the forced prefix, without ``</s>``; at most ``step.max_len`` of them; n-best alternatives)
StepSearch = Callable[[StepInput, Sequence[int], int, float, int], list[Hypothesis]]


@dataclass(frozen=True)
class Search:
    """Where the model lives and whose search runs each step (None: ctxmt's own beam search over the model);
    ``generator``: sample every output token with it instead (ctxmt's own search only)."""

    device: torch.device
    engine: StepSearch | None = None
    generator: torch.Generator | None = None

    def rows(self, model, batch, settings, max_len, banned: Sequence[int], enc=None) -> list[Hypothesis]:
        """ctxmt's search of ``batch`` on the model's device: beam search, or sampling with the generator."""
        batch, max_len = batch.to(self.device), max_len.to(self.device)
        if self.generator is not None:
            return greedy_search(model, batch, max_len, banned, lenpen=settings.lenpen, generator=self.generator)
        return beam_search(model, batch, beam=settings.beam, lenpen=settings.lenpen, max_len=max_len, banned=banned,
                           enc=enc, nbest=settings.nbest)


def _pick(items: list | None, rows: list[int]) -> list | None:
    """``items`` of the documents ``rows`` (None stays None: a memory the translator does not keep)."""
    return None if items is None else [items[i] for i in rows]


def remember(memories, enc, keep: int) -> None:
    """Append each row's new cache entry (padding dropped) and keep the last ``keep`` entries per document."""
    for mem, entry in zip(memories, enc.entry.rows(), strict=True):
        mem.append(entry.detach())
        del mem[: max(0, len(mem) - keep)]


class SlotTranslator:
    """Translates groups of documents in parallel slots with ``model`` and the resolved ``settings``;
    ``inputs``: the family's inputs contract (rows it adds to a step); ``memory``: keep a document memory."""

    def __init__(self, model, settings: DecodeSettings, vocab: VocabInfo, search: Search, inputs, memory: bool,
                 stats: TranslationStats, progress: Callable[[TranslationStats], None] | None = None):
        self.model, self.s, self.vocab, self.search, self.inputs = model, settings, vocab, search, inputs
        self.memory, self.stats, self.progress = memory, stats, progress

    def decode(self, step: StepInput, banned: Sequence[int], enc=None) -> list[Hypothesis]:
        """One batched beam search; the best hypothesis of every row (with its n-best alternatives)."""
        s = self.s
        if self.search.engine is not None:
            return self.stats.count(self.search.engine(step, banned, s.beam, s.lenpen, s.nbest))
        return self.stats.count(self.search.rows(self.model, step.batch, s, step.max_len, banned, enc))

    def step_input(self, sources, outputs, memories, j: int, mode: str):
        """The step's batch (with the document caches when ``memories`` is given) and its encoder output (memory
        only)."""
        step = step_batch(sources, outputs, j, self.s, self.vocab, mode, self.inputs)
        if memories is None:
            return step, None
        step = with_memory(step, sources, memories, j, self.s, self.vocab)
        step.batch = step.batch.to(self.search.device)
        with torch.no_grad():  # the entries outlive this step: no autograd graph may keep activations alive
            return step, self.model.encode(step.batch)

    def translate_step(self, sources, outputs, j: int, memories: list[list] | None = None) -> list[Hypothesis]:
        """Translate sentence ``j`` of every document in ``sources`` at once; the best hypothesis of each.

        ``memories`` (one list per document) are the cached entries of a document-memory model: each sentence is
        encoded once, here, and its entry appended. Generate mode re-decodes in prefix mode a sentence whose window
        does not hold the expected separators (counted in ``stats.fallbacks``)."""
        brk = self.vocab.brk
        snapshot = None if memories is None else [list(m) for m in memories]
        step, enc = self.step_input(sources, outputs, memories, j, self.s.target_mode)
        if memories is not None:
            remember(memories, enc, self.s.src_context_sentences)
        if self.s.target_mode == "prefix":
            return self.decode(step, [brk], enc)
        hyps = self.decode(step, (), enc)
        results = [generated_sentence(h, c, brk) for h, c in zip(hyps, step.expected, strict=True)]
        failed = [r for r, res in enumerate(results) if res is None]
        if failed:
            self.stats.fallbacks += len(failed)
            retry, retry_enc = self.step_input(_pick(sources, failed), _pick(outputs, failed),
                                               _pick(snapshot, failed), j, "prefix")
            for r, hyp in zip(failed, self.decode(retry, [brk], retry_enc), strict=True):
                results[r] = hyp
        return results

    def take_given(self, sources, outputs, memories, rows: list[int], j: int, given) -> None:
        """Sentence ``j`` of documents ``rows`` has a given translation: it joins their outputs as it is; a
        document-memory model still encodes the source sentence and caches its entry."""
        if memories is not None:
            picked = [memories[i] for i in rows]
            _, enc = self.step_input([sources[i] for i in rows], [outputs[i] for i in rows], picked, j, "prefix")
            remember(picked, enc, self.s.src_context_sentences)
        for i in rows:
            outputs[i].append(list(given[i][j]))

    def translate(self, sources: list, given: list,
                  tails: list[int] | None = None) -> list[list[Hypothesis | None]]:
        """Translate documents (sorted longest first; ``given``: the translations of each one's first sentences;
        ``tails``: how many of each one's last sentences are only read as next sentences, never translated) in
        parallel slots; each document's hypothesis per translated or given sentence (None where it was given)."""
        outs: list[list[list[int]]] = [[] for _ in sources]
        found: list[list[Hypothesis | None]] = [[] for _ in sources]
        memories = [[] for _ in sources] if self.memory else None
        ends = [len(s) - t for s, t in zip(sources, tails or [0] * len(sources), strict=True)]
        for j in range(max(ends, default=0)):
            active = [i for i, end in enumerate(ends) if end > j]
            fixed = [i for i in active if j < len(given[i])]
            todo = [i for i in active if j >= len(given[i])]
            if fixed:
                self.take_given(sources, outs, memories, fixed, j, given)
            for i in fixed:
                found[i].append(None)
            if not todo:
                continue
            hyps = self.translate_step(_pick(sources, todo), _pick(outs, todo), j, _pick(memories, todo))
            for i, hyp in zip(todo, hyps, strict=True):
                outs[i].append(hyp.tokens)
                found[i].append(hyp)
            self.stats.steps += 1
            self.stats.sentences += len(todo)
            if self.progress is not None:
                self.progress(self.stats)
        return found
