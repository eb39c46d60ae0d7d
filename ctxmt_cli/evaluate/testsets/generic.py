"""ctxmt's own layouts: the generic JSONL (``jsonl:PATH``) and the synthetic benchmark's sets.

Generic layout, one JSON object per line::

    {"src_context": ["oldest", ..., "newest"], "src": "current source",
     "tgt_context": ["oldest", ..., "newest"], "candidates": ["correct", "contrastive", ...],
     "correct": 0, "tags": {"phenomenon": "pronoun", "distance": 2}}

``correct`` defaults to 0 and ``tags`` to ``{}``. Optional
``"candidate_contexts": [[...], ...]`` gives each candidate its own target
context (one list per candidate, as long as ``src_context``) when candidates
differ in earlier sentences too. Accuracy is reported by every tag key found.
"""

from __future__ import annotations

import json
from pathlib import Path

from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.evaluate.testsets.base import ContrastiveItem, TestSet

FIELDS = {"src_context", "src", "tgt_context", "candidates", "correct", "tags", "candidate_contexts"}


def parse_item(raw: object, where: str) -> ContrastiveItem:
    """One generic item, checked; ``where`` (``FILE:LINE``) prefixes every error."""
    if not isinstance(raw, dict):
        raise CtxmtError(f"{where}: expected a JSON object per line; see the jsonl layout in README")
    unknown = set(raw) - FIELDS
    if unknown or "src" not in raw or "candidates" not in raw:
        raise CtxmtError(f"{where}: needs 'src' and 'candidates'{f'; unknown keys {sorted(unknown)}' if unknown else ''} "
                         f"(allowed: {', '.join(sorted(FIELDS))})")
    item = ContrastiveItem(**{"src_context": [], "tgt_context": [], **raw})
    strings = [item.src, *item.src_context, *item.tgt_context, *item.candidates]
    if not all(isinstance(s, str) for s in strings) or not isinstance(item.tags, dict):
        raise CtxmtError(f"{where}: sentences must be strings and 'tags' an object")
    if len(item.candidates) < 2 or not isinstance(item.correct, int) or not 0 <= item.correct < len(item.candidates):
        raise CtxmtError(f"{where}: needs >= 2 candidates and 0 <= correct < {len(item.candidates)}")
    if item.candidate_contexts is not None and (
        len(item.candidate_contexts) != len(item.candidates)
        or any(len(ctx) != len(item.src_context) for ctx in item.candidate_contexts)
    ):
        raise CtxmtError(f"{where}: 'candidate_contexts' needs one list per candidate, each as long as 'src_context'")
    return item


def read_items(path: Path) -> list[ContrastiveItem]:
    """Items of a generic JSONL file (blank lines skipped)."""
    items = []
    try:
        with path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    raw = json.loads(line)
                except json.JSONDecodeError as err:
                    raise CtxmtError(f"{path}:{number}: malformed JSON ({err.msg} at column {err.colno})") from None
                items.append(parse_item(raw, f"{path}:{number}"))
    except UnicodeDecodeError as err:
        raise CtxmtError(f"{path}: not UTF-8 at byte {err.start}; convert it, e.g. iconv -f LATIN1 -t UTF-8") from None
    if not items:
        raise CtxmtError(f"{path}: no items; expected one JSON object per line")
    return items


def read_jsonl(path: Path, **options) -> list[TestSet]:
    """A user's set in the generic layout; reported by every tag key present."""
    if not path.is_file():
        raise CtxmtError(f"jsonl test set must be a file: {path}")
    items = read_items(path)
    keys = sorted({key for item in items for key in item.tags})
    return [TestSet(name=path.stem, kind="jsonl", items=items, groupings=tuple(keys), files=[path])]


def read_synthetic(path: Path, **options) -> list[TestSet]:
    """The synthetic benchmark's sets: a prepared directory (or its ``raw/contrastive`` folder)."""
    for candidate in (path / "raw" / "contrastive" / "items.jsonl", path / "items.jsonl", path):
        if candidate.is_file():
            items = read_items(candidate)
            return [TestSet(name="synthetic", kind="synthetic", items=items, files=[candidate],
                            groupings=("phenomenon", "distance", "phenomenon/distance"))]
    raise CtxmtError(f"{path} has no synthetic contrastive sets (raw/contrastive/items.jsonl); "
                     f"run ctxmt prepare synthetic --out {path}")
