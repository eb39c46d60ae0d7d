"""Document files: one sentence per line, a blank line between documents; ``-`` = stdin/stdout.

Reading names the file and line of a non-UTF-8 byte; writing gives one output line per input
line (blank lines kept) and replaces files atomically. Both also work one document at a time
(:func:`stream_documents`, :class:`DocumentWriter`), so a translation streams: each document is
read as soon as the blank line after it arrives and written (and flushed) as soon as it is done.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO

from ctxmt_cli.data.compressed import DECOMPRESSION_ERRORS, compression, decompression_problem, open_binary
from ctxmt_cli.data.lines import misnamed_hint
from ctxmt_cli.data.text_input import text_problem
from ctxmt_cli.errors import CtxmtError, option
from ctxmt_cli.outputs import remove_stale, temp_name
from ctxmt_cli.paths import check_input_file, check_output_file


def _decode_lines(stream: Iterable[bytes], name: str) -> Iterator[str]:
    """UTF-8 lines without line endings; a bad byte is a one-line error naming the file and line."""
    for lineno, raw in enumerate(stream, start=1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise CtxmtError(
                f"{name}:{lineno}: not valid UTF-8 (byte 0x{raw[e.start]:02x} at column {e.start + 1}); "
                f"{misnamed_hint(name) or 'convert it, e.g. iconv -f LATIN1 -t UTF-8'}"
            ) from None
        if lineno == 1 and text.startswith("\ufeff"):
            text = text[1:]
        problem = text_problem(text)
        if problem is not None:
            fix = misnamed_hint(name) or "is it UTF-16 or a binary file? convert it to UTF-8 text, e.g. iconv -f " \
                "UTF-16 -t UTF-8"
            raise CtxmtError(f"{name}:{lineno}: not text: {problem}; {fix}")
        yield text.rstrip("\r\n")


def stream_documents(lines: Iterable[str]) -> Iterator[list[str]]:
    """Documents of ``lines``, each as soon as the blank line after it (or the end) is read; what
    :func:`split_documents` gives, one at a time."""
    doc: list[str] = []
    seen = False
    for line in lines:
        seen = True
        if line.strip():
            doc.append(line)
        else:
            yield doc
            doc = []
    if seen:
        yield doc


def split_documents(lines: Iterable[str]) -> list[list[str]]:
    """Group lines into documents at blank (or whitespace-only) lines, as ``ctxmt prepare`` does.

    Every blank line is one boundary, so consecutive blank lines give empty
    documents and writing the result back gives one line per input line.
    """
    return list(stream_documents(lines))


def input_lines(path_or_dash: str | Path) -> Iterator[str]:
    """The lines of a text file (``-``: stdin, read as they arrive), UTF-8 checked line by line."""
    if str(path_or_dash) == "-":
        yield from _decode_lines(sys.stdin.buffer, "<stdin>")
        return
    path = check_input_file(Path(path_or_dash), "input file", "check the path (use - for stdin)", dash=True)
    yield from _decode_lines(file_lines(path), str(path))


def file_lines(path: Path) -> Iterator[bytes]:
    """The raw lines of a file, decompressed as they are read when it is gzip, xz or bzip2 (told by its first
    bytes, as ``ctxmt prepare`` reads corpora); a damaged compressed stream is one line naming the file and line."""
    with open_binary(path) as f:
        if compression(path) is None:
            yield from f
            return
        lines = iter(f)
        lineno = 0
        while True:
            try:
                raw = next(lines)
            except StopIteration:
                return
            except DECOMPRESSION_ERRORS as err:
                raise CtxmtError(decompression_problem(path, err, lineno + 1)) from None
            lineno += 1
            yield raw


def read_documents(path_or_dash: str | Path) -> list[list[str]]:
    """Documents of a text file (one sentence per line, a blank line between documents); ``-`` = stdin."""
    return split_documents(input_lines(path_or_dash))


def format_documents(docs: Sequence[Sequence[str]]) -> str:
    """Text of ``docs``: one line per sentence, one blank line between documents."""
    parts: list[str] = []
    for i, doc in enumerate(docs):
        if i:
            parts.append("\n")
        # a stray newline inside a translation would shift every later line
        parts.extend(" ".join(line.splitlines()) + "\n" for line in doc)
    return "".join(parts)


def write_documents(docs: Sequence[Sequence[str]], path_or_dash: str | Path) -> None:
    """Write ``docs`` like :func:`read_documents` reads them; ``-`` = stdout. Files are replaced atomically."""
    with DocumentWriter(path_or_dash) as out:
        out.write(format_documents(docs))


class DocumentWriter:
    """Text written piece by piece, each piece flushed at once: to stdout (``-``, UTF-8 whatever the locale
    says), or to a file that replaces ``path`` atomically when the writer closes without an error (a failure
    or an interrupt leaves neither half a file nor the temporary one)."""

    def __init__(self, path_or_dash: str | Path):
        self.path = None if str(path_or_dash) == "-" else Path(path_or_dash)
        self.tmp: Path | None = None
        self.file: IO[bytes] | None = None

    def __enter__(self) -> DocumentWriter:
        if self.path is not None:
            check_output_file(self.path, option("output"), force=None)   # again: the path may have changed
            self._named(lambda: remove_stale(self.path.parent))            # what a killed run left here
            self.tmp = temp_name(self.path)
            self.file = self._named(lambda: open(self.tmp, "wb"))
        return self

    def write(self, text: str) -> None:
        """Write ``text`` and flush it."""
        if self.file is not None:
            self._named(lambda: (self.file.write(text.encode("utf-8")), self.file.flush()))
            return
        sys.stdout.flush()
        buffer = getattr(sys.stdout, "buffer", None)
        if buffer is not None:
            buffer.write(text.encode("utf-8"))
            buffer.flush()
        else:
            sys.stdout.write(text)
            sys.stdout.flush()

    def __exit__(self, kind, *exc) -> None:
        if self.file is None:
            return
        try:
            try:
                if kind is None:                          # the bytes on disk before the rename shows them
                    self._named(lambda: (self.file.flush(), os.fsync(self.file.fileno())))
            finally:
                self._named(self.file.close)
            if kind is None:
                self._named(lambda: os.replace(self.tmp, self.path))
        finally:
            if self.tmp.exists():
                self.tmp.unlink(missing_ok=True)

    def _named(self, action):
        """Run ``action``; an OS error names the output, not the temporary file."""
        try:
            return action()
        except OSError as err:
            if err.errno is not None:
                raise OSError(err.errno, err.strerror, str(self.path)) from err
            raise
