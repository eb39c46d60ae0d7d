"""Documents cut into pieces that translate in parallel slots.

The slot translator (:mod:`ctxmt_cli.decode.slots`) translates sentence j of every document of a group at once, so
a step holds at most one row per document: a test set of a few long documents (Europarl's 14 debates of up to a
few hundred sentences) runs hundreds of steps of a dozen rows. A model whose translation of a sentence reads no
earlier translation (no target context: a sentence-level model, sKto1 concatenation, HanoiT, a caching memory of
source entries) translates each sentence from the source side alone, so a document can be cut into pieces that
translate side by side: each piece holds the previous sentences its first window reads (and a caching memory
caches) as sentences whose translation is given, and the next sentences its last window reads as a tail that is
not translated. Every window, memory and first-pass row is then the one the whole document gives, and the pieces
fill the slots.

A model that reads its earlier translations keeps one piece per document, unless the call asks for a lead-in
(``warmup_sentences`` of the decode settings): each piece then starts that many sentences (at least the model's
source context) before the first one it keeps, translates them as the start of a document and drops their
translations, which stand as the target context of its first kept sentences. A kept sentence's target context
is then the model's own translation of the same sentences, but made with less context than the whole
document's decoding had, so the output may differ from it (the translate page gives the measured BLEU change).
A piece with a lead-in translates at least :data:`LEAD_SHARE` times as many sentences as it drops.

A document-memory model (caching) is cut like a model that reads no earlier translation, into pieces as short as
the slots allow: the sentences its memory holds at a piece's start are given to the piece, and the slot loop
encodes them before its first step, each distinct sentence once per call (the caching page gives the
measurement).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ctxmt_cli.decode.encoded import DocumentIds, Encoded
from ctxmt_cli.decode.settings import DecodeSettings

#: a piece with a lead-in translates at least this many kept sentences per dropped one (at most 1 in 5 dropped)
LEAD_SHARE = 4


@dataclass(frozen=True)
class Piece:
    """Sentences ``lo`` .. ``hi`` - 1 of document ``doc``, of which ``first`` .. ``end`` - 1 are translated and
    kept: those before ``first`` are context with a given translation (``lead``: translated and dropped, where the
    document gives none), those from ``end`` a tail read as next sentences."""

    doc: int
    lo: int
    first: int
    end: int
    hi: int
    lead: bool = False

    @property
    def size(self) -> int:
        return self.hi - self.lo


def plan_pieces(encoded: list[Encoded], settings: DecodeSettings) -> list[Piece]:
    """The pieces the slot loop translates ``encoded`` documents in: the one decision of how a call's documents are
    cut. A model reading no earlier translation (no target context) in pieces that fill the ``batch_docs`` slots,
    each with the source context its first window reads before it; a document-memory model is cut so too, its
    pieces given the sentences their memory holds at their start. A model reading its earlier translations:
    whole documents, or pieces with a lead-in of ``warmup_sentences`` (at least its source context) where the call
    asks for it."""
    s, after = settings, settings.src_next_sentences or 0
    if s.tgt_context_sentences == 0:
        return cut_pieces(encoded, s.src_context_sentences, after, piece_length(encoded, s.batch_docs))
    if s.warmup_sentences is None:
        return cut_pieces(encoded, 0, after, None)
    lead = max(s.warmup_sentences, s.src_context_sentences)
    return cut_pieces(encoded, lead, after, piece_length(encoded, s.batch_docs, lead), lead=True)


def cut_pieces(encoded: list[Encoded], before: int, after: int, length: int | None, *,
               lead: bool = False) -> list[Piece]:
    """The pieces of ``encoded`` documents translating at most ``length`` sentences each (None: one per document),
    with ``before`` previous and ``after`` next sentences of context around them (``lead``: the previous ones are a
    lead-in to translate, module docstring); a document's sentences whose translation is given are never
    translated."""
    pieces = []
    for d, e in enumerate(encoded):
        n, g = len(e.ids), len(e.given)
        if length is None or n - g <= length:
            pieces.append(Piece(d, 0, g, n, n))
            continue
        for a in range(g, n, length):
            b = min(n, a + length)
            pieces.append(Piece(d, max(0, a - before), a, b, min(n, b + after), lead and a > g))
    return pieces


def piece_length(encoded: list[Encoded], slots: int, lead: int = 0) -> int:
    """Sentences a piece translates so that about ``slots`` pieces hold every sentence to translate (``lead``:
    sentences each piece translates and drops first; the pieces are then long enough that at most one decoded
    sentence in ``LEAD_SHARE`` + 1 is dropped)."""
    todo = sum(len(e.ids) - len(e.given) for e in encoded)
    return max(1, math.ceil(todo / max(slots, 1)), LEAD_SHARE * lead)


def lead_in(e: Encoded, p: Piece) -> int:
    """How many sentences piece ``p`` of document ``e`` translates only to drop them (its lead-in less what the
    document gives)."""
    return p.first - max(p.lo, min(len(e.given), p.first)) if p.lead else 0


def piece_input(e: Encoded, p: Piece) -> tuple[list, list, int]:
    """(source ids, given translations, tail) of piece ``p`` of document ``e``: the given translations of its
    context sentences are the document's where it has them, else empty (never read: a model cut into pieces
    without a lead-in reads no target context); a lead-in is given only what the document gives."""
    ids = e.ids[p.lo:p.hi]
    if isinstance(e.ids, DocumentIds):
        ids = DocumentIds(ids, e.ids.first_pass[p.lo:p.hi])
    last = p.first - lead_in(e, p)
    given = [e.given[i] if i < len(e.given) else [] for i in range(p.lo, last)]
    return ids, given, p.hi - p.end
