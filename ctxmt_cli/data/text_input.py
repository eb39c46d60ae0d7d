"""What ctxmt accepts as text and JSON from a user, checked in one place for every reader and the server.

- Text (a line of a corpus or of a file to translate, a JSON string): no NUL character (a NUL byte in a
  "text" file usually means UTF-16 or a binary file) and no lone surrogate (``"\\ud800"`` in JSON is not a
  character: it cannot be written out as UTF-8, nor tokenized). :func:`text_problem` says what is wrong.
- JSON (:func:`load_json`): standard JSON only (Python's ``json`` accepts ``NaN``, ``Infinity`` and numbers
  like ``1e400`` that overflow to infinity; none of them is JSON), nested at most :data:`MAX_DEPTH` levels
  (a line of 200,000 ``[`` would otherwise exhaust Python's recursion limit), every string and key text, and
  every key once per object (Python's ``json`` keeps the last of two equal keys without a word, so
  ``{"src": "a", "src": "b"}`` would silently translate ``b``).

The readers prefix :class:`JsonInputError`'s one line with ``FILE:LINE`` (the server answers it with a 4xx).
"""

from __future__ import annotations

import json
import math
import re

#: the deepest nesting of arrays and objects a JSON text may have; ctxmt's own layouts need at most 3
MAX_DEPTH = 32

# a JSON string (skipped whole, so brackets inside it are not counted) or one bracket
_STRING_OR_BRACKET = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')
_NOT_TEXT = re.compile("[\x00\ud800-\udfff]")


class JsonInputError(ValueError):
    """JSON that parses (or would) but is refused: too deep, not standard JSON, or a string that is not text.

    ``field``: where in the value the bad string is (``src[2]``, ``doc_id``), None for the text as a whole."""

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.field = field


def text_problem(text: str) -> str | None:
    """What makes ``text`` unacceptable as text (a NUL or a lone surrogate, with its column), or None."""
    bad = _NOT_TEXT.search(text)
    if bad is None:
        return None
    char = bad.group()
    if char == "\x00":
        return f"a NUL character at column {bad.start() + 1}"
    return f"a lone surrogate \\u{ord(char):04x} at column {bad.start() + 1}, which is not a character"


def load_json(text: str):
    """``json.loads(text)``, refusing what is not standard JSON text (:class:`JsonInputError`, one line).

    Malformed JSON still raises :class:`json.JSONDecodeError`, which each reader words its own way."""
    _check_depth(text)
    try:
        value = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float,
                           object_pairs_hook=_unique_keys)
    except _DuplicateKey as dup:
        raise JsonInputError(f"the key {_shown(dup.key)} appears twice in one object{_position(text, dup.key)}; "
                             "a JSON object holds each key once: remove one of them") from None
    except RecursionError:                          # a backstop: the depth scan should have refused it
        raise JsonInputError(f"nested deeper than {MAX_DEPTH} levels") from None
    except (json.JSONDecodeError, JsonInputError):
        raise
    except ValueError:                              # an integer of more digits than Python converts
        raise JsonInputError("a number of thousands of digits, more than Python reads; give a shorter one") from None
    where = _first_bad_string(value, "")
    if where is not None:
        field, problem = where
        raise JsonInputError(f"{field or 'the value'} holds {problem}; text must hold no NUL and no unpaired "
                             "surrogate escape (\\ud800-\\udfff)", field or None)
    return value


class _DuplicateKey(Exception):
    """Raised inside the parser by :func:`_unique_keys` (not a ValueError, so the parser does not reword it)."""

    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list) -> dict:
    """``object_pairs_hook``: the object as a dict, or :class:`_DuplicateKey` for its first repeated key."""
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return value


_KEY = re.compile(r'("[^"\\]*(?:\\.[^"\\]*)*")\s*:|[\[\]{}]|"[^"\\]*(?:\\.[^"\\]*)*"')


def _position(text: str, key: str) -> str:
    """`` (at line L, column C)`` of the second ``key`` in one object of ``text`` (which parsed), for the error
    line; only run once a duplicate was found, so a good text never pays for the scan."""
    stack: list = []                                  # per open bracket: the keys of an object, None for an array
    for match in _KEY.finditer(text):
        token = match.group()
        if token in "[{":
            stack.append(set() if token == "{" else None)
        elif token in "]}":
            stack.pop() if stack else None
        elif match.group(1) is not None and stack and stack[-1] is not None:
            name = json.loads(match.group(1))
            if name == key and name in stack[-1]:
                line = text.count("\n", 0, match.start()) + 1
                column = match.start() - (text.rfind("\n", 0, match.start()) + 1) + 1
                return f" (at line {line}, column {column})" if "\n" in text.strip() else f" (at column {column})"
            stack[-1].add(name)
    return ""


def _shown(key: str) -> str:
    """A key as the error line shows it: quoted, shortened, on one line."""
    return json.dumps(key[:40])


def _check_depth(text: str) -> None:
    """Refuse arrays and objects nested deeper than :data:`MAX_DEPTH` before the parser recurses into them."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:        # the common case: too few brackets to matter
        return
    depth = 0
    for match in _STRING_OR_BRACKET.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise JsonInputError(f"arrays or objects nested deeper than {MAX_DEPTH} levels (at column "
                                     f"{match.start() + 1}); ctxmt's layouts need at most 3")
        elif token in "]}":
            depth -= 1


def _refuse_constant(name: str):
    raise JsonInputError(f"{name} is not valid JSON (JSON has no NaN or Infinity); give a number or a string")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise JsonInputError(f"the number {text[:40]} is too large for a 64-bit float; give a smaller number")
    return value


def _first_bad_string(value, path: str) -> tuple[str, str] | None:
    """``(field path, problem)`` of the first string or key in ``value`` that is not text, or None."""
    if isinstance(value, str):
        problem = text_problem(value)
        return None if problem is None else (path, problem)
    if isinstance(value, list):
        for i, item in enumerate(value):
            found = _first_bad_string(item, f"{path}[{i}]")
            if found is not None:
                return found
    elif isinstance(value, dict):
        for key, item in value.items():
            problem = text_problem(key)
            if problem is not None:
                return (f"a key of {path}" if path else "a key", problem)
            found = _first_bad_string(item, _key_path(path, key))
            if found is not None:
                return found
    return None


def _key_path(path: str, key: str) -> str:
    """``path.key``; a key that is not a plain name is quoted (and shortened), so the error stays one line."""
    name = key if re.fullmatch(r"[A-Za-z_][\w ]{0,40}", key) else json.dumps(key[:40])
    return f"{path}.{name}" if path else name


def json_kind(value) -> str:
    """A parsed JSON value's type in JSON's words (``array``, ``object``, ``string``, ``number``, ...)."""
    if isinstance(value, bool):
        return "boolean"
    return {dict: "object", list: "array", str: "string", int: "number", float: "number",
            type(None): "null"}.get(type(value), type(value).__name__)
