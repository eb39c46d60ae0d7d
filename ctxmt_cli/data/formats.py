"""Streaming readers for the raw corpus formats that ``ctxmt prepare`` accepts.

Formats (publishers' layouts, read exactly as distributed):

- ``text``: one sentence per line, a blank line between documents; or, with a
  ``.docids`` file (one id per line, aligned with the sentences), a new document
  whenever the id changes between adjacent lines.
- ``jsonl``: ``{"doc_id", "src", "tgt"}`` per line; a new document when doc_id changes (see :mod:`.formats_jsonl`).
- ``iwslt-tags``: IWSLT ``train.tags.L1-L2.L``; tag lines (``<url>``, ``<talkid>`` ...)
  are skipped and each tag block that follows segments starts a new talk.
- ``iwslt-xml``: official ``<doc docid=...>`` / ``<seg id=N>`` XML (see :mod:`.formats_xml`).
- ``voita``: Voita et al.'s OpenSubtitles groups, sentences joined by `` _eos ``, one
  group (document) per line.
- ``maruf``: the document sets of Maruf, Martins and Haffari (2019) (IWSLT 2017 TED, News
  Commentary, Europarl; the ones Yang et al.'s HanoiT evaluates on): one sentence per line,
  parallel line by line, and a line holding only ``<d>`` before each document, the first
  included. The lockstep reader is the text format's with ``<d>`` for the blank line, stricter:
  a ``<d>`` on one side only, an empty sentence, an empty document or a missing first ``<d>``
  is an error at its line. (``iwslt-tags`` also skips ``<d>`` as a tag line, but it pairs whole
  talks side by side, so a misplaced ``<d>`` surfaces there as a talk-length mismatch.)

Readers stream: memory is bounded by one document. Every format reads gzip, xz and bzip2 files directly
(recognised by their first bytes, :mod:`.compressed`). Every user error is a
:class:`~ctxmt_cli.errors.CtxmtError` naming the file and line and how to fix it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import zip_longest
from pathlib import Path

from ctxmt_cli.data.lines import LocatedDoc, check_file, count_lines, fail, read_lines, read_texts
from ctxmt_cli.errors import CtxmtError

Document = list[tuple[str, str]]
FORMATS = ("text", "jsonl", "iwslt-tags", "iwslt-xml", "voita", "maruf")

_TAG_LINE = re.compile(r"^<[A-Za-z/]")
_EOS_SPLIT = re.compile(r"(?:^|\s)_eos(?=\s|$)")


def _zip_lines(paths: list[Path], roles: list[str]) -> Iterator[tuple[int, list[str]]]:
    """Read several line-aligned files in lockstep; differing line counts are an error."""
    streams = [read_texts(p, r) for p, r in zip(paths, roles, strict=True)]
    for lineno, items in enumerate(zip_longest(*streams), start=1):
        if None in items:
            counts = ", ".join(f"{p} has {count_lines(p)} lines" for p in paths)
            raise CtxmtError(
                f"line counts differ ({counts}); first unmatched line is {lineno}; "
                "the files must be line-aligned (one sentence per line on every side)"
            )
        yield lineno, items


def _empty_sentence(path: Path, lineno: int) -> CtxmtError:
    return fail(path, lineno, "empty sentence",
                "fill it in or remove the line from every side")


def _text_docs(paths: list[Path], docids: Path | None) -> Iterator[LocatedDoc]:
    if docids is None:
        return _marked_docs(paths, _BLANK)
    return _docid_docs(paths, docids)


def auto_docids_note(docids: Path) -> str:
    """What to add to an error that the ``.docids`` file beside the corpus caused: the user never named it."""
    return (f"{docids} was picked up automatically as the document ids of these files (PATH.docids beside "
            f"PATH.L1 and PATH.L2): fix it, or rename or move it to read documents from blank lines instead")


def _docid_docs(paths: list[Path], docids: Path) -> Iterator[LocatedDoc]:
    """Documents of line-aligned files whose ``docids`` file gives each line's document id; an error the ids
    cause (their count, an empty id, bytes that are not UTF-8, a blank sentence line meant as a break) says where
    they came from."""
    roles = ["source", "target"][: len(paths)] + ["docids"]
    sents: list[tuple[str, ...]] = []
    lines: list[int] = []
    prev_id: str | None = None
    try:
        for lineno, vals in _zip_lines([*paths, docids], roles):
            texts = [v.strip() for v in vals[: len(paths)]]
            doc_id = vals[-1].strip()
            if not doc_id:
                raise fail(docids, lineno, "empty document id", "give every line a document id")
            if sents and doc_id != prev_id:      # adjacent lines compared: an id that comes back starts anew
                yield sents, lines
                sents, lines = [], []
            prev_id = doc_id
            for p, t in zip(paths, texts, strict=True):
                if not t:                      # most likely a document break of a corpus that has none here
                    raise fail(p, lineno, f"empty sentence (blank lines do not separate documents when {docids} "
                               "gives the documents)", "fill it in or remove the line from every side and the ids")
            sents.append(tuple(texts))
            lines.append(lineno)
    except CtxmtError as err:
        if str(docids) not in str(err):
            raise
        raise CtxmtError(f"{err} ({auto_docids_note(docids)})") from None
    if sents:
        yield sents, lines


@dataclass(frozen=True)
class _Mark:
    """A line that separates documents in a line-aligned format, at the same line on every side.

    ``strict`` (Maruf et al. 2019's ``<d>``): the first line must be one, every mark opens a non-empty
    document and a blank line is an empty sentence; otherwise (the text format's blank lines) repeated
    marks are one break and nothing is required at the top.
    """

    line: str            # the mark, after strip()
    name: str            # how messages call it
    strict: bool


_BLANK = _Mark("", "a blank line (document break)", strict=False)
MARUF_MARK = _Mark("<d>", "a <d> line (document start)", strict=True)


def _marked_docs(paths: list[Path], mark: _Mark) -> Iterator[LocatedDoc]:
    """Documents of line-aligned files (one side or two) whose document boundaries are ``mark`` lines."""
    sents: list[tuple[str, ...]] = []
    lines: list[int] = []
    opened: int | None = None      # line of the mark that opened the current document
    for lineno, vals in _zip_lines(paths, ["source", "target"][: len(paths)]):
        texts = [v.strip() for v in vals]
        marks = [t == mark.line for t in texts]
        if any(marks) and not all(marks):
            raise _one_sided_mark(paths, marks, lineno, mark)
        if all(marks):
            if mark.strict and opened is not None and not sents:
                raise _empty_document(paths[0], opened, mark)
            if sents:
                yield sents, lines
            sents, lines, opened = [], [], lineno
            continue
        if mark.strict:
            if opened is None:
                raise fail(paths[0], lineno, f"the file does not start with {mark.name}",
                           f"put a line holding only {mark.line} before each document, the first included, "
                           "on both sides (or read files without these lines with `ctxmt prepare text`)")
            for p, t in zip(paths, texts, strict=True):
                if not t:
                    raise _empty_sentence(p, lineno)
        sents.append(tuple(texts))
        lines.append(lineno)
    if mark.strict and opened is not None and not sents:
        raise _empty_document(paths[0], opened, mark)
    if sents:
        yield sents, lines


def _one_sided_mark(paths: list[Path], marks: list[bool], lineno: int, mark: _Mark) -> CtxmtError:
    has, lacks = paths[marks.index(True)], paths[marks.index(False)]
    return CtxmtError(
        f"document structure differs at line {lineno}: {has} has {mark.name} but {lacks} has a sentence; "
        f"put the {'blank lines between documents' if not mark.line else mark.line + ' lines'} at the same "
        "lines on both sides"
    )


def _empty_document(path: Path, lineno: int, mark: _Mark) -> CtxmtError:
    return fail(path, lineno, f"empty document ({mark.name} with no sentence after it)",
                f"remove this {mark.line} line from both sides")


def _split_group(path: Path, lineno: int, line: str) -> list[str]:
    if not line.strip():
        raise fail(path, lineno, "empty group (document)",
                   "remove the line from both sides or fill it in")
    parts = [s.strip() for s in _EOS_SPLIT.split(line)]
    if not all(parts):
        raise fail(path, lineno, "empty sentence in a ` _eos `-joined group",
                   "remove the stray ` _eos ` separator")
    return parts


def _voita_docs(paths: list[Path]) -> Iterator[LocatedDoc]:
    roles = ["source", "target"][: len(paths)]
    for lineno, vals in _zip_lines(paths, roles):
        groups = [_split_group(p, lineno, v) for p, v in zip(paths, vals, strict=True)]
        if len({len(g) for g in groups}) > 1:
            detail = " but ".join(f"{p} has {len(g)}" for p, g in zip(paths, groups, strict=True))
            raise CtxmtError(
                f"document structure differs at line {lineno}: {detail} sentences; "
                "both sides of a group need the same number of ` _eos `-joined sentences"
            )
        yield list(zip(*groups, strict=True)), [lineno] * len(groups[0])


def _tags_side(path: Path, role: str) -> Iterator[tuple[list[str], list[int], int]]:
    """One IWSLT train.tags side: ``(segments, their lines, first line of the talk)``."""
    segs: list[str] = []
    lines: list[int] = []
    start: int | None = None  # line of the talk's first tag (its <url>) or first segment
    for lineno, line in read_lines(path, role):
        s = line.strip()
        if _TAG_LINE.match(s):
            if segs:
                yield segs, lines, start
                segs, lines, start = [], [], None
            start = lineno if start is None else start
            continue
        if not s:
            raise _empty_sentence(path, lineno)
        start = lineno if start is None else start
        segs.append(s)
        lines.append(lineno)
    if segs:
        yield segs, lines, start


def _tags_docs(paths: list[Path]) -> Iterator[LocatedDoc]:
    if len(paths) == 1:
        for segs, lines, _ in _tags_side(paths[0], "source"):
            yield [(s,) for s in segs], lines
        return
    yield from pair_side_docs(
        paths, _tags_side(paths[0], "source"), _tags_side(paths[1], "target"), "talk"
    )


def pair_side_docs(
    paths: list[Path],
    a: Iterable[tuple[list[str], list[int], int]],
    b: Iterable[tuple[list[str], list[int], int]],
    unit: str,
) -> Iterator[LocatedDoc]:
    """Zip two per-side document streams; their sentence counts must match."""
    ia, ib = iter(a), iter(b)
    while True:
        da, db = next(ia, None), next(ib, None)
        if da is None and db is None:
            return
        if da is None or db is None:
            longer, d = (paths[0], da) if db is None else (paths[1], db)
            shorter = paths[1] if db is None else paths[0]
            raise CtxmtError(
                f"document structure differs: {longer} has an extra {unit} starting at "
                f"line {d[2]} that {shorter} lacks; both files must hold the same {unit}s"
            )
        if len(da[0]) != len(db[0]):
            k = min(len(da[0]), len(db[0]))
            where = [d[1][k] if k < len(d[1]) else d[1][-1] + 1 for d in (da, db)]
            raise CtxmtError(
                f"document structure differs: the {unit} at {paths[0]}:{da[2]} has "
                f"{len(da[0])} segments but the one at {paths[1]}:{db[2]} has {len(db[0])} "
                f"(first divergence at {paths[0]}:{where[0]} / {paths[1]}:{where[1]}); "
                "the segment lines of the two sides must align"
            )
        yield list(zip(da[0], db[0], strict=True)), da[1]


def _located(fmt: str, paths: list[Path], docids: Path | None,
             sides: int) -> Iterator[LocatedDoc]:
    if fmt not in FORMATS:
        raise CtxmtError(f"unknown corpus format {fmt!r}; use one of {', '.join(FORMATS)}")
    if docids is not None and fmt != "text":
        raise CtxmtError(f"a .docids file only applies to the text format, not {fmt!r}; "
                         "remove it or use the text format")
    for p, role in zip(paths, ["source", "target"], strict=False):
        check_file(p, role)
    if docids is not None:
        check_file(docids, "docids")
    if fmt == "text":
        return _text_docs(paths, docids)
    if fmt == "voita":
        return _voita_docs(paths)
    if fmt == "maruf":
        return _marked_docs(paths, MARUF_MARK)
    if fmt == "iwslt-tags":
        return _tags_docs(paths)
    if fmt == "iwslt-xml":
        from ctxmt_cli.data.formats_xml import xml_docs

        return xml_docs(paths)
    from ctxmt_cli.data.formats_jsonl import jsonl_docs

    return jsonl_docs(paths[0], ("src", "tgt")[:sides])


def _jsonl_single(fmt: str, src_path: Path, tgt_path: Path) -> None:
    if fmt == "jsonl" and Path(src_path).resolve() != Path(tgt_path).resolve():
        raise CtxmtError(f"jsonl holds both sides in one file, but got {src_path} and "
                         f"{tgt_path}; pass the same file for both")


def iter_parallel_located(
    fmt: str, src_path: Path, tgt_path: Path, docids_path: Path | None = None
) -> Iterator[tuple[Document, list[int]]]:
    """Like :func:`iter_parallel_documents` plus the source line number of each sentence."""
    _jsonl_single(fmt, src_path, tgt_path)
    paths = [Path(src_path)] if fmt == "jsonl" else [Path(src_path), Path(tgt_path)]
    docids = Path(docids_path) if docids_path is not None else None
    for sents, lines in _located(fmt, paths, docids, 2):
        yield [(s[0], s[1]) for s in sents], lines


def iter_parallel_documents(
    fmt: str, src_path: Path, tgt_path: Path, docids_path: Path | None = None
) -> Iterator[Document]:
    """Stream parallel documents (lists of ``(src, tgt)`` sentence pairs) from a corpus.

    For ``jsonl`` both sides come from one file: pass it as ``src_path`` and ``tgt_path``.
    """
    for doc, _ in iter_parallel_located(fmt, src_path, tgt_path, docids_path):
        yield doc


def iter_source_documents(
    fmt: str, path: Path, docids_path: Path | None = None
) -> Iterator[list[str]]:
    """Stream source-only documents (lists of sentences), e.g. for ``ctxmt translate``."""
    docids = Path(docids_path) if docids_path is not None else None
    for sents, _ in _located(fmt, [Path(path)], docids, 1):
        yield [s[0] for s in sents]
