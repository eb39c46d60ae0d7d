"""Document translation: the family's way of translating a document (its inputs contract's ``translate``: by
default sentence by sentence in parallel slots, :mod:`ctxmt_cli.decode.slots`; a document memory; sentence
groups), several documents at once, with the settings of :mod:`ctxmt_cli.decode.settings`.

Target context:

* ``prefix`` (default): the model's own translations of the previous
  ``tgt_context_sentences`` sentences, each followed by ``<brk>``, are forced as the
  decoder prefix after ``<s>`` (one parallel pass in ``init_state``); ``<brk>``
  is banned so only the current sentence is generated.
* ``generate``: the whole target window is generated from ``<s>``, as Lupo et
  al.'s fork does, and what follows the last ``<brk>`` is kept. Unlike the fork
  we check the number of separators: when it is not the number of context
  sentences, that sentence is decoded again in prefix mode and counted in
  :attr:`TranslationStats.fallbacks`. The window is a function of the source
  (:func:`~ctxmt_cli.decode.steps.generate_context`), so a model without a
  document memory decodes the windows of all documents at once
  (:mod:`ctxmt_cli.decode.generated`).

Given target context (``given`` of :func:`decode_documents`, prefix mode): the first sentences of a document
may come with their translation (a gold prefix, or what an earlier call translated). They are not translated;
their given translations stand where the model's own would (the target context of the next sentences) and
a document-memory model still caches their source entries, so the next sentences are translated as if the
model had written the given translations itself. A model reading its sentence group (mbe) still decodes
them, its group summary reading their sources, and drops those outputs.

Every translated sentence comes back as its n-best list of :class:`Candidate` (best first): the text, the
summed log-probability of its tokens and ``</s>`` given its window and target context, and the beam score.

Another inference engine can run the search of each step (``engine`` of :func:`decode_documents`, a
:data:`StepSearch`): documents, windows, target-context forcing and fallbacks stay the ones here, and ``model``
then only needs the attributes the translator reads (``cfg``, through which its inputs contract is found, and
``vocab``).
The CTranslate2 engine (:mod:`ctxmt_cli.export.ct2_engine`) does this; without ``engine`` ctxmt's beam search runs.

An empty source line (or one that tokenizes to nothing) yields an empty output
and does not enter later windows: the models never saw empty sentences.
"""

from __future__ import annotations

import time
from typing import Callable, Optional, Sequence

import torch

from ctxmt_cli.core.batch import VocabInfo
from ctxmt_cli.decode.encoded import Encoded, encode_document, first_pass_per_document
from ctxmt_cli.decode.footprint import check_search_memory
from ctxmt_cli.decode.generated import translate_generated
from ctxmt_cli.decode.pieces import Piece, cut_pieces, lead_in, piece_input, piece_length
from ctxmt_cli.decode.records import Candidate
from ctxmt_cli.decode.search import Hypothesis
from ctxmt_cli.decode.settings import DecodeSettings, TranslationStats, check_settings
from ctxmt_cli.decode.slots import Search, SlotTranslator, StepSearch
from ctxmt_cli.errors import OptionError
from ctxmt_cli.models.families import inputs_of


def _model_device(model) -> torch.device:
    param = next(model.parameters(), None)
    return param.device if param is not None else torch.device("cpu")


def _search(model, engine: Optional[StepSearch], s: DecodeSettings) -> Search:
    """Whose search runs (``engine``, or ctxmt's over ``model``) and where; a sampling generator when ``s`` asks."""
    if engine is not None:
        if s.sample_seed is not None:
            raise OptionError("sample_seed", s.sample_seed, "another engine's search does not sample; translate "
                              "with the torch engine")
        return Search(torch.device("cpu"), engine)
    device = _model_device(model)
    generator = None if s.sample_seed is None else torch.Generator(device).manual_seed(s.sample_seed)
    return Search(device, None, generator)


def _candidates(tokenizer, hyp: Hypothesis) -> list[Candidate]:
    """The n-best list of a hypothesis as texts, best first."""
    return [Candidate(tokenizer.decode_tgt(h.tokens), h.logprob, h.score, tuple(h.tokens))
            for h in (hyp, *hyp.alternatives)]


class _Run:
    """One :func:`decode_documents` call as a family's :meth:`~ctxmt_cli.models.inputs.Inputs.translate` sees it
    (:class:`~ctxmt_cli.models.inputs.DocumentRun`): the encoded documents, the results to fill, and the ways to
    translate them."""

    def __init__(self, model, tokenizer, encoded: list[Encoded], results, settings: DecodeSettings, search: Search,
                 stats: TranslationStats, progress):
        self.model, self.tokenizer, self.encoded, self.results = model, tokenizer, encoded, results
        self.settings, self.search_on, self.stats, self.progress = settings, search, stats, progress
        self.vocab = VocabInfo.of(tokenizer)

    def in_slots(self, memory: bool = False) -> None:
        """Translate every document sentence by sentence, ``batch_docs`` pieces in parallel slots: whole documents
        for a model that reads its earlier translations, else pieces of about equal length
        (:mod:`ctxmt_cli.decode.pieces`); ``memory``: with a per-document memory of cached entries (unless the
        call's ``cache`` is off). Generate mode without a memory translates every window at once instead
        (:mod:`ctxmt_cli.decode.generated`)."""
        s, encoded = self.settings, self.encoded
        slots = SlotTranslator(self.model, s, self.vocab, self.search_on, inputs_of(self.model.cfg),
                               s.cache and memory, self.stats, self.progress)
        self.stats.total += sum(len(e.ids) - len(e.given) for e in encoded)
        if s.target_mode == "generate" and s.tgt_context_sentences > 0 and not slots.memory:
            # no window reads an earlier output: all of them at once (given context is refused in this mode)
            self._fill(encoded, translate_generated(slots, [e.ids for e in encoded], self), self.results)
            return
        pieces = self._pieces()
        dropped = sum(lead_in(encoded[p.doc], p) for p in pieces)
        self.stats.total += dropped                                                 # translated, then dropped
        self.stats.dropped += dropped
        order = sorted(pieces, key=lambda p: -p.size)                              # stable: ties keep input order
        found: list[list[Optional[Hypothesis]]] = [[None] * len(e.ids) for e in encoded]
        for start in range(0, len(order), s.batch_docs):
            chosen = order[start:start + s.batch_docs]
            ids, given, tails = zip(*(piece_input(encoded[p.doc], p) for p in chosen))
            for p, hyps in zip(chosen, slots.translate(list(ids), list(given), list(tails))):
                found[p.doc][p.first:p.end] = hyps[p.first - p.lo:p.end - p.lo]
        self._fill(encoded, found, self.results)

    def _pieces(self) -> list[Piece]:
        """The call's documents cut into pieces (:mod:`ctxmt_cli.decode.pieces`): a model reading no earlier
        translation, in pieces that fill the slots; one reading them, whole documents, or pieces with a lead-in of
        ``warmup_sentences`` (at least its source context) where the call asks for it."""
        s, encoded, after = self.settings, self.encoded, self.settings.src_next_sentences or 0
        if s.tgt_context_sentences == 0:
            return cut_pieces(encoded, s.src_context_sentences, after, piece_length(encoded, s.batch_docs))
        if s.warmup_sentences is None:
            return cut_pieces(encoded, 0, after, None)
        lead = max(s.warmup_sentences, s.src_context_sentences)
        return cut_pieces(encoded, lead, after, piece_length(encoded, s.batch_docs, lead), lead=True)

    def encoded_ids(self) -> list[list[list[int]]]:
        """Each document's non-empty sentences as source ids; all of them counted as to translate."""
        self.stats.total += sum(len(e.ids) for e in self.encoded)
        return [e.ids for e in self.encoded]

    def search(self, batch, max_len, banned: Sequence[int]) -> list[Hypothesis]:
        """One batched beam search with the call's settings (``max_len``: (B,) longest output per row)."""
        return self.stats.count(self.search_on.rows(self.model, batch, self.settings, max_len, banned))

    def record(self, hypotheses: list[list[Hypothesis]]) -> None:
        """Each document's hypothesis per encoded sentence into the results (given translations left out)."""
        self._fill(self.encoded, hypotheses, self.results)

    def step_done(self, sentences: int) -> None:
        self.stats.sentences += sentences
        self.stats.steps += 1
        if self.progress is not None:
            self.progress(self.stats)

    def _fill(self, encoded: list[Encoded], found, results) -> None:
        for e, doc_found, doc_results in zip(encoded, found, results):
            for line, hyp in zip(e.lines, doc_found):
                if hyp is not None and doc_results[line] is not None:
                    doc_results[line] = _candidates(self.tokenizer, hyp)


def decode_documents(
    model, tokenizer, documents: list[list[str]], settings: DecodeSettings, *, given: Optional[Sequence] = None,
    first_pass: Optional[list[list]] = None, progress: Optional[Callable[[TranslationStats], None]] = None,
    stats: Optional[TranslationStats] = None, engine: Optional[StepSearch] = None,
) -> list[list[Optional[list[Candidate]]]]:
    """Translate ``documents``; per input sentence its n-best list (best first; ``[]`` for an empty source line,
    None for a sentence whose translation ``given`` holds).

    ``given[d]``: translations of document d's first sentences (prefix mode): not translated, they are the
    target context of the next ones. ``first_pass``: a bilingual model's first pass of ``documents``
    (:mod:`ctxmt_cli.decode.bilingual`); ``progress(stats)`` after every step; ``stats``: counters to read
    afterwards (fallbacks…). ``engine``: another engine's search of each step (module docstring); None: ctxmt's
    beam search over ``model``.
    """
    given = check_settings(settings, documents, given)
    stats = stats if stats is not None else TranslationStats()
    started = time.perf_counter()
    inputs = inputs_of(model.cfg)
    s = settings.resolved(inputs)
    stats.settings = s
    search = _search(model, engine, s)
    firsts = first_pass_per_document(model, documents, first_pass)           # refused where it does not fit
    encoded = [encode_document(tokenizer, doc, s.max_window_tokens, stats, f, g)
               for doc, f, g in zip(documents, firsts, given)]
    if engine is None:                       # another engine's search keeps its own memory
        check_search_memory(model, s, [ids for e in encoded for ids in e.ids], search.device)
    stats.documents += len(documents)
    results: list[list] = [[None if i < len(g) else [] for i in range(len(doc))] for doc, g in zip(documents, given)]
    own = isinstance(model, torch.nn.Module)                                 # another engine's model has no modes
    was_training = own and model.training
    if own:
        model.eval()
    try:
        inputs.translate(_Run(model, tokenizer, encoded, results, s, search, stats, progress))
    finally:
        if own:
            model.train(was_training)
        stats.seconds += time.perf_counter() - started
    return results


def translate_documents(model, tokenizer, documents: list[list[str]], settings: DecodeSettings, *,
                        first_pass: Optional[list[list]] = None,
                        progress: Optional[Callable[[TranslationStats], None]] = None,
                        stats: Optional[TranslationStats] = None) -> list[list[str]]:
    """Translate ``documents`` (lists of sentences) with ``settings``; one output string per input sentence, same
    nesting (``first_pass``, ``progress``, ``stats``: as :func:`decode_documents`, which also gives the n-best lists
    and log-probabilities and takes given target context)."""
    found = decode_documents(model, tokenizer, documents, settings, first_pass=first_pass, progress=progress,
                             stats=stats)
    return [[best[0].text if best else "" for best in doc] for doc in found]
