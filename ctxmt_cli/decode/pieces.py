"""Documents cut into pieces that translate in parallel slots.

The slot translator (:mod:`ctxmt_cli.decode.slots`) translates sentence j of every document of a group at once, so
a step holds at most one row per document: a test set of a few long documents (Europarl's 14 debates of up to a
few hundred sentences) runs hundreds of steps of a dozen rows. A model whose translation of a sentence reads no
earlier translation (no target context: a sentence-level model, sKto1 concatenation, HanoiT, a caching memory of
source entries) translates each sentence from the source side alone, so a document can be cut into pieces that
translate side by side: each piece holds the previous sentences its first window reads (and a caching memory
caches) as sentences whose translation is given, and the next sentences its last window reads as a tail that is
not translated. Every window, memory and first-pass row is then the one the whole document gives, and the pieces
fill the slots. A model that reads its earlier translations keeps one piece per document.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from ctxmt_cli.decode.encoded import DocumentIds, Encoded


@dataclass(frozen=True)
class Piece:
    """Sentences ``lo`` .. ``hi`` - 1 of document ``doc``, of which ``first`` .. ``end`` - 1 are translated: those
    before ``first`` are context with a given translation, those from ``end`` a tail read as next sentences."""

    doc: int
    lo: int
    first: int
    end: int
    hi: int

    @property
    def size(self) -> int:
        return self.hi - self.lo


def cut_pieces(encoded: list[Encoded], before: int, after: int, length: Optional[int]) -> list[Piece]:
    """The pieces of ``encoded`` documents translating at most ``length`` sentences each (None: one per document),
    with ``before`` previous and ``after`` next sentences of context around them; a document's sentences whose
    translation is given are never translated."""
    pieces = []
    for d, e in enumerate(encoded):
        n, g = len(e.ids), len(e.given)
        if length is None or n - g <= length:
            pieces.append(Piece(d, 0, g, n, n))
            continue
        for a in range(g, n, length):
            b = min(n, a + length)
            pieces.append(Piece(d, max(0, a - before), a, b, min(n, b + after)))
    return pieces


def piece_length(encoded: list[Encoded], slots: int) -> int:
    """Sentences a piece translates so that about ``slots`` pieces hold every sentence to translate."""
    todo = sum(len(e.ids) - len(e.given) for e in encoded)
    return max(1, math.ceil(todo / max(slots, 1)))


def piece_input(e: Encoded, p: Piece) -> tuple[list, list, int]:
    """(source ids, given translations, tail) of piece ``p`` of document ``e``: the given translations of its
    context sentences are the document's where it has them, else empty (never read: a model cut into pieces reads
    no target context)."""
    ids = e.ids[p.lo:p.hi]
    if isinstance(e.ids, DocumentIds):
        ids = DocumentIds(ids, e.ids.first_pass[p.lo:p.hi])
    given = [e.given[i] if i < len(e.given) else [] for i in range(p.lo, p.first)]
    return ids, given, p.hi - p.end
