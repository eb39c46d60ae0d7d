"""Reading a corpus file line by line: the layer every format reader of :mod:`.formats` stands on.

Lines are read in blocks from plain or compressed files (gzip, xz, bzip2: :mod:`.compressed`), decoded as UTF-8
and checked (no NUL, no invalid bytes); every problem is a :class:`~ctxmt_cli.errors.CtxmtError` naming the file
and line and how to fix it. The format readers (:mod:`.formats`, :mod:`.formats_xml`, :mod:`.formats_jsonl`) and
the contrastive test sets import from here, so no reader module imports another.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from ctxmt_cli.data.compressed import DECOMPRESSION_ERRORS, decompression_problem, open_binary
from ctxmt_cli.data.text_input import text_problem
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.paths import check_input_file

# A located document: one tuple of strings per sentence (one string per side) and
# the 1-based line number of each sentence in the first (source) file.
LocatedDoc = tuple[list[tuple[str, ...]], list[int]]

_ICONV_HINT = "convert it, e.g. `iconv -f LATIN1 -t UTF-8 {p} > {p}.utf8`"
_NUL_HINT = "is it UTF-16 or a binary file? convert it to UTF-8 text, e.g. `iconv -f UTF-16 -t UTF-8 {p} > {p}.utf8`"


def fail(path: Path | str, lineno: int | None, what: str, fix: str) -> CtxmtError:
    """Build the one-line error ``path:line: what; fix``."""
    where = f"{path}:{lineno}" if lineno is not None else f"{path}"
    return CtxmtError(f"{where}: {what}; {fix}")


def check_file(path: Path | str, role: str) -> Path:
    """Return ``path`` as a Path or raise a one-line error when it is not a readable file."""
    return check_input_file(Path(path), f"{role} file", "check the path (and the language suffixes)")


def read_lines(path: Path, role: str = "input") -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, text)`` with line endings removed, checking UTF-8 per line.

    A gzip, xz or bzip2 file is decompressed as it is read (:mod:`.compressed`); a damaged one is an error at
    the line where decompression failed."""
    return enumerate(read_texts(path, role), start=1)


def read_texts(path: Path, role: str = "input") -> Iterator[str]:
    """The lines of ``path`` as text, line endings removed, checked as :func:`read_lines` does.

    Lines are read and decoded a block (about 256 kB of whole lines) at a time, several times faster than line
    by line on a large corpus (and than a compressed stream's own ``readline``); a block that fails the check
    is decoded again line by line to name the line at fault."""
    path = check_file(path, role)
    lineno = 0

    def lines_done() -> int:                         # read when a decompression error names its line
        return lineno

    with open_binary(path) as f:
        for block in _line_blocks(f, path, lines_done):
            texts = _decoded_block(path, lineno, block)
            lineno += len(texts)
            yield from texts


_BLOCK_BYTES = 1 << 18


def _line_blocks(f, path: Path, lines_done) -> Iterator[bytes]:
    """Blocks of whole lines of the open file ``f`` (each ends in a newline, but the file's last line may not);
    a decompression error names the line after ``lines_done()``."""
    carry = b""
    while True:
        try:
            data = f.read(_BLOCK_BYTES)
        except DECOMPRESSION_ERRORS as e:
            raise CtxmtError(decompression_problem(path, e, lines_done() + 1)) from None
        if not data:
            if carry:
                yield carry
            return
        data = carry + data
        cut = data.rfind(b"\n") + 1
        carry = data[cut:]
        if cut:
            yield data[:cut]


def _decoded_block(path: Path, first: int, block: bytes) -> list[str]:
    """Lines ``first + 1 ...`` of ``path`` (``block``: whole lines, raw) as texts."""
    try:
        if b"\x00" in block:
            raise ValueError("a NUL byte")
        texts = block.decode("utf-8").split("\n")
    except ValueError:                   # UnicodeDecodeError included: find the line, word the error there
        raws = block.split(b"\n")
        raws = raws[:-1] if block.endswith(b"\n") else raws
        return [_decoded(path, first + k, raw) for k, raw in enumerate(raws, start=1)]
    if block.endswith(b"\n"):
        texts.pop()                      # the empty string after the last newline
    if first == 0 and texts and texts[0].startswith("\ufeff"):
        texts[0] = texts[0][1:]
    return [t.rstrip("\r") for t in texts]


def _decoded(path: Path, lineno: int, raw: bytes) -> str:
    """Line ``lineno`` of ``path`` as text without its line ending; not UTF-8, a NUL or a lone surrogate is an
    error at its line."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise fail(path, lineno, f"not valid UTF-8 (byte 0x{raw[e.start]:02x} at column {e.start + 1})",
                   misnamed_hint(path) or _ICONV_HINT.format(p=path)) from None
    if lineno == 1 and text.startswith("\ufeff"):
        text = text[1:]
    problem = text_problem(text)
    if problem is not None:
        raise fail(path, lineno, f"not text: {problem}", misnamed_hint(path) or _NUL_HINT.format(p=path))
    return text.rstrip("\r\n")


def misnamed_hint(path: Path | str) -> str | None:
    """The fix for a file named ``.gz``/``.xz``/``.bz2`` that does not start as such a file (so it was read as
    text, and is not text): an encoding hint (``iconv``) would point the wrong way; None for any other name."""
    kind = _NAMED_COMPRESSION.get(Path(path).suffix.lower())
    if kind is None:
        return None
    return (f"its name says {kind} but it does not start like a {kind} file: it is damaged (download it again) or "
            f"not compressed (rename it without {Path(path).suffix})")


_NAMED_COMPRESSION = {".gz": "gzip", ".xz": "xz", ".bz2": "bzip2"}


def count_lines(path: Path) -> int:
    """Number of lines in ``path`` (a last line without newline counts), read in chunks; compressed files
    are counted after decompression."""
    n, last = 0, b"\n"
    try:
        with open_binary(path) as f:
            while chunk := f.read(1 << 20):
                n += chunk.count(b"\n")
                last = chunk[-1:]
    except DECOMPRESSION_ERRORS as e:
        raise CtxmtError(decompression_problem(path, e, n + 1)) from None
    return n + (last != b"\n")
