"""Document files: one sentence per line, a blank line between documents; ``-`` = stdin/stdout.

Reading names the file and line of a non-UTF-8 byte; writing gives one output line per input
line (blank lines kept) and replaces files atomically.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.paths import check_input_file, check_output_file


def _decode_lines(stream: Iterable[bytes], name: str) -> Iterator[str]:
    """UTF-8 lines without line endings; a bad byte is a one-line error naming the file and line."""
    for lineno, raw in enumerate(stream, start=1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise CtxmtError(
                f"{name}:{lineno}: not valid UTF-8 (byte 0x{raw[e.start]:02x} at column {e.start + 1}); "
                f"convert it, e.g. iconv -f LATIN1 -t UTF-8"
            ) from None
        if lineno == 1 and text.startswith("\ufeff"):
            text = text[1:]
        yield text.rstrip("\r\n")


def split_documents(lines: Iterable[str]) -> list[list[str]]:
    """Group lines into documents at blank (or whitespace-only) lines, as ``ctxmt prepare`` does.

    Every blank line is one boundary, so consecutive blank lines give empty
    documents and writing the result back gives one line per input line.
    """
    docs: list[list[str]] = [[]]
    seen = False
    for line in lines:
        seen = True
        if line.strip():
            docs[-1].append(line)
        else:
            docs.append([])
    return docs if seen else []


def read_documents(path_or_dash: str | Path) -> list[list[str]]:
    """Documents of a text file (one sentence per line, a blank line between documents); ``-`` = stdin."""
    if str(path_or_dash) == "-":
        return split_documents(_decode_lines(sys.stdin.buffer, "<stdin>"))
    path = check_input_file(Path(path_or_dash), "input file", "check the path (use - for stdin)")
    with open(path, "rb") as f:
        return split_documents(_decode_lines(f, str(path)))


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
    text = format_documents(docs)
    if str(path_or_dash) == "-":
        sys.stdout.flush()
        buffer = getattr(sys.stdout, "buffer", None)
        if buffer is not None:                                             # UTF-8 whatever the locale says
            buffer.write(text.encode("utf-8"))
            buffer.flush()
        else:
            sys.stdout.write(text)
        return
    path = Path(path_or_dash)
    check_output_file(path, "--output")                               # again: the path may have changed meanwhile
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except BaseException as err:       # a full disk or an interrupt leaves neither half a file nor the temp
        tmp.unlink(missing_ok=True)
        if isinstance(err, OSError) and err.errno is not None:   # name the output, not the temp file
            raise OSError(err.errno, err.strerror, str(path)) from err
        raise
