"""Reading the text files ``ctxmt evaluate --hyp/--ref/--src/--docids`` scores: UTF-8 lines (stdin for ``-``),
documents separated by blank lines or given by a document-id file, and the checks that the files align line by
line with the reference, each a one-line error naming both files."""

from __future__ import annotations

from pathlib import Path

from ctxmt_cli.data.lines import misnamed_hint
from ctxmt_cli.decode.documents import file_lines
from ctxmt_cli.errors import CtxmtError, option
from ctxmt_cli.paths import check_input_file


def read_lines(path: Path, role: str) -> list[str]:
    """Lines of a UTF-8 text file (no line ends, BOM dropped), ``-``: stdin (``ctxmt translate ... | ctxmt
    evaluate --hyp - ...``); one-line errors for missing/non-UTF-8 files."""
    if str(path) == "-":
        import sys

        data = sys.stdin.buffer.read()
        path = "<stdin>"
    else:
        path = check_input_file(Path(path), f"{role} file", "check the path (use - for stdin)", dash=True)
        data = b"".join(file_lines(path))              # a .gz/.xz/.bz2 file is decompressed as it is read
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise CtxmtError(f"{role} {path}: not UTF-8 at byte offset {err.start} (line {line}); "
                         f"{misnamed_hint(path) or 'convert it, e.g. iconv -f LATIN1 -t UTF-8'}") from None
    # split on \n only: str.splitlines() also breaks at \x0c, \u2028 ... and would misalign the files
    lines = [line.rstrip("\r") for line in text.removeprefix("\ufeff").split("\n")]
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def blank_lines(lines: list[str]) -> list[int]:
    return [i for i, line in enumerate(lines) if not line.strip()]


def by_blank_lines(lines: list[str]) -> list[list[str]]:
    from ctxmt_cli.decode.documents import split_documents as split_at_blank_lines

    return split_at_blank_lines(lines)


def check_aligned(path: Path, lines: list[str], ref: Path, ref_lines: list[str], counts: tuple[int, int]) -> None:
    """Same line count and blank lines (document boundaries) at the same lines as the reference.

    ``lines`` have trailing blank lines stripped; ``counts`` are the files' real line counts, for messages.
    """
    if len(lines) != len(ref_lines) or blank_lines(lines) != blank_lines(ref_lines):
        n_docs, n_ref_docs = len(by_blank_lines(lines)), len(by_blank_lines(ref_lines))
        same_sentences = len(lines) - len(blank_lines(lines)) == len(ref_lines) - len(blank_lines(ref_lines))
        if n_docs != n_ref_docs and same_sentences:
            raise CtxmtError(f"different document counts: {path} has {_docs(n_docs)} but {ref} has "
                             f"{_docs(n_ref_docs)} (blank lines separate documents); put the blank lines at the "
                             f"same places in both files, or give {option('docids')} FILE")
        if len(lines) != len(ref_lines):
            raise CtxmtError(f"{path} has {counts[0]} lines but {ref} has {counts[1]}; the files "
                             "must be aligned line by line")
        first = min(set(blank_lines(lines)) ^ set(blank_lines(ref_lines))) + 1
        raise CtxmtError(f"line {first} is blank in only one of {path} and {ref}; blank lines separate "
                         f"documents and must be at the same lines (give {option('docids')} FILE if they are empty "
                         "outputs)")


def _docs(n: int) -> str:
    return f"{n} document" + ("" if n == 1 else "s")


def by_ids(lines: list[str], ids: list[str]) -> list[list[str]]:
    # a new document whenever the id changes between adjacent lines, as `ctxmt prepare` reads .docids
    docs: list[list[str]] = []
    for i, (line, doc_id) in enumerate(zip(lines, ids, strict=True)):
        if i == 0 or doc_id != ids[i - 1]:
            docs.append([])
        docs[-1].append(line)
    return docs


def strip_trailing_blanks(lines: list[str]) -> list[str]:
    # a trailing blank line separates no documents; dropping it spares a false "different counts" error
    end = len(lines)
    while end and not lines[end - 1].strip():
        end -= 1
    return lines[:end]
