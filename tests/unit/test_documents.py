"""Document files: blank lines between documents, one output line per input line, ``-``, bad bytes."""

import io
import sys

import pytest
from hypothesis import given

from ctxmt_cli.decode.documents import format_documents, read_documents, write_documents
from ctxmt_cli.errors import CtxmtError
from tests.hostile_inputs import text_files


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


def test_documents_stream_one_at_a_time():
    from ctxmt_cli.decode.documents import split_documents, stream_documents

    read = []

    def lines():
        for line in ["a", "b", "", "c", "", "", "d"]:
            read.append(line)
            yield line

    stream = stream_documents(lines())
    assert next(stream) == ["a", "b"] and read == ["a", "b", ""]            # yielded at its blank line
    assert list(stream) == [["c"], [], ["d"]]
    assert split_documents(["a", "b", "", "c", "", "", "d"]) == [["a", "b"], ["c"], [], ["d"]]
    assert list(stream_documents([])) == [] and list(stream_documents([""])) == [[], []]


def test_document_writer_replaces_the_file_only_when_done(tmp_path):
    from ctxmt_cli.decode.documents import DocumentWriter

    path = tmp_path / "out.txt"
    path.write_text("old\n")
    with pytest.raises(RuntimeError):
        with DocumentWriter(path) as out:
            out.write("new 1\n")
            raise RuntimeError("interrupted")
    assert path.read_text() == "old\n" and sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]
    with DocumentWriter(path) as out:
        out.write("new 1\n")
        temp = next(p for p in tmp_path.iterdir() if p.name != "out.txt")
        assert temp.read_text() == "new 1\n" and path.read_text() == "old\n"   # flushed, not yet in place
        out.write("new 2\n")
    assert path.read_text() == "new 1\nnew 2\n" and not temp.exists()


# ---- property: a hostile text file reads, or is refused in one line, unchanged --------------------------------------
@given(text_files())
def test_any_text_file_reads_or_is_refused_in_one_line(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("d") / "in.txt"
    path.write_bytes(data)
    try:
        docs = read_documents(path)
    except CtxmtError as err:
        assert "\n" not in str(err)
    else:
        assert sum(len(d) for d in docs) + len(docs) - 1 <= data.count(b"\n") + data.count(b"\r") + 1
    assert path.read_bytes() == data
