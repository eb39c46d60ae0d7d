"""ctxmt's own layouts: the generic JSONL (``jsonl:PATH``) and the synthetic benchmark's sets.

Generic layout, one JSON object per line::

    {"src_context": ["oldest", ..., "newest"], "src": "current source",
     "tgt_context": ["oldest", ..., "newest"], "candidates": ["correct", "contrastive", ...],
     "correct": 0, "tags": {"phenomenon": "pronoun", "distance": 2}}

``correct`` defaults to 0 and ``tags`` to ``{}``. Optional
``"candidate_contexts": [[...], ...]`` gives each candidate its own target
context (one list per candidate, as long as ``src_context``) when candidates
differ in earlier sentences too. Accuracy is reported by every tag key found, and per class
(balanced accuracy): the ``class`` tag where the items have one, else ``pronoun``, else ``phenomenon``.
"""

from __future__ import annotations

import json
from pathlib import Path

from ctxmt_cli.data.lines import read_lines
from ctxmt_cli.data.text_input import JsonInputError, json_kind, load_json
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.evaluate.testsets.base import ContrastiveItem, TestSet
from ctxmt_cli.paths import check_input_file

FIELDS = {"src_context", "src", "tgt_context", "candidates", "correct", "tags", "candidate_contexts"}
#: the tags that name a generic item's class (balanced accuracy), the first one present
CLASS_TAGS = ("class", "pronoun", "phenomenon")
EXAMPLE = '{"src": "It is big.", "candidates": ["Es ist groß.", "Sie ist groß."], "correct": 0}'


def parse_item(raw: object, where: str) -> ContrastiveItem:
    """One generic item, every field's type checked; ``where`` (``FILE:LINE``) prefixes every error."""
    if not isinstance(raw, dict):
        raise CtxmtError(f"{where}: a JSON {json_kind(raw)}, not an object; give one item per line, e.g. {EXAMPLE}")
    unknown = set(raw) - FIELDS
    if unknown or "src" not in raw or "candidates" not in raw:
        extra = f"; unknown keys {sorted(unknown)}" if unknown else ""
        raise CtxmtError(f"{where}: needs 'src' and 'candidates'{extra} (allowed: {', '.join(sorted(FIELDS))})")
    _check_string(raw["src"], "src", where)
    for name in ("src_context", "tgt_context", "candidates"):
        _check_strings(raw.get(name, []), name, where)
    item = ContrastiveItem(**{"src_context": [], "tgt_context": [], **raw})
    if isinstance(item.correct, bool) or not isinstance(item.correct, int):
        raise CtxmtError(f"{where}: 'correct' is a JSON {json_kind(item.correct)}; give the index of the correct "
                         "candidate (a whole number)")
    if len(item.candidates) < 2 or not 0 <= item.correct < len(item.candidates):
        raise CtxmtError(f"{where}: needs >= 2 candidates and 0 <= correct < {len(item.candidates)}")
    _check_tags(item.tags, where)
    if item.candidate_contexts is not None:
        _check_candidate_contexts(item, where)
    return item


def _check_string(value, name: str, where: str) -> None:
    if not isinstance(value, str):
        raise CtxmtError(f"{where}: {name!r} is a JSON {json_kind(value)}; it must be a string (one sentence)")


def _check_strings(value, name: str, where: str) -> None:
    """A list of sentences: a string is refused, not read as a list of characters."""
    if not isinstance(value, list):
        raise CtxmtError(f"{where}: {name!r} is a JSON {json_kind(value)}; it must be a list of strings, e.g. "
                         f"{EXAMPLE}")
    for i, sentence in enumerate(value):
        _check_string(sentence, f"{name}[{i}]", where)


def _check_tags(tags, where: str) -> None:
    if not isinstance(tags, dict):
        raise CtxmtError(f"{where}: 'tags' is a JSON {json_kind(tags)}; it must be an object, e.g. "
                         '{"phenomenon": "pronoun", "distance": 2}')
    for key, value in tags.items():
        if not isinstance(value, (str, int, float)) and value is not None:
            raise CtxmtError(f"{where}: tags.{key} is a JSON {json_kind(value)}; a tag is a string, a number, true, "
                             "false or null (accuracy is grouped by it)")


def _check_candidate_contexts(item: ContrastiveItem, where: str) -> None:
    contexts = item.candidate_contexts
    if not isinstance(contexts, list) or len(contexts) != len(item.candidates):
        raise CtxmtError(f"{where}: 'candidate_contexts' needs one list per candidate, each as long as 'src_context'")
    for k, context in enumerate(contexts):
        _check_strings(context, f"candidate_contexts[{k}]", where)
        if len(context) != len(item.src_context):
            raise CtxmtError(f"{where}: 'candidate_contexts' needs one list per candidate, each as long as "
                             "'src_context'")


def read_items(path: Path) -> list[ContrastiveItem]:
    """Items of a generic JSONL file (blank lines skipped)."""
    items = []
    for number, line in read_lines(path, "jsonl test set"):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            raw = load_json(line)
        except json.JSONDecodeError as err:
            raise CtxmtError(f"{where}: malformed JSON ({err.msg} at column {err.colno})") from None
        except JsonInputError as err:
            raise CtxmtError(f"{where}: {err}; give one item per line, e.g. {EXAMPLE}") from None
        items.append(parse_item(raw, where))
    if not items:
        raise CtxmtError(f"{path}: no items; expected one JSON object per line")
    return items


def read_jsonl(path: Path, **options) -> list[TestSet]:
    """A user's set in the generic layout; reported by every tag key present."""
    check_input_file(path, "jsonl test set", "give a JSONL file, one item per line")
    items = read_items(path)
    keys = sorted({key for item in items for key in item.tags})
    return [TestSet(name=path.stem, kind="jsonl", items=items, groupings=tuple(keys), classes=class_key(keys),
                    files=[path])]


def class_key(keys: list[str]) -> str | None:
    """The tag naming a generic item's class: ``class`` where the items carry one, else ``pronoun``, else
    ``phenomenon``; None (one class) when they have none of these."""
    return next((key for key in CLASS_TAGS if key in keys), None)


def read_synthetic(path: Path, **options) -> list[TestSet]:
    """The synthetic benchmark's sets: a prepared directory (or its ``raw/contrastive`` folder)."""
    for candidate in (path / "raw" / "contrastive" / "items.jsonl", path / "items.jsonl", path):
        if candidate.is_file():
            items = read_items(candidate)
            return [TestSet(name="synthetic", kind="synthetic", items=items, files=[candidate],
                            groupings=("phenomenon", "distance", "phenomenon/distance"),
                            classes="phenomenon/distance")]
    raise CtxmtError(f"{path} has no synthetic contrastive sets (raw/contrastive/items.jsonl); "
                     f"run ctxmt prepare synthetic --out {path}")
