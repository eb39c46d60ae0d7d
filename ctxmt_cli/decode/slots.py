"""Sentence-by-sentence translation of documents in parallel *slots*: what the ``slots``, ``first_pass`` and
``memory`` loops of :mod:`ctxmt_cli.decode.loops` run.

Step t translates, in one batched beam search, the t-th sentence after its given ones (the sentences whose
translation the call gives) of every document that still has one. Documents are sorted by length first, so the
slots stay full until the short documents run out. The batch of a step (source windows, target prefixes, document
caches) is built by :mod:`ctxmt_cli.decode.steps`; a family may add rows to it
(:meth:`~ctxmt_cli.models.inputs.Inputs.step_rows`).
With a document memory (caching), each sentence is encoded once and its entry kept for the next sentences; the
sentences whose translation is given (a piece's context) are encoded before the first step, each distinct one once.
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

    def step_input(self, sources, outputs, memories, j: int | Sequence[int], mode: str):
        """The step's batch (with the document caches when ``memories`` is given) and its encoder output (memory
        only)."""
        step = step_batch(sources, outputs, j, self.s, self.vocab, mode, self.inputs)
        if memories is None:
            return step, None
        step = with_memory(step, sources, memories, j, self.s, self.vocab)
        step.batch = step.batch.to(self.search.device)
        with torch.no_grad():  # the entries outlive this step: no autograd graph may keep activations alive
            return step, self.model.encode(step.batch)

    def translate_step(self, sources, outputs, j: int | Sequence[int],
                       memories: list[list] | None = None) -> list[Hypothesis]:
        """Translate sentence ``j`` (one index, or one per document) of every document in ``sources`` at once; the
        best hypothesis of each.

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
            js = j if isinstance(j, int) else _pick(list(j), failed)
            retry, retry_enc = self.step_input(_pick(sources, failed), _pick(outputs, failed),
                                               _pick(snapshot, failed), js, "prefix")
            for r, hyp in zip(failed, self.decode(retry, [brk], retry_enc), strict=True):
                results[r] = hyp
        return results

    def remember_given(self, sources, memories, given) -> None:
        """Cache the entries of every document's given sentences before the first step. A document-memory model's
        entry of a sentence reads that sentence alone (the caching family encodes each one on its own), so the
        given ones need not wait for their step, and a sentence given to several pieces (the context of one is the
        end of the piece before it) is encoded once: a piece's context costs no step, and the call encodes each
        sentence at most twice (once here, once translated) whatever the memory size. Only the last
        ``src_context_sentences`` of a document's given sentences can ever be read; batches of ``batch_docs`` x
        ``src_context_sentences`` sentences (what the memories hold at once)."""
        keep = self.s.src_context_sentences
        pairs = [(i, j) for i, done in enumerate(given) for j in range(max(0, len(done) - keep), len(done))]
        distinct = list(dict.fromkeys(tuple(sources[i][j]) for i, j in pairs))     # token ids, first seen first
        entries, size = {}, self.s.batch_docs * max(keep, 1)
        for start in range(0, len(distinct), size):
            chunk = distinct[start:start + size]
            alone = [[list(sentence)] for sentence in chunk]                # each one as a one-sentence document
            _, enc = self.step_input(alone, [[] for _ in chunk], [[] for _ in chunk], 0, "prefix")
            entries.update(zip(chunk, (entry.detach() for entry in enc.entry.rows()), strict=True))
        for i, j in pairs:                                                  # (i, j) in order: oldest first
            memories[i].append(entries[tuple(sources[i][j])])

    def translate(self, sources: list, given: list,
                  tails: list[int] | None = None) -> list[list[Hypothesis | None]]:
        """Translate documents (sorted longest first; ``given``: the translations of each one's first sentences;
        ``tails``: how many of each one's last sentences are only read as next sentences, never translated) in
        parallel slots; each document's hypothesis per translated or given sentence (None where it was given).

        Step t translates each document's t-th sentence after its given ones, so documents (pieces) given
        different numbers of sentences still share every step."""
        outs: list[list[list[int]]] = [[list(done) for done in g] for g in given]
        found: list[list[Hypothesis | None]] = [[None] * len(g) for g in given]
        memories = [[] for _ in sources] if self.memory else None
        if memories is not None:
            self.remember_given(sources, memories, given)
        starts = [len(g) for g in given]
        ends = [len(s) - t for s, t in zip(sources, tails or [0] * len(sources), strict=True)]
        for t in range(max((e - a for a, e in zip(starts, ends, strict=True)), default=0)):
            todo = [i for i, (a, e) in enumerate(zip(starts, ends, strict=True)) if a + t < e]
            js = [starts[i] + t for i in todo]                              # each one's sentence of this step
            hyps = self.translate_step(_pick(sources, todo), _pick(outs, todo), js, _pick(memories, todo))
            for i, hyp in zip(todo, hyps, strict=True):
                outs[i].append(hyp.tokens)
                found[i].append(hyp)
            self.stats.steps += 1
            self.stats.sentences += len(todo)
            if self.progress is not None:
                self.progress(self.stats)
        return found
