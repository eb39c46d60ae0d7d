"""The loops that translate a call's documents, one for each way a family declares
(:meth:`~ctxmt_cli.models.inputs.Inputs.translation`, one of :data:`~ctxmt_cli.models.inputs.TRANSLATIONS`):

* ``slots``: sentence by sentence, ``batch_docs`` pieces of documents in parallel slots
  (:mod:`ctxmt_cli.decode.slots`), each source window re-encoded; how the documents are cut into pieces is
  :func:`~ctxmt_cli.decode.pieces.plan_pieces`. Generate mode without a memory translates every window at once
  instead (:mod:`ctxmt_cli.decode.generated`): no window reads an earlier output.
* ``first_pass``: the same loop; each step's rows also read the document's first pass, laid out by the family's
  :meth:`~ctxmt_cli.models.inputs.Inputs.step_rows`.
* ``memory``: the same loop with a per-document memory: each sentence encoded once and its entry
  (``EncoderOut.entry``) read by the next sentences (``Batch.memory``), unless the call's ``cache`` is off.
* ``groups``: group by group (:mod:`ctxmt_cli.decode.groups`), each search's rows put in their groups by the
  family's :meth:`~ctxmt_cli.models.inputs.Inputs.grouped`.

The loops call the family's hooks, never its name; the family never calls back into them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

from ctxmt_cli.core.batch import VocabInfo
from ctxmt_cli.decode.encoded import Encoded
from ctxmt_cli.decode.generated import translate_generated
from ctxmt_cli.decode.groups import group_hypotheses
from ctxmt_cli.decode.pieces import lead_in, piece_input, plan_pieces
from ctxmt_cli.decode.records import Candidate
from ctxmt_cli.decode.search import Hypothesis
from ctxmt_cli.decode.settings import DecodeSettings, TranslationStats
from ctxmt_cli.decode.slots import Search, SlotTranslator
from ctxmt_cli.models.inputs import TRANSLATIONS, Inputs

#: sentences per search of groups, per document decoded in parallel (``batch_docs``)
SENTENCES_PER_DOCUMENT = 8


def _candidates(tokenizer, hyp: Hypothesis) -> list[Candidate]:
    """The n-best list of a hypothesis as texts, best first."""
    return [Candidate(tokenizer.decode_tgt(h.tokens), h.logprob, h.score, tuple(h.tokens))
            for h in (hyp, *hyp.alternatives)]


@dataclass
class DocumentCall:
    """One :func:`~ctxmt_cli.decode.translator.decode_documents` call as its loop sees it: the model, its inputs
    contract, the encoded documents, the results to fill (per document and input line), the resolved settings,
    whose search runs (``searcher``), the counters and the progress callback."""

    model: object
    tokenizer: object
    inputs: Inputs
    encoded: list[Encoded]
    results: list[list]
    settings: DecodeSettings
    searcher: Search
    stats: TranslationStats
    progress: Callable[[TranslationStats], None] | None = None
    vocab: VocabInfo = field(init=False)

    def __post_init__(self) -> None:
        self.vocab = VocabInfo.of(self.tokenizer)

    def search(self, batch, max_len, banned: Sequence[int]) -> list[Hypothesis]:
        """One batched beam search with the call's settings (``max_len``: (B,) longest output per row)."""
        return self.stats.count(self.searcher.rows(self.model, batch, self.settings, max_len, banned))

    def step_done(self, sentences: int) -> None:
        """Count a finished search of ``sentences`` sentences (statistics, progress)."""
        self.stats.sentences += sentences
        self.stats.steps += 1
        if self.progress is not None:
            self.progress(self.stats)

    def record(self, found: list[list[Hypothesis | None]]) -> None:
        """Each document's hypothesis per encoded sentence into the results (given translations left out)."""
        for e, doc_found, doc_results in zip(self.encoded, found, self.results, strict=True):
            for line, hyp in zip(e.lines, doc_found, strict=True):
                if hyp is not None and doc_results[line] is not None:
                    doc_results[line] = _candidates(self.tokenizer, hyp)


def in_slots(call: DocumentCall, *, memory: bool = False) -> None:
    """Translate every document sentence by sentence, ``batch_docs`` pieces in parallel slots (the pieces of
    :func:`~ctxmt_cli.decode.pieces.plan_pieces`); ``memory``: with a per-document memory of cached entries (unless
    the call's ``cache`` is off). Generate mode without a memory translates every window at once instead."""
    s, encoded, stats = call.settings, call.encoded, call.stats
    slots = SlotTranslator(call.model, s, call.vocab, call.searcher, call.inputs, s.cache and memory, stats,
                           call.progress)
    stats.total += sum(len(e.ids) - len(e.given) for e in encoded)
    if s.target_mode == "generate" and s.tgt_context_sentences > 0 and not slots.memory:
        # no window reads an earlier output: all of them at once (given context is refused in this mode)
        call.record(translate_generated(slots, [e.ids for e in encoded], call.step_done))
        return
    pieces = plan_pieces(encoded, s)
    dropped = sum(lead_in(encoded[p.doc], p) for p in pieces)
    stats.total += dropped                                                      # translated, then dropped
    stats.dropped += dropped
    order = sorted(pieces, key=lambda p: -p.size)                              # stable: ties keep input order
    found: list[list[Hypothesis | None]] = [[None] * len(e.ids) for e in encoded]
    for start in range(0, len(order), s.batch_docs):
        chosen = order[start:start + s.batch_docs]
        ids, given, tails = zip(*(piece_input(encoded[p.doc], p) for p in chosen), strict=True)
        for p, hyps in zip(chosen, slots.translate(list(ids), list(given), list(tails)), strict=True):
            found[p.doc][p.first:p.end] = hyps[p.first - p.lo:p.end - p.lo]
    call.record(found)


def in_groups(call: DocumentCall) -> None:
    """Translate every document group by group; a sentence whose translation is given is decoded with its group
    (its summary reads it) and left out of the results."""
    s, stats = call.settings, call.stats
    stats.total += sum(len(e.ids) for e in call.encoded)
    found = group_hypotheses(partial(call.search, banned=[call.vocab.brk]), [e.ids for e in call.encoded],
                             call.vocab, max_len=partial(_longest, s), inputs=call.inputs,
                             group_sentences=s.group_sentences, group_order=s.group_order,
                             max_sentences=max(s.batch_docs, 1) * SENTENCES_PER_DOCUMENT, progress=call.step_done)
    call.record(found)


def _longest(s: DecodeSettings, source_length: int) -> int:
    """The longest output of a source sentence of ``source_length`` tokens."""
    return int(s.max_len_a * source_length + s.max_len_b)


#: the loop of each declared way to translate a document
LOOPS: dict[str, Callable[[DocumentCall], None]] = {
    "slots": in_slots,
    "first_pass": in_slots,
    "memory": partial(in_slots, memory=True),
    "groups": in_groups,
}


def translate_call(call: DocumentCall) -> None:
    """Translate the documents of ``call`` with the loop of the way its family declares, once the family accepted
    the call's sentence-group options."""
    inputs, s = call.inputs, call.settings
    inputs.check_groups(s.group_sentences, s.group_order)
    way = inputs.translation()
    if way not in LOOPS:
        raise ValueError(f"{type(inputs).__name__}.translation() declares {way!r}; declare one of "
                         f"{', '.join(TRANSLATIONS)}")
    LOOPS[way](call)
