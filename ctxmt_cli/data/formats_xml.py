"""Reader for the official IWSLT / WMT XML format (``<doc docid=...>`` with ``<seg id=N>``).

The publishers' files are line-oriented (one ``<seg>`` per line) but not always
well-formed XML, so this is a streaming tag scanner rather than an XML parser:
it keeps line numbers for error messages and never holds more than one document.
A segment's text is kept as published (XML entities unescaped): only the whitespace around it is stripped,
and a line break inside a segment that spans lines becomes a space (a sentence is one line everywhere after);
runs of spaces inside it stay, so references equal the publisher's segments. The two sides
are matched by docid (same documents, same order) and by seg id within a document.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from pathlib import Path

from ctxmt_cli.data.lines import LocatedDoc, fail, read_lines
from ctxmt_cli.errors import CtxmtError

_TOKEN = re.compile(
    r"<doc\b(?P<doc>[^>]*)>|</doc\s*>|<seg\b(?P<seg>[^>]*)>(?P<text>.*?)</seg\s*>",
    re.IGNORECASE | re.DOTALL,
)
_MAX_SEG_CHARS = 1 << 20  # an unclosed <seg> must not swallow the whole file
_OPEN_SEG = re.compile(r"<seg\b", re.IGNORECASE)
# a tag that cannot stand inside a segment's text (a <seg> in a <seg>, a document tag): the scanner would otherwise
# take the inner one's text as part of the outer one's and drop what follows, without a word
_TAG_IN_SEG = re.compile(r"</?(?:seg|doc)\b", re.IGNORECASE)
_CLOSE_SEG = re.compile(r"</seg\s*>", re.IGNORECASE)
_LINE_BREAK = re.compile(r"\r\n|[\r\n]")
_ATTR = re.compile(r"""([\w:-]+)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+))""")

# One side's document: (docid, [(seg id, text, line)], line of <doc>)
_XmlDoc = tuple[str, list[tuple[str, str, int]], int]


def _attrs(text: str) -> dict[str, str]:
    return {m[1].lower(): html.unescape(m[2] or m[3] or m[4] or "") for m in _ATTR.finditer(text)}


class _SideState:
    """Scanner state for one XML file."""

    def __init__(self, path: Path):
        self.path = path
        self.doc: _XmlDoc | None = None
        self.seen: set[str] = set()

    def open_doc(self, attrs: dict[str, str], lineno: int) -> None:
        if self.doc is not None:
            raise fail(self.path, lineno, f"<doc> opened inside the <doc> of line {self.doc[2]}",
                       "close each document with </doc>")
        docid = attrs.get("docid") or attrs.get("talkid")
        if not docid:
            raise fail(self.path, lineno, "<doc> without a docid attribute",
                       'write it as <doc docid="...">')
        self.doc = (docid, [], lineno)
        self.seen = set()

    def add_seg(self, attrs: dict[str, str], text: str, lineno: int) -> None:
        if self.doc is None:
            raise fail(self.path, lineno, "<seg> outside any <doc>",
                       "put every <seg> inside a <doc docid=...> element")
        seg_id = attrs.get("id")
        if not seg_id:
            raise fail(self.path, lineno, "<seg> without an id attribute",
                       'write it as <seg id="N">')
        inner = _TAG_IN_SEG.search(text)
        if inner:
            raise fail(self.path, lineno, f"{inner.group()}> inside <seg id={seg_id}> (a segment holds text, not "
                       "another segment or document)", "close each <seg> with </seg> before the next tag")
        if seg_id in self.seen:
            raise fail(self.path, lineno, f"duplicate seg id {seg_id} in doc {self.doc[0]}",
                       "give each segment of a document its own id")
        text = _LINE_BREAK.sub(" ", html.unescape(text).strip())
        if not text:
            raise fail(self.path, lineno, f"empty segment (seg id {seg_id})",
                       "fill it in or remove it from both sides")
        self.seen.add(seg_id)
        self.doc[1].append((seg_id, text, lineno))

    def close_doc(self, lineno: int) -> _XmlDoc:
        if self.doc is None:
            raise fail(self.path, lineno, "</doc> without an opening <doc>",
                       "check the document tags")
        doc, self.doc = self.doc, None
        if not doc[1]:
            raise fail(self.path, doc[2], f"empty document (doc {doc[0]} has no <seg>)",
                       "remove the empty <doc> from both sides")
        return doc


def _no_stray_close(path: Path, between: str, lineno: int) -> None:
    """Text between the scanner's tokens holds no ``</seg>`` (the end of a segment nested in another, or one
    never opened)."""
    if _CLOSE_SEG.search(between):
        raise fail(path, lineno, "</seg> without an opening <seg> (a <seg> nested in another?)",
                   "give each segment one <seg id=N>...</seg> of its own")


def xml_side(path: Path, role: str) -> Iterator[_XmlDoc]:
    """Stream the documents of one XML file."""
    state = _SideState(path)
    carry, carry_line = "", 0
    for lineno, line in read_lines(path, role):
        buf = carry + "\n" + line if carry else line
        at = carry_line if carry else lineno
        pos = 0
        for m in _TOKEN.finditer(buf):
            _no_stray_close(path, buf[pos:m.start()], lineno)
            pos = m.end()
            if m.group(0)[1] == "/":
                yield state.close_doc(lineno)
            elif m.group("seg") is not None:
                state.add_seg(_attrs(m.group("seg")), m.group("text"), at if m.start() == 0 else lineno)
            else:
                state.open_doc(_attrs(m.group("doc")), lineno)
        rest = buf[pos:]
        open_seg = _OPEN_SEG.search(rest)
        _no_stray_close(path, rest[:open_seg.start()] if open_seg else rest, lineno)
        carry = rest[open_seg.start():] if open_seg else ""
        carry_line = at if pos == 0 else lineno
        if len(carry) > _MAX_SEG_CHARS:
            raise fail(path, carry_line, "<seg> is never closed", "close it with </seg>")
    if carry:
        raise fail(path, carry_line, "<seg> is never closed", "close it with </seg>")
    if state.doc is not None:
        raise fail(path, state.doc[2], f"<doc> {state.doc[0]} is never closed",
                   "close it with </doc>")


def _match_segs(paths: list[Path], da: _XmlDoc, db: _XmlDoc) -> tuple[list[str], list[str], list[int]]:
    if da[0] != db[0]:
        raise CtxmtError(
            f"document structure differs: {paths[0]}:{da[2]} is doc {da[0]} but "
            f"{paths[1]}:{db[2]} is doc {db[0]}; both files must list the same documents "
            "in the same order"
        )
    tgt = {sid: (text, line) for sid, text, line in db[1]}
    src_ids = {sid for sid, _, _ in da[1]}
    for sid, _, line in da[1]:
        if sid not in tgt:
            raise CtxmtError(f"document structure differs: {paths[0]}:{line} has seg id {sid} "
                             f"of doc {da[0]} that {paths[1]} lacks; both sides need the same "
                             "seg ids")
    for sid, _, line in db[1]:
        if sid not in src_ids:
            raise CtxmtError(f"document structure differs: {paths[1]}:{line} has seg id {sid} "
                             f"of doc {db[0]} that {paths[0]} lacks; both sides need the same "
                             "seg ids")
    return ([t for _, t, _ in da[1]], [tgt[sid][0] for sid, _, _ in da[1]],
            [line for _, _, line in da[1]])


def xml_docs(paths: list[Path]) -> Iterator[LocatedDoc]:
    """Located documents of one XML file, or of two matched by docid and seg id."""
    if len(paths) == 1:
        for _, segs, _ in xml_side(paths[0], "source"):
            yield [(t,) for _, t, _ in segs], [line for _, _, line in segs]
        return
    ia, ib = xml_side(paths[0], "source"), xml_side(paths[1], "target")
    while True:
        da, db = next(ia, None), next(ib, None)
        if da is None and db is None:
            return
        if da is None or db is None:
            longer, d = (paths[0], da) if db is None else (paths[1], db)
            raise CtxmtError(f"document structure differs: {longer}:{d[2]} has doc {d[0]} "
                             "that the other side lacks; both files must hold the same documents")
        src, tgt, lines = _match_segs(paths, da, db)
        yield list(zip(src, tgt, strict=True)), lines
