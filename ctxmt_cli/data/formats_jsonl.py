"""Reader for ``ctxmt prepare jsonl``: ``{"doc_id", "src", "tgt"}`` per line, a new document when ``doc_id``
changes between adjacent lines. Each line is read by the strict JSON reader
(:func:`~ctxmt_cli.data.text_input.load_json`) and every field's type is checked: one error naming the file,
line and field.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from ctxmt_cli.data.lines import LocatedDoc, fail, read_lines
from ctxmt_cli.data.text_input import JsonInputError, json_kind, load_json


def jsonl_docs(path: Path, fields: tuple[str, ...]) -> Iterator[LocatedDoc]:
    """The documents of a JSONL corpus: consecutive lines with the same ``doc_id`` are one document."""
    sents: list[tuple[str, ...]] = []
    lines: list[int] = []
    prev_id: object = None
    example = json.dumps({"doc_id": "d1", **{f: "..." for f in fields}})
    for lineno, line in read_lines(path, "jsonl"):
        if not line.strip():
            continue
        doc_id, texts = jsonl_record(path, lineno, line, fields, example)
        if sents and doc_id != prev_id:
            yield sents, lines
            sents, lines = [], []
        prev_id = doc_id
        sents.append(texts)
        lines.append(lineno)
    if sents:
        yield sents, lines


def jsonl_record(path: Path, lineno: int, line: str, fields: tuple[str, ...],
                  example: str) -> tuple[object, tuple[str, ...]]:
    """The document id and the sentences (one per field) of one JSONL line, every field's type checked."""
    shape = f"each line must be one object like {example}"
    try:
        obj = load_json(line)
    except json.JSONDecodeError as e:
        raise fail(path, lineno, f"invalid JSON ({e.msg} at column {e.colno})", shape) from None
    except JsonInputError as e:
        raise fail(path, lineno, str(e), shape) from None
    if not isinstance(obj, dict):
        raise fail(path, lineno, f"a JSON {json_kind(obj)}, not an object", shape)
    missing = [k for k in ("doc_id", *fields) if k not in obj]
    if missing:
        raise fail(path, lineno, f"missing key(s) {', '.join(missing)}", shape)
    doc_id = obj["doc_id"]
    if isinstance(doc_id, bool) or not isinstance(doc_id, (str, int, float)) or doc_id == "":
        raise fail(path, lineno, f'"doc_id" is {json.dumps(doc_id)[:40]}, not a non-empty string or a number',
                   f"write it like {example}")
    texts = []
    for k in fields:
        if not isinstance(obj[k], str):
            raise fail(path, lineno, f'"{k}" is not a string', f"write it like {example}")
        texts.append(obj[k].strip())
        if not texts[-1]:
            raise fail(path, lineno, f'empty "{k}" (an empty sentence)',
                       "fill it in or remove the line")
    return doc_id, tuple(texts)
