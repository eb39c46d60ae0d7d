"""The server's per-document state: the earlier sentences a model reads, kept between requests, LRU-bounded.

A document's next sentences are translated as :meth:`ctxmt_cli.api.Model.translate` continues a document: its
kept earlier source sentences with their translations' target token ids as given target context (exact: the ids
are forced where the model's own translations stood). What is kept is what the model reads, so a document costs
a bounded amount of memory however long it grows (:class:`KeepRule`):

- windows (``sentence``, ``concat``, ``caching``, ``hanoit``): the last K non-empty sentences, K the most previous
  context sentences on either side (a concatenation model's window, a caching model's memory: each cache entry is
  computed from its sentence alone, so re-encoding the K sentences rebuilds the memory exactly; hanoit's previous
  sentences, and for a model reading target context their first-pass translations). A sentence-level model keeps none.
- sentence groups (``mbe``): with groups of N consecutive sentences, the earlier sentences of the current,
  unfinished group (at most N - 1); with one group per document (the default), every earlier sentence: a group's
  summary reads all of them, so such a document is refused once it would hold more than ``max_sentences``.

Empty sentences (or those that tokenize to nothing) are never kept: they enter no window, group or memory.
At most ``max_documents`` documents are kept; a new one evicts the least recently used, whose next request
starts it anew (its response says ``"context": "evicted"``). The store is shared by the event loop (delete,
listing) and the batch worker (begin, commit), so every method takes its lock.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

#: ``context`` of a response: a document seen for the first time (or after a DELETE), one whose earlier
#: context was evicted to stay within ``max_documents``, one continued with its kept sentences
NEW, EVICTED, CONTINUED = "new", "evicted", "continued"


@dataclass(frozen=True)
class KeepRule:
    """How many of a document's earlier non-empty sentences to keep, from how many it has had (``total``).

    ``window`` K: the last K. ``group`` N: those of the unfinished group of N consecutive sentences
    (``total % N``). Neither: every sentence, a document holding at most ``max_sentences``."""

    window: int | None = None
    group: int | None = None
    max_sentences: int | None = None

    def keep(self, total: int) -> int:
        """The number of most recent sentences to keep after ``total`` non-empty sentences."""
        if self.window is not None:
            return min(self.window, total)
        if self.group is not None:
            return total % self.group
        return total

    def describe(self) -> str:
        """What is kept per document, for the listening line and /health."""
        if self.window is not None:
            return {0: "no sentence", 1: "the last sentence"}.get(self.window, f"the last {self.window} sentences")
        if self.group is not None:
            return f"the unfinished group's sentences (< {self.group})"
        return f"the whole document (at most {self.max_sentences} sentences)"


@dataclass
class DocumentState:
    """One document's kept earlier sentences, oldest first: ``src`` the source texts, ``tgt`` the target token
    ids of their translations, ``first_pass`` (a model reading target context) their first-pass translations;
    ``total`` the non-empty sentences it has had, kept or not."""

    doc_id: str
    src: list[str] = field(default_factory=list)
    tgt: list[tuple[int, ...]] = field(default_factory=list)
    first_pass: list[str] = field(default_factory=list)
    total: int = 0


@dataclass(frozen=True)
class Snapshot:
    """What a request is translated with: its document's state (a copy of the kept lists) and its ``context``
    status (:data:`NEW`, :data:`EVICTED` or :data:`CONTINUED`). ``state`` is the stored object: a commit lands only
    while it is still the stored one (not deleted or evicted in the meantime)."""

    state: DocumentState
    src: list[str]
    tgt: list[tuple[int, ...]]
    first_pass: list[str]
    status: str


class DocumentStore:
    """At most ``max_documents`` documents' :class:`DocumentState`, least recently used first."""

    def __init__(self, max_documents: int, rule: KeepRule):
        if max_documents < 1:
            raise ValueError("max_documents must be >= 1")
        self.max_documents, self.rule = max_documents, rule
        self._docs: OrderedDict[str, DocumentState] = OrderedDict()
        self._evicted: OrderedDict[str, None] = OrderedDict()   # recently evicted ids, as many as documents kept
        self._lock = threading.Lock()
        self.evictions = 0

    def begin(self, doc_id: str) -> Snapshot:
        """The state to translate ``doc_id``'s next sentences with (a new one is stored now, evicting the least
        recently used document beyond ``max_documents``); the document becomes the most recently used."""
        with self._lock:
            state = self._docs.get(doc_id)
            if state is not None:
                self._docs.move_to_end(doc_id)
                status = CONTINUED
            else:
                status = EVICTED if doc_id in self._evicted else NEW
                self._evicted.pop(doc_id, None)
                state = self._docs[doc_id] = DocumentState(doc_id)
                while len(self._docs) > self.max_documents:
                    old, _ = self._docs.popitem(last=False)
                    self._remember_eviction(old)
            return Snapshot(state, list(state.src), list(state.tgt), list(state.first_pass), status)

    def commit(self, snapshot: Snapshot, src: list[str], tgt: list[tuple[int, ...]], first_pass: list[str]) -> bool:
        """Append a request's non-empty sentences (sources, translation ids, first passes) to its document and
        trim it to the :class:`KeepRule`; False (nothing kept) when the document was deleted or evicted meanwhile."""
        with self._lock:
            state = snapshot.state
            if self._docs.get(state.doc_id) is not state:
                return False
            state.total += len(src)
            keep = self.rule.keep(state.total)
            state.src = _last(state.src + list(src), keep)
            state.tgt = _last(state.tgt + list(tgt), keep)
            if first_pass:
                state.first_pass = _last(state.first_pass + list(first_pass), keep)
            return True

    def abandon(self, snapshot: Snapshot) -> None:
        """Forget a document that a failed request created (it holds nothing yet)."""
        with self._lock:
            state = snapshot.state
            if snapshot.status != CONTINUED and self._docs.get(state.doc_id) is state and state.total == 0:
                del self._docs[state.doc_id]

    def delete(self, doc_id: str) -> bool:
        """Forget ``doc_id``; False when it is not kept."""
        with self._lock:
            self._evicted.pop(doc_id, None)
            return self._docs.pop(doc_id, None) is not None

    def ids(self) -> list[str]:
        """The kept document ids, least recently used first."""
        with self._lock:
            return list(self._docs)

    def __len__(self) -> int:
        with self._lock:
            return len(self._docs)

    def _remember_eviction(self, doc_id: str) -> None:
        self.evictions += 1
        self._evicted[doc_id] = None
        while len(self._evicted) > self.max_documents:
            self._evicted.popitem(last=False)


def _last(items: list, count: int) -> list:
    """The last ``count`` items (none for 0)."""
    return items[len(items) - count:]
