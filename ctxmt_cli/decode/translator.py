"""Document translation: sentence by sentence, with context windows, several documents in parallel.

Documents are decoded in parallel *slots*: step j translates sentence j of
every document that still has one, in one batched beam search. Documents are
sorted by length first, so the active documents of a step are a prefix of the
group and slots stay full until the short documents run out. The batch of a step
(source windows, target prefixes, document caches) is built by :mod:`ctxmt_cli.decode.steps`.

Target context:

* ``prefix`` (default): the model's own translations of the previous
  ``tgt_context_sentences`` sentences, each followed by ``<brk>``, are forced as the
  decoder prefix after ``<s>`` (one parallel pass in ``init_state``); ``<brk>``
  is banned so only the current sentence is generated.
* ``generate``: the whole target window is generated from ``<s>``, as Lupo et
  al.'s fork does, and what follows the last ``<brk>`` is kept. Unlike the fork
  we check the number of separators: when it is not the number of context
  sentences, that sentence is decoded again in prefix mode and counted in
  :attr:`TranslationStats.fallbacks`.

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

import logging
import time
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import torch

from ctxmt_cli.core.batch import VocabInfo
from ctxmt_cli.decode.encoded import Encoded, encode_document, first_pass_per_document
from ctxmt_cli.decode.records import Candidate
from ctxmt_cli.decode.search import Hypothesis, beam_search
from ctxmt_cli.decode.steps import Plan, StepInput, generated_sentence, step_batch, with_memory
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.models.families import inputs_of

log = logging.getLogger(__name__)
MODES = ("prefix", "generate")
#: another engine's search of one step: ``(step, banned, beam, lenpen, nbest)`` -> the best hypothesis of every row
#: (token ids after the forced prefix, without ``</s>``; at most ``step.max_len`` of them; n-best alternatives)
StepSearch = Callable[[StepInput, Sequence[int], int, float, int], list[Hypothesis]]


@dataclass
class TranslationStats:
    """Counters of one :func:`translate_documents` call (also handed to ``progress`` after every step)."""

    documents: int = 0
    sentences: int = 0            # sentences translated so far (empty lines excluded)
    total: int = 0                # sentences to translate
    empty: int = 0                # empty source lines (empty output)
    steps: int = 0                # batched beam searches (fallback re-decodes excluded)
    fallbacks: int = 0            # generate mode: wrong separator count, re-decoded in prefix mode
    truncated: int = 0            # sentences longer than the window limit, cut to fit
    seconds: float = 0.0


@dataclass(frozen=True)
class DecodeSettings:
    """How :func:`decode_documents` translates; :func:`translate_documents` documents each setting. ``nbest``:
    the translations kept per sentence (at most ``beam``; more than one needs the ``prefix`` mode)."""

    src_context_sentences: int
    tgt_context_sentences: int
    beam: int = 4
    lenpen: float = 0.6
    max_len_a: float = 1.5
    max_len_b: int = 10
    target_context: str = "prefix"
    batch_docs: int = 64
    max_window_tokens: int = 1024
    cache: bool = True
    group_sentences: Optional[int] = None
    group_order: str = "consecutive"
    src_next_sentences: Optional[int] = None
    nbest: int = 1


# ---- decoding ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Search:
    """Beam search settings and where the model lives."""

    beam: int
    lenpen: float
    device: torch.device
    nbest: int = 1
    engine: Optional[StepSearch] = None          # None: ctxmt's own beam search over ``model``


def _decode(model, step: StepInput, search: _Search, banned: Sequence[int], enc=None) -> list[Hypothesis]:
    """One batched beam search; the best hypothesis of every row (with its n-best alternatives)."""
    if search.engine is not None:
        return search.engine(step, banned, search.beam, search.lenpen, search.nbest)
    return beam_search(model, step.batch.to(search.device), beam=search.beam, lenpen=search.lenpen,
                       max_len=step.max_len.to(search.device), banned=banned, enc=enc, nbest=search.nbest)


def _step_input(model, sources, outputs, memories, j, plan, sp, search, mode):
    """The step's batch (with the document caches when ``memories`` is given) and its encoder output (cached path only)."""
    step = step_batch(sources, outputs, j, plan, sp, mode)
    if memories is None:
        return step, None
    step = with_memory(step, sources, memories, j, plan, sp)
    step.batch = step.batch.to(search.device)
    with torch.no_grad():  # the entries outlive this step: no autograd graph may keep activations alive
        return step, model.encode(step.batch)


def remember(memories, enc, keep: int) -> None:
    """Append each row's new cache entry (padding dropped) and keep the last ``keep`` entries per document."""
    for mem, entry in zip(memories, enc.entry.rows()):
        mem.append(entry.detach())
        del mem[: max(0, len(mem) - keep)]


def translate_step(
    model, sources, outputs, j: int, plan: Plan, sp: VocabInfo, search: _Search, mode: str,
    stats: TranslationStats, memories: Optional[list[list]] = None,
) -> list[Hypothesis]:
    """Translate sentence ``j`` of every document in ``sources`` at once; the best hypothesis of each.

    ``memories`` (one list per document) are the cached entries of document-memory
    models: each sentence is encoded once, here, and its entry appended.
    """
    snapshot = None if memories is None else [list(m) for m in memories]
    step, enc = _step_input(model, sources, outputs, memories, j, plan, sp, search, mode)
    if memories is not None:
        remember(memories, enc, plan.src_context_sentences)
    if mode == "prefix":
        return _decode(model, step, search, [sp.brk], enc)
    generated = _decode(model, step, search, (), enc)
    results = [generated_sentence(h, c, sp.brk) for h, c in zip(generated, step.expected)]
    failed = [r for r, res in enumerate(results) if res is None]
    if failed:
        stats.fallbacks += len(failed)
        pick = lambda xs: None if xs is None else [xs[r] for r in failed]  # noqa: E731
        retry, retry_enc = _step_input(model, pick(sources), pick(outputs), pick(snapshot), j, plan, sp, search, "prefix")
        for r, hyp in zip(failed, _decode(model, retry, search, [sp.brk], retry_enc)):
            results[r] = hyp
    return results


def _take_given(model, sources, outputs, memories, rows: list[int], j: int, given, plan, sp, search) -> None:
    """Sentence ``j`` of documents ``rows`` has a given translation: it joins their outputs as it is; a
    document-memory model still encodes the source sentence and caches its entry."""
    if memories is not None:
        picked = [memories[i] for i in rows]
        _, enc = _step_input(model, [sources[i] for i in rows], [outputs[i] for i in rows], picked, j, plan, sp,
                             search, "prefix")
        remember(picked, enc, plan.src_context_sentences)
    for i in rows:
        outputs[i].append(list(given[i][j]))


def _translate_group(model, docs: list[Encoded], plan, sp, search, mode, stats, progress, cache: bool):
    """Translate documents (sorted longest first) in parallel slots; each document's hypothesis per sentence
    (None where the translation was given)."""
    sources, given = [d.ids for d in docs], [d.given for d in docs]
    outs: list[list[list[int]]] = [[] for _ in docs]
    found: list[list[Optional[Hypothesis]]] = [[] for _ in docs]
    memories = [[] for _ in docs] if cache else None
    pick = lambda xs, rows: None if xs is None else [xs[i] for i in rows]  # noqa: E731
    for j in range(max((len(s) for s in sources), default=0)):
        active = [i for i, s in enumerate(sources) if len(s) > j]
        fixed = [i for i in active if j < len(given[i])]
        todo = [i for i in active if j >= len(given[i])]
        if fixed:
            _take_given(model, sources, outs, memories, fixed, j, given, plan, sp, search)
        for i in fixed:
            found[i].append(None)
        if not todo:
            continue
        new = translate_step(model, pick(sources, todo), pick(outs, todo), j, plan, sp, search, mode, stats,
                             pick(memories, todo))
        for i, hyp in zip(todo, new):
            outs[i].append(hyp.tokens)
            found[i].append(hyp)
        stats.steps += 1
        stats.sentences += len(todo)
        if progress is not None:
            progress(stats)
    return found


def _model_device(model) -> torch.device:
    param = next(model.parameters(), None)
    return param.device if param is not None else torch.device("cpu")


def _candidates(tokenizer, hyp: Hypothesis) -> list[Candidate]:
    """The n-best list of a hypothesis as texts, best first."""
    return [Candidate(tokenizer.decode_tgt(h.tokens), h.logprob, h.score, tuple(h.tokens))
            for h in (hyp, *hyp.alternatives)]


class _Run:
    """One :func:`decode_documents` call as a family's :meth:`~ctxmt_cli.models.inputs.Inputs.translate` sees it
    (:class:`~ctxmt_cli.models.inputs.DocumentRun`): the encoded documents, the results to fill, and the ways to
    translate them."""

    def __init__(self, model, tokenizer, encoded: list[Encoded], results, settings: DecodeSettings, plan: Plan,
                 search: _Search, stats: TranslationStats, progress):
        self.model, self.tokenizer, self.encoded, self.results = model, tokenizer, encoded, results
        self.settings, self.plan, self.search_settings, self.stats, self.progress = settings, plan, search, stats, progress
        self.vocab = VocabInfo.of(tokenizer)

    def in_slots(self, memory: bool = False) -> None:
        """Translate every document sentence by sentence, ``batch_docs`` documents in parallel slots; ``memory``:
        with a per-document memory of cached entries (unless the call's ``cache`` is off)."""
        s, encoded = self.settings, self.encoded
        cache = s.cache and memory
        self.stats.total += sum(len(e.ids) - len(e.given) for e in encoded)
        order = sorted(range(len(encoded)), key=lambda d: -len(encoded[d].ids))   # stable: ties keep input order
        for start in range(0, len(order), s.batch_docs):
            group = order[start:start + s.batch_docs]
            found = _translate_group(self.model, [encoded[d] for d in group], self.plan, self.vocab,
                                     self.search_settings, s.target_context, self.stats, self.progress, cache)
            self._fill([encoded[d] for d in group], found, [self.results[d] for d in group])

    def encoded_ids(self) -> list[list[list[int]]]:
        """Each document's non-empty sentences as source ids; all of them counted as to translate."""
        self.stats.total += sum(len(e.ids) for e in self.encoded)
        return [e.ids for e in self.encoded]

    def search(self, batch, max_len, banned: Sequence[int]) -> list[Hypothesis]:
        """One batched beam search with the call's settings (``max_len``: (B,) longest output per row)."""
        s = self.search_settings
        return beam_search(self.model, batch.to(s.device), beam=s.beam, lenpen=s.lenpen, max_len=max_len.to(s.device),
                           banned=banned, nbest=s.nbest)

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


def _check(s: DecodeSettings, documents: Sequence[Sequence[str]], given) -> list[Sequence]:
    """Refuse settings that cannot work (one line each); each document's given translations (none: empty)."""
    if s.target_context not in MODES:
        raise CtxmtError(f"target_context {s.target_context!r}: choose prefix or generate")
    if s.max_window_tokens < 2 or s.batch_docs < 1:
        raise CtxmtError("max_window_tokens must be >= 2 and batch_docs >= 1")
    if s.beam < 1:                      # before the n-best check, which would blame --nbest for it
        raise CtxmtError(f"--beam {s.beam}: give a beam size >= 1")
    if not 1 <= s.nbest <= s.beam:
        raise CtxmtError(f"--nbest {s.nbest}: an n-best list holds at most the beam's {s.beam} translations; "
                         f"give --beam {max(s.nbest, 1)} or more (and --nbest >= 1)")
    if s.nbest > 1 and s.target_context == "generate":
        raise CtxmtError("--nbest: n-best lists need --target-context prefix (generate mode rewrites the context)")
    if given is None:
        return [()] * len(documents)
    if len(given) != len(documents):
        raise CtxmtError(f"given target context for {len(given)} documents, but {len(documents)} documents given")
    for d, (doc, fixed) in enumerate(zip(documents, given)):
        if len(fixed) > len(doc):
            raise CtxmtError(f"document {d + 1}: {len(fixed)} given target sentences for {len(doc)} source "
                             "sentences; give at most one translation per source sentence")
    if s.target_context == "generate" and any(given):
        raise CtxmtError("given target context is forced as the decoder prefix: use --target-context prefix "
                         "(generate mode writes the context itself)")
    return list(given)


def decode_documents(
    model, tokenizer, documents: list[list[str]], settings: DecodeSettings, *, given: Optional[Sequence] = None,
    first_pass: Optional[list[list]] = None, progress: Optional[Callable[[TranslationStats], None]] = None,
    stats: Optional[TranslationStats] = None, engine: Optional[StepSearch] = None,
) -> list[list[Optional[list[Candidate]]]]:
    """Translate ``documents``; per input sentence its n-best list (best first; ``[]`` for an empty source line,
    None for a sentence whose translation ``given`` holds).

    ``given[d]``: translations of document d's first sentences (prefix mode): not translated, they are the
    target context of the next ones. ``first_pass``, ``progress`` and ``stats`` as :func:`translate_documents`.
    ``engine``: another engine's search of each step (module docstring); None: ctxmt's beam search over ``model``.
    """
    s = settings
    given = _check(s, documents, given)
    stats = stats if stats is not None else TranslationStats()
    started = time.perf_counter()
    inputs = inputs_of(model.cfg)
    plan = Plan(s.src_context_sentences, s.tgt_context_sentences, s.max_window_tokens, s.max_len_a, s.max_len_b,
                inputs.next_sentences(s.src_next_sentences), inputs)
    search = _Search(s.beam, s.lenpen, _model_device(model) if engine is None else torch.device("cpu"), s.nbest, engine)
    firsts = first_pass_per_document(model, documents, first_pass)           # refused where it does not fit
    encoded = [encode_document(tokenizer, doc, s.max_window_tokens, stats, f, g)
               for doc, f, g in zip(documents, firsts, given)]
    stats.documents += len(documents)
    results: list[list] = [[None if i < len(g) else [] for i in range(len(doc))] for doc, g in zip(documents, given)]
    own = isinstance(model, torch.nn.Module)                                 # another engine's model has no modes
    was_training = own and model.training
    if own:
        model.eval()
    try:
        inputs.translate(_Run(model, tokenizer, encoded, results, s, plan, search, stats, progress))
    finally:
        if own:
            model.train(was_training)
        stats.seconds += time.perf_counter() - started
    return results


def translate_documents(
    model, tokenizer, documents: list[list[str]], *, src_context_sentences: int, tgt_context_sentences: int,
    beam: int = 4, lenpen: float = 0.6, max_len_a: float = 1.5, max_len_b: int = 10,
    target_context: str = "prefix", batch_docs: int = 64, max_window_tokens: int = 1024,
    progress: Optional[Callable[[TranslationStats], None]] = None, stats: Optional[TranslationStats] = None,
    cache: bool = True, group_sentences: Optional[int] = None, group_order: str = "consecutive",
    src_next_sentences: Optional[int] = None, first_pass: Optional[list[list]] = None,
) -> list[list[str]]:
    """Translate ``documents`` (lists of sentences); one output string per input sentence, same nesting.

    ``batch_docs`` documents are decoded in parallel; ``progress(stats)`` is
    called after every step; pass ``stats`` to read the counters (fallbacks…)
    afterwards. ``cache``: a family translating with a document memory (caching) encodes each sentence once and
    reuse its cached entry as context; ``False`` re-encodes the windows (for checks). A model that reads a
    summary of its sentence group (mbe) translates each document as groups instead
    (:mod:`ctxmt_cli.models.mbe.decoding`: ``group_sentences`` per group, None = the whole document, in
    ``group_order``); a model of another kind refuses ``group_sentences``. ``src_next_sentences``: the next
    source sentences in each window (None: the model's own ``src_next_sentences``; a model that reads none
    refuses more). ``first_pass``: a bilingual model's first pass of ``documents`` (:mod:`ctxmt_cli.decode.bilingual`).
    :func:`decode_documents` gives the n-best lists and log-probabilities and takes given target context.
    """
    settings = DecodeSettings(src_context_sentences, tgt_context_sentences, beam, lenpen, max_len_a, max_len_b,
                              target_context, batch_docs, max_window_tokens, cache, group_sentences, group_order,
                              src_next_sentences)
    found = decode_documents(model, tokenizer, documents, settings, first_pass=first_pass, progress=progress,
                             stats=stats)
    return [[best[0].text if best else "" for best in doc] for doc in found]
