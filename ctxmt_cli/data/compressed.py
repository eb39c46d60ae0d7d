"""Compressed corpus files: ``.gz``, ``.xz`` and ``.bz2`` read directly, as a stream.

The compression is recognised by the file's first bytes (its magic number), so a compressed file whose name
lacks the suffix reads too, and a plain file named ``.gz`` by mistake reads as plain text. A corpus named by a
prefix (``--train data/train`` with ``data/train.en.xz``) finds the compressed file when the plain one is
absent (:func:`resolve_input`). Decompression streams: memory does not grow with the file.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import zlib
from pathlib import Path
from typing import BinaryIO

#: suffixes tried, in this order, when ``PATH`` itself is absent
SUFFIXES = (".gz", ".xz", ".bz2")
_MAGIC = ((b"\x1f\x8b", "gzip", gzip.open), (b"\xfd7zXZ\x00", "xz", lzma.open), (b"BZh", "bzip2", bz2.open))
#: what a damaged compressed stream raises while it is read (gzip's BadGzipFile is an OSError)
DECOMPRESSION_ERRORS = (EOFError, OSError, lzma.LZMAError, zlib.error, ValueError)


def compression(path: Path | str) -> str | None:
    """``"gzip"``, ``"xz"`` or ``"bzip2"`` from the first bytes of ``path``; None for anything else."""
    with open(path, "rb") as f:
        head = f.read(6)
    return next((name for magic, name, _ in _MAGIC if head.startswith(magic)), None)


def open_binary(path: Path | str) -> BinaryIO:
    """``path`` opened for reading bytes, decompressed on the fly when it is gzip, xz or bzip2."""
    kind = compression(path)
    opener = next((op for _, name, op in _MAGIC if name == kind), open)
    return opener(path, "rb")


def resolve_input(path: Path | str) -> Path:
    """``path`` if it exists, else the first of ``path.gz``, ``path.xz``, ``path.bz2`` that does, else ``path``
    (so a missing file is reported under the name the user gave)."""
    path = Path(path)
    if path.exists():
        return path
    for suffix in SUFFIXES:
        candidate = path.with_name(path.name + suffix)
        if candidate.is_file():
            return candidate
    return path


#: the tool that tests (``-t``) a file of each compression
_TESTER = {"gzip": "gzip", "xz": "xz", "bzip2": "bzip2"}


def decompression_problem(path: Path | str, err: BaseException, line: int | None = None) -> str:
    """One line for a damaged or truncated compressed file (``err`` raised while reading it, at ``line`` of the
    decompressed text when known), with the test command of the file's own compression."""
    detail = " ".join(str(err).split()) or type(err).__name__
    where = f"{path}:{line}" if line is not None else f"{path}"
    try:
        tester = _TESTER.get(compression(path) or "", "")
    except OSError:
        tester = ""
    test = f" (test it with `{tester} -t {path}`)" if tester else ""
    return (f"{where}: cannot decompress ({detail}); the file is damaged or truncated: download or "
            f"compress it again{test}")
