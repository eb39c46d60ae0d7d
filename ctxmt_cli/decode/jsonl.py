"""JSONL documents for ``ctxmt translate --input-format jsonl``: one document per line in, one per line out.

In: ``{"doc_id": ..., "src": [...], "tgt_context": [...]}`` (``doc_id`` and ``tgt_context`` optional; a
document without ``doc_id`` gets its line number). Out: ``{"doc_id": ..., "translations": [...]}`` with, when
asked for, ``"scores"`` (sentence log-probabilities) and ``"nbest"`` (each sentence's n best translations);
see :meth:`~ctxmt_cli.decode.records.DocumentTranslation.to_json`. A line that is not such a document is one
error naming the file and line. Blank lines are skipped.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator

from ctxmt_cli.data.text_input import JsonInputError, json_kind, load_json
from ctxmt_cli.decode.records import Document, DocumentTranslation
from ctxmt_cli.errors import CtxmtError

#: the fields of an input document
FIELDS = ("doc_id", "src", "tgt_context")
EXAMPLE = '{"doc_id": "d1", "src": ["First sentence.", "Second one."]}'


def _strings(value, name: str, where: str) -> list[str]:
    """``value`` as a list of strings, or a one-line error naming the field."""
    if not isinstance(value, list):
        raise CtxmtError(f"{where}: {name!r} must be a list of strings (one per sentence), not a JSON "
                         f"{json_kind(value)}; e.g. {EXAMPLE}")
    for i, sentence in enumerate(value):
        if not isinstance(sentence, str):
            raise CtxmtError(f"{where}: {name}[{i}] is a JSON {json_kind(sentence)}; every sentence must be a string, "
                             f"e.g. {EXAMPLE}")
    return value


def parse_document(text: str, where: str, default_id: int) -> Document:
    """The document on one JSONL line; ``where`` (``FILE:LINE``) starts every error, ``default_id`` is its id
    when the line gives none."""
    try:
        obj = load_json(text)
    except json.JSONDecodeError as err:
        raise CtxmtError(f"{where}: not valid JSON ({err.msg}, column {err.colno}); give one JSON object per "
                         f"line, e.g. {EXAMPLE}") from None
    except JsonInputError as err:
        raise CtxmtError(f"{where}: {err}; give one JSON object per line, e.g. {EXAMPLE}") from None
    if not isinstance(obj, dict):
        raise CtxmtError(f"{where}: a document is a JSON object, not a JSON {json_kind(obj)}; e.g. {EXAMPLE}")
    unknown = [key for key in obj if key not in FIELDS]
    if unknown:
        raise CtxmtError(f"{where}: unknown field {unknown[0]!r}; a document has the fields "
                         f"{', '.join(FIELDS)}")
    if "src" not in obj:
        raise CtxmtError(f"{where}: no \"src\"; give the document's source sentences as a list of strings, "
                         f"e.g. {EXAMPLE}")
    src = _strings(obj["src"], "src", where)
    given = _strings(obj.get("tgt_context", []), "tgt_context", where)
    if len(given) > len(src):
        raise CtxmtError(f"{where}: {len(given)} tgt_context sentences for {len(src)} src sentences; tgt_context "
                         "holds the translations of the first src sentences (at most one per sentence)")
    doc_id = obj.get("doc_id", default_id)
    if isinstance(doc_id, bool) or not isinstance(doc_id, (str, int, float)) or doc_id == "":
        raise CtxmtError(f"{where}: doc_id must be a non-empty string or a number, not {json.dumps(doc_id)[:40]} "
                         "(leave it out to use the line number)")
    return Document(src=src, tgt_context=given, doc_id=doc_id)


def parse_documents(lines: Iterable[str], name: str) -> Iterator[Document]:
    """The documents of JSONL ``lines`` (from file ``name``), one at a time as the lines arrive."""
    for lineno, line in enumerate(lines, start=1):
        if line.strip():
            yield parse_document(line, f"{name}:{lineno}", lineno)


def format_translation(result: DocumentTranslation, scores: bool = False, nbest: bool = False) -> str:
    """One output line (UTF-8 text as it is, not escaped)."""
    return json.dumps(result.to_json(scores, nbest), ensure_ascii=False) + "\n"
