"""Document files: blank lines between documents, one output line per input line, ``-``, bad bytes."""

import io
import sys

import pytest

from ctxmt_cli.decode.documents import format_documents, read_documents, write_documents
from ctxmt_cli.errors import CtxmtError


def test_read_write_round_trip_with_blank_lines_and_dash(tmp_path, monkeypatch, capsys):
    text = "a b\nc\n\nd\n\n\ne f\n  \ng\n"
    path = tmp_path / "in.txt"
    path.write_bytes(text.encode("utf-8"))
    docs = read_documents(path)
    assert docs == [["a b", "c"], ["d"], [], ["e f"], ["g"]]
    assert format_documents(docs).count("\n") == text.count("\n")
    write_documents(docs, tmp_path / "out.txt")
    assert (tmp_path / "out.txt").read_text(encoding="utf-8") == text.replace("  \n", "\n")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode("utf-8"))))
    assert read_documents("-") == docs
    write_documents([["x ü"], ["y"]], "-")
    assert capsys.readouterr().out == "x ü\n\ny\n"
    assert read_documents(tmp_path / "out.txt") == docs
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    assert read_documents(empty) == []


def test_bad_input_files_are_one_line_errors(tmp_path):
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("ok\nd\xe9j\xe0 vu\n".encode("latin-1"))
    with pytest.raises(CtxmtError, match=r"latin1\.txt:2: not valid UTF-8"):
        read_documents(bad)
    with pytest.raises(CtxmtError, match="not found"):
        read_documents(tmp_path / "missing.txt")
