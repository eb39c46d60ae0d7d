"""Document translation: sentence by sentence, with context windows, several documents in parallel.

Documents are decoded in parallel *slots*: step j translates sentence j of
every document that still has one, in one batched beam search. Documents are
sorted by length first, so the active documents of a step are a prefix of the
group and slots stay full until the short documents run out.

The source window of sentence j is the previous ``src_context_sentences`` sentences of
the same document (oldest first), each followed by ``<brk>``, then sentence j
and ``</s>`` — the layout of ``ctxmt_cli.data.windows``; the oldest context
sentences are dropped while the window exceeds ``max_window_tokens``. A model reading next sentences
(``src_next_sentences``) also gets the following sentences of the document (nearest first, after the
previous ones; the whole source document is known before decoding), with ``Batch.src_next`` and the
truncation rule of training (:func:`~ctxmt_cli.data.windows.fit_window`): a window holds exactly what the
training window of the same sentence holds.

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

An empty source line (or one that tokenizes to nothing) yields an empty output
and does not enter later windows: the models never saw empty sentences.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import torch

from ctxmt_cli.core.batch import Batch
from ctxmt_cli.core.model import DocumentMode, VocabInfo
from ctxmt_cli.data.batching import pad_rows
from ctxmt_cli.data.windows import fit_window
from ctxmt_cli.decode.bilingual import DocumentIds, add_target_concat, first_pass_ids, first_pass_per_document
from ctxmt_cli.decode.search import beam_search
from ctxmt_cli.errors import CtxmtError

log = logging.getLogger(__name__)
MODES = ("prefix", "generate")


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
class Plan:
    """How windows and lengths are built for one call."""

    src_context_sentences: int
    tgt_context_sentences: int
    max_window_tokens: int = 1024
    max_len_a: float = 1.5
    max_len_b: int = 10
    src_next_sentences: int = 0


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


def step_batch(
    sources: Sequence[Sequence[Sequence[int]]], outputs: Sequence[Sequence[Sequence[int]]], j: int,
    plan: Plan, sp: VocabInfo, mode: str = "prefix",
) -> StepInput:
    """The batch translating sentence ``j`` of each document (one row per document).

    ``sources[d]`` holds document d's sentence ids, ``outputs[d]`` its
    translations of sentences 0..j-1 (ids, no ``</s>``).
    """
    src_rows, prefixes, max_len, expected, n_sent, n_next = [], [], [], [], [], []
    for sents, outs in zip(sources, outputs):
        current = len(sents[j])
        src_rows.append(source_window(sents, j, plan.src_context_sentences, plan.max_window_tokens, sp,
                                      plan.src_next_sentences))
        n_next.append(window_sizes(sents, j, plan.src_context_sentences, plan.src_next_sentences,
                                   plan.max_window_tokens)[1])
        ctx, c = target_context_ids(outs[:j], plan.tgt_context_sentences, plan.max_window_tokens, current, sp)
        length = int(plan.max_len_a * current + plan.max_len_b)
        if mode == "generate":                                             # the model writes the context too
            prefixes.append([sp.bos])
            length += len(ctx)
        else:
            prefixes.append([sp.bos] + ctx)
        max_len.append(length)
        expected.append(c)
        n_sent.append(c + 1)
    batch = Batch(
        src=pad_rows(src_rows, sp.pad), tgt_prefix=pad_rows(prefixes, sp.pad),       # (B, S), (B, P)
        tgt_sentences=torch.tensor(n_sent, dtype=torch.long),
        src_next=torch.tensor(n_next, dtype=torch.long) if plan.src_next_sentences else None,   # (B,)
    )
    add_target_concat(batch, sources, j, plan, sp)                      # documents with a first pass (bilingual)
    return StepInput(batch, torch.tensor(max_len, dtype=torch.long), expected)


# ---- decoding ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Search:
    """Beam search settings and where the model lives."""

    beam: int
    lenpen: float
    device: torch.device


def with_memory(step: StepInput, sources, memories, j: int, plan: Plan, sp: VocabInfo) -> StepInput:
    """Swap the source windows of ``step`` for the current sentences plus each document's cached entries.

    The number of cached sentences is the one the window would hold (``fit_context``
    over the same lengths and budget), so the two paths see the same context.
    """
    rows, memory = [], []
    for sents, mem in zip(sources, memories):
        current = list(sents[j])
        c = fit_context(sents[:j], plan.src_context_sentences, plan.max_window_tokens - len(current) - 1)
        rows.append(current + [sp.eos])
        memory.append(mem[len(mem) - c:] if c else [])
    batch = Batch(src=pad_rows(rows, sp.pad), tgt_prefix=step.batch.tgt_prefix, tgt_sentences=step.batch.tgt_sentences,
                  memory=memory)
    return StepInput(batch, step.max_len, step.expected)


def _decode(model, step: StepInput, search: _Search, banned: Sequence[int], enc=None) -> list[list[int]]:
    """One batched beam search; the best tokens of every row."""
    hyps = beam_search(model, step.batch.to(search.device), beam=search.beam, lenpen=search.lenpen,
                       max_len=step.max_len.to(search.device), banned=banned, enc=enc)
    return [h.tokens for h in hyps]


def split_generated(tokens: Sequence[int], expected: int, brk: int) -> Optional[list[int]]:
    """The current sentence of a generated target window (after the last ``<brk>``), or None when the
    window does not hold exactly ``expected`` separators."""
    marks = [i for i, t in enumerate(tokens) if t == brk]
    if len(marks) != expected:
        return None
    return list(tokens[marks[-1] + 1:]) if marks else list(tokens)


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
) -> list[list[int]]:
    """Translate sentence ``j`` of every document in ``sources`` at once; ids of each current sentence.

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
    results = [split_generated(t, c, sp.brk) for t, c in zip(generated, step.expected)]
    failed = [r for r, res in enumerate(results) if res is None]
    if failed:
        stats.fallbacks += len(failed)
        pick = lambda xs: None if xs is None else [xs[r] for r in failed]  # noqa: E731
        retry, retry_enc = _step_input(model, pick(sources), pick(outputs), pick(snapshot), j, plan, sp, search, "prefix")
        for r, tokens in zip(failed, _decode(model, retry, search, [sp.brk], retry_enc)):
            results[r] = tokens
    return results


def _translate_group(model, docs: list[list[list[int]]], plan, sp, search, mode, stats, progress, cache: bool):
    """Translate documents (sorted longest first) in parallel slots; their translations as ids
    (``list[list[list[int]]]``: document, sentence, token)."""
    outs: list[list[list[int]]] = [[] for _ in docs]
    memories = [[] for _ in docs] if cache else None
    for j in range(max((len(d) for d in docs), default=0)):
        active = [i for i, d in enumerate(docs) if len(d) > j]
        new = translate_step(model, [docs[i] for i in active], [outs[i] for i in active], j, plan, sp, search, mode,
                             stats, None if memories is None else [memories[i] for i in active])
        for i, tokens in zip(active, new):
            outs[i].append(tokens)
        stats.steps += 1
        stats.sentences += len(active)
        if progress is not None:
            progress(stats)
    return outs


def _encode_document(tokenizer, doc: Sequence[str], limit: int, stats: TranslationStats, first_pass=None):
    """Line indices and ids of the non-empty sentences of ``doc`` (over-long ones cut; + ``first_pass``: DocumentIds)."""
    kept, ids = [], []
    for i, text in enumerate(doc):
        tokens = tokenizer.encode_src(text) if text.strip() else []
        if not tokens:
            stats.empty += 1
            continue
        if len(tokens) > limit - 1:                                        # room for </s>
            stats.truncated += 1
            log.warning("sentence %d of a document has %d tokens; truncated to the window limit %d",
                        i + 1, len(tokens), limit - 1)
            tokens = tokens[: limit - 1]
        kept.append(i)
        ids.append(list(tokens))
    if first_pass is not None:
        ids = DocumentIds(ids, first_pass_ids(tokenizer, [first_pass[i] for i in kept], limit - 1))
    return kept, ids


def _next_sentences(model, wanted: Optional[int]) -> int:
    """The next sentences to put in each window: ``wanted``, or the model's own when None."""
    own = model.cfg.src_next_sentences
    if wanted is None:
        return own
    if wanted < 0:
        raise CtxmtError(f"src_next_sentences={wanted}: give a number of next sentences >= 0")
    if wanted > 0 and not own:
        raise CtxmtError(f"src_next_sentences={wanted}: this {model.cfg.family} model reads no next sentences; "
                         "give 0, or use a checkpoint trained with next-sentence context")
    return wanted


def _model_device(model) -> torch.device:
    param = next(model.parameters(), None)
    return param.device if param is not None else torch.device("cpu")


def _translate_as_groups(model, tokenizer, encoded, results, plan: Plan, search: _Search, stats, progress,
                         batch_docs: int, group_sentences, group_order) -> None:
    """Translate every document group by group (:func:`~ctxmt_cli.decode.groups.translate_groups`) into ``results``."""
    from ctxmt_cli.decode.groups import translate_groups

    def done(n: int) -> None:
        stats.sentences += n
        stats.steps += 1
        if progress is not None:
            progress(stats)

    sp = model.vocab
    outs = translate_groups(model, [ids for _, ids in encoded], eos=sp.eos, pad=sp.pad, banned=[sp.brk],
                            beam=search.beam, lenpen=search.lenpen, device=search.device,
                            max_len=lambda n: int(plan.max_len_a * n + plan.max_len_b), group_sentences=group_sentences,
                            group_order=group_order, max_sentences=max(batch_docs, 1) * 8, progress=done)
    for (lines, _), doc_out, doc_results in zip(encoded, outs, results):
        for line, tokens in zip(lines, doc_out):
            doc_results[line] = tokenizer.decode_tgt(tokens)


def _translate_in_slots(model, tokenizer, encoded, results, plan: Plan, search: _Search, mode: str, stats, progress,
                        batch_docs: int, cache: bool) -> None:
    """Translate every document sentence by sentence, ``batch_docs`` documents in parallel slots, into ``results``."""
    sp = VocabInfo.of(tokenizer)
    order = sorted(range(len(encoded)), key=lambda d: -len(encoded[d][1]))   # stable: ties keep input order
    for start in range(0, len(order), batch_docs):
        group = order[start:start + batch_docs]
        outs = _translate_group(model, [encoded[d][1] for d in group], plan, sp, search, mode, stats, progress, cache)
        for d, doc_out in zip(group, outs):
            for line, tokens in zip(encoded[d][0], doc_out):
                results[d][line] = tokenizer.decode_tgt(tokens)


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
    afterwards. ``cache``: models whose ``document_mode`` is ``MEMORY`` encode each sentence once and
    reuse its cached entry as context; ``False`` re-encodes the windows (for checks). A model that reads a
    summary of its sentence group (``batch_scheme.groups``) translates each document as groups instead
    (:mod:`ctxmt_cli.decode.groups`: ``group_sentences`` per group, None = the whole document, in
    ``group_order``); a model of another kind refuses ``group_sentences``. ``src_next_sentences``: the next
    source sentences in each window (None: the model's own ``src_next_sentences``; a model that reads none
    refuses more). ``first_pass``: a bilingual model's first pass of ``documents`` (:mod:`ctxmt_cli.decode.bilingual`).
    """
    if target_context not in MODES:
        raise CtxmtError(f"target_context {target_context!r}: choose prefix or generate")
    if max_window_tokens < 2 or batch_docs < 1:
        raise CtxmtError("max_window_tokens must be >= 2 and batch_docs >= 1")
    stats = stats if stats is not None else TranslationStats()
    started = time.perf_counter()
    plan = Plan(src_context_sentences, tgt_context_sentences, max_window_tokens, max_len_a, max_len_b,
                _next_sentences(model, src_next_sentences))
    search = _Search(beam, lenpen, _model_device(model))
    firsts = first_pass_per_document(model, documents, first_pass)           # refused where it does not fit
    encoded = [_encode_document(tokenizer, doc, max_window_tokens, stats, f) for doc, f in zip(documents, firsts)]
    stats.documents += len(documents)
    stats.total += sum(len(ids) for _, ids in encoded)
    results = [[""] * len(doc) for doc in documents]
    was_training = model.training
    model.eval()
    try:
        if model.batch_scheme.groups:
            _translate_as_groups(model, tokenizer, encoded, results, plan, search, stats, progress, batch_docs,
                                 group_sentences, group_order)
            return results
        if group_sentences is not None:
            raise CtxmtError(f"--group-sentences {group_sentences}: this model does not read sentence groups "
                             "(only a family like mbe does); leave it out")
        _translate_in_slots(model, tokenizer, encoded, results, plan, search, target_context, stats, progress,
                            batch_docs, cache and model.document_mode is DocumentMode.MEMORY)
    finally:
        model.train(was_training)
        stats.seconds += time.perf_counter() - started
    return results
