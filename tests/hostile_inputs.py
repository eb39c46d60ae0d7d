"""Hypothesis strategies for hostile reader inputs: the files a careless or hostile user gives ctxmt's readers.

Each strategy draws whole file contents (bytes): a plausible file of the reader's layout, then bent the ways real
files are bent — random bytes and random Unicode, structure cut or broken, keys given twice, tags nested, a BOM,
CRLF or lone CR line ends, NUL bytes, Latin-1 or UTF-16 text, deep nesting. The properties that use them
(``tests/unit/test_*``, ``tests/integration/test_reader_safety.py``) hold each reader to one promise: it reads
the file, or it refuses it in one line, never with a traceback, and never changes it.
"""

from __future__ import annotations

import json

from hypothesis import strategies as st

#: text of every kind: letters, spaces, punctuation, emoji, controls (NUL, CR, form feed, U+2028), surrogates
TEXT = st.text(st.characters(codec=None, blacklist_categories=()), max_size=30)
WORDS = st.text(st.sampled_from("abc xyz .,'\"<>&\\/[]{}:éü😀\t"), min_size=1, max_size=20)
SCALARS = st.none() | st.booleans() | st.integers(-10 ** 20, 10 ** 20) | st.floats(allow_nan=False) | WORDS | TEXT
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(WORDS, inner, max_size=3),
                      max_leaves=8)


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")      # a lone surrogate becomes the bytes no decoder accepts


@st.composite
def bent(draw, data: bytes) -> bytes:
    """``data`` bent by one to three of the ways files are damaged."""
    for _ in range(draw(st.integers(1, 3))):
        how = draw(st.sampled_from(["bom", "crlf", "cr", "nul", "cut", "flip", "latin1", "utf16", "insert", "none"]))
        if how == "bom":
            data = b"\xef\xbb\xbf" + data
        elif how == "crlf":
            data = data.replace(b"\n", b"\r\n")
        elif how == "cr":
            data = data.replace(b"\n", b"\r")
        elif how in ("nul", "insert", "cut", "flip") and data:
            at = draw(st.integers(0, len(data)))
            extra = b"\x00" if how == "nul" else draw(st.binary(min_size=1, max_size=4))
            data = {"nul": data[:at] + extra + data[at:], "insert": data[:at] + extra + data[at:], "cut": data[:at],
                    "flip": data[:at] + bytes([extra[0]]) + data[at + 1:]}[how]
        elif how == "latin1":
            data = data.decode("utf-8", "replace").encode("latin-1", "replace")
        elif how == "utf16":
            data = data.decode("utf-8", "replace").encode("utf-16")
    return data


def _object_text(draw, keys: list[str]) -> str:
    """One JSON object as text, its keys from ``keys`` (a key may come twice: Python would keep the last)."""
    chosen = draw(st.lists(st.sampled_from(keys) | WORDS, max_size=6))
    pairs = [f"{json.dumps(k)}: {json.dumps(draw(VALUES), ensure_ascii=draw(st.booleans()))}" for k in chosen]
    return "{" + ", ".join(pairs) + "}"


@st.composite
def jsonl_files(draw, keys: list[str], good: str) -> bytes:
    """A JSONL file: good lines (``good``), drawn objects over ``keys``, deep nesting, garbage; then bent."""
    line = st.sampled_from(["good", "twice", "object", "deep", "garbage", "blank", "scalar"])
    lines = []
    for kind in draw(st.lists(line, min_size=1, max_size=5)):
        if kind == "good":
            lines.append(good)
        elif kind == "twice":                   # the good line with one of its keys given again
            lines.append(f"{good[:-1]}, {json.dumps(draw(st.sampled_from(keys)))}: {json.dumps(draw(VALUES))}}}")
        elif kind == "object":
            lines.append(_object_text(draw, keys))
        elif kind == "deep":
            depth = draw(st.integers(30, 5000))
            lines.append("[" * depth + "]" * draw(st.integers(0, depth)))
        elif kind == "garbage":
            lines.append(draw(TEXT))
        elif kind == "scalar":
            lines.append(json.dumps(draw(VALUES)))
        else:
            lines.append("")
    data = b"".join(_encode(text) + b"\n" for text in lines)
    return draw(bent(data)) if draw(st.booleans()) else data


@st.composite
def text_files(draw) -> bytes:
    """A text file of documents: lines of drawn text, blank lines between documents; then bent."""
    lines = draw(st.lists(WORDS | TEXT | st.just(""), min_size=1, max_size=6))
    data = b"".join(_encode(line) + b"\n" for line in lines)
    return draw(bent(data)) if draw(st.booleans()) else draw(st.binary(max_size=60)) if draw(st.booleans()) else data


@st.composite
def xml_files(draw) -> tuple[bytes, bytes]:
    """The two sides of an IWSLT/WMT XML pair: documents of segments, the source side bent (tags nested, cut,
    dropped, duplicated, text that is not text), the target side plain."""
    n_docs, n_segs = draw(st.integers(1, 2)), draw(st.integers(1, 3))
    src, tgt = [], []
    for d in range(n_docs):
        src.append(f'<doc docid="d{d}">')
        tgt.append(f'<doc docid="d{d}">')
        for k in range(n_segs):
            text = draw(WORDS.filter(lambda t: t.strip() and "<" not in t and "&" not in t))
            src.append(f'<seg id="{k}">{text}</seg>')
            tgt.append(f'<seg id="{k}">x {k}</seg>')
        src.append("</doc>")
        tgt.append("</doc>")
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(src)))
        src.insert(at, draw(st.sampled_from(['<seg id="0">', "</seg>", '<seg id="9">a <seg id="8">b</seg> c</seg>',
                                             '<doc docid="d0">', "</doc>", "<seg>", "<talkid>1</talkid>", "&amp;"])))
    data = _encode("\n".join(src) + "\n")
    return (draw(bent(data)) if draw(st.booleans()) else data), _encode("\n".join(tgt) + "\n")
