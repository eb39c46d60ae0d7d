"""A document as the translator reads it: its non-empty sentences as source ids, with the translations given for
its first sentences and, for a model reading a target concatenation, its first pass.

An empty source line (or one that tokenizes to nothing) yields an empty output and does not enter later windows:
the models never saw empty sentences. A sentence longer than the window limit is cut to fit (and counted).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from ctxmt_cli.models.families import inputs_of

log = logging.getLogger(__name__)

#: a first-pass sentence: text (encoded with the bilingual model's tokenizer, target side) or ids used as they are
FirstPass = str | Sequence[int]



class DocumentIds(list):
    """A document's source sentence ids (the list the translator reads) and ``first_pass``: the target-language
    ids of each sentence's first-pass translation, for a bilingual model's target concatenation."""

    def __init__(self, sentences: Sequence[Sequence[int]], first_pass: Sequence[Sequence[int]]):
        super().__init__(sentences)
        self.first_pass = list(first_pass)


def first_pass_ids(tokenizer, sentences: Sequence[FirstPass], limit: int) -> list[list[int]]:
    """Target ids of first-pass sentences (text encoded on the target side, ids kept), each cut to ``limit``."""
    return [list(tokenizer.encode_tgt(s) if isinstance(s, str) and s.strip() else
                 ([] if isinstance(s, str) else s))[:limit] for s in sentences]


def first_pass_per_document(model, documents: Sequence[Sequence[str]], first_pass: Sequence | None) -> list:
    """Each document's first pass (None for a model that reads none), after the family's check
    (:meth:`~ctxmt_cli.models.inputs.Inputs.check_first_pass`)."""
    inputs_of(model.cfg).check_first_pass(documents, first_pass)
    return list(first_pass) if first_pass is not None else [None] * len(documents)


@dataclass
class Encoded:
    """One document as the translator reads it: the input line of each non-empty sentence, their source ids
    (:class:`DocumentIds` with a first pass), and the target ids of the first ones whose translation is given."""

    lines: list[int]
    ids: list[list[int]]
    given: list[list[int]]


def encode_document(tokenizer, doc: Sequence[str], limit: int, stats, first_pass=None,
                     given: Sequence = ()) -> Encoded:
    """The non-empty sentences of ``doc`` as ids (over-long ones cut; + ``first_pass``: DocumentIds) and the
    target ids of ``given``, the translations of its first sentences (text, or ids used as they are)."""
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
    return Encoded(kept, ids, first_pass_ids(tokenizer, [given[i] for i in kept if i < len(given)], limit - 1))
