"""What translation reads and returns, as typed records: a :class:`Document` in, a :class:`DocumentTranslation` out.

Shared by the Python API (:mod:`ctxmt_cli.api`), the JSONL input and output of ``ctxmt translate``
(:mod:`ctxmt_cli.decode.jsonl`) and the translator (:class:`Candidate`). Imports nothing heavy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

#: a document id as JSONL carries it: a string or a number (a JSONL document without one: its line number)
DocId = str | int | float | None
#: a given translation: text (encoded with the model's tokenizer) or the target token ids of a
#: :class:`Candidate` (exact: a decoded text does not always encode back to the same pieces)
Given = str | Sequence[int]


@dataclass
class Document:
    """A document to translate.

    ``src``: its source sentences, in order. ``tgt_context``: the translations of its first sentences when they
    are known (a gold prefix, or what an earlier call translated; text or token ids, see :data:`Given`): those
    sentences are not translated again, their given translations are the target context of the next ones.
    ``doc_id`` is carried to the output. ``first_pass``: for a bilingual HanoiT model, sentence-level
    translations of the first sentences (all, or a prefix: the rest is translated by the first-pass model the
    model was loaded with).
    """

    src: list[str]
    tgt_context: list[Given] = field(default_factory=list)
    doc_id: DocId = None
    first_pass: list[Given] | None = None


@dataclass(frozen=True)
class Candidate:
    """One translation of a sentence: its text, ``logprob`` the summed log-probability of its tokens and ``</s>``
    given its source window and target context (what forced decoding gives the same tokens), ``score`` the
    beam's normalised score (``logprob / (tokens + 1) ** lenpen``, what ranks an n-best list) and ``tokens`` its
    target token ids (give them back as target context to continue a document exactly)."""

    text: str
    logprob: float
    score: float
    tokens: tuple[int, ...] = ()

    def to_json(self) -> dict:
        """``{"translation", "logprob", "score"}``."""
        return {"translation": self.text, "logprob": self.logprob, "score": self.score}


@dataclass
class SentenceTranslation:
    """The translation of one source sentence. ``logprob``: its sentence log-probability (when scores were
    asked for; None for an empty source line). ``nbest``: its n best translations, best first (when an n-best
    list was asked for; empty for an empty source line)."""

    text: str
    logprob: float | None = None
    nbest: list[Candidate] | None = None


@dataclass
class DocumentTranslation:
    """The translation of a :class:`Document`: one :class:`SentenceTranslation` per source sentence after its
    given target context (``src[len(tgt_context):]``), in order."""

    doc_id: DocId
    sentences: list[SentenceTranslation]

    @property
    def translations(self) -> list[str]:
        """The best translation of each translated sentence."""
        return [s.text for s in self.sentences]

    @property
    def logprobs(self) -> list[float | None]:
        """The sentence log-probability of each translated sentence (None where none was computed)."""
        return [s.logprob for s in self.sentences]

    def to_json(self, scores: bool = False, nbest: bool = False) -> dict:
        """``{"doc_id", "translations"}``, with ``scores`` the sentence log-probabilities, with ``nbest`` the
        n-best lists (one list of ``{"translation", "logprob", "score"}`` per sentence)."""
        out: dict = {"doc_id": self.doc_id, "translations": self.translations}
        if scores:
            out["scores"] = self.logprobs
        if nbest:
            out["nbest"] = [[c.to_json() for c in s.nbest or []] for s in self.sentences]
        return out
