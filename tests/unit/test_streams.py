"""First-pass streams: the chunked, resumable writer and the reader beside a prepared split."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from ctxmt_cli.data.store import PreparedData
from ctxmt_cli.data.streams import StreamWriter, check_stream_name
from ctxmt_cli.errors import CtxmtError

PLAN = {"split": "valid", "input": "src", "side": "tgt", "checkpoint": {"path": "x.pt"}}


@pytest.fixture
def data(prepared, tmp_path):
    """A private copy of the shared prepared directory (streams are written into it)."""
    return PreparedData(shutil.copytree(prepared, tmp_path / "data"))


def fake_translation(data, split="valid"):
    """Per document, (ids, text) of a stand-in translation: each target sentence reversed, as text and ids."""
    store, tok = data.split(split), data.tokenizer
    docs = []
    for a, b in store.documents():
        ids = [store.tgt(i).tolist()[::-1] for i in range(a, b)]
        docs.append((ids, [tok.decode_tgt(s) for s in ids]))
    return docs


def write(data, docs, *, chunk=3, plan=PLAN, force=False, stop_after=None):
    writer = StreamWriter(data.dir, "valid", "fp", data.meta["dtype"], plan)
    done = writer.start(force=force)
    for k, start in enumerate(range(done, len(docs), chunk)):
        if stop_after is not None and k == stop_after:
            return writer
        part = docs[start:start + chunk]
        writer.append([ids for ids, _ in part], [text for _, text in part])
    writer.finish({"side": "tgt", "language": "tgt"})
    return writer


def test_written_stream_reads_back_sentence_for_sentence(data):
    docs = fake_translation(data)
    write(data, docs)
    stream, store = data.stream("valid", "fp"), data.split("valid")
    assert stream.side == "tgt" and stream.n_sentences == store.n_sentences
    assert np.array_equal(stream.doc_offsets, store.doc_offsets)
    flat = [ids for doc_ids, _ in docs for ids in doc_ids]
    assert all(stream.sentence(i).tolist() == flat[i] for i in range(stream.n_sentences))
    assert stream.lengths.tolist() == [len(s) for s in flat]
    text = (data.dir / "valid.fp.stream.txt").read_text(encoding="utf-8").split("\n\n")
    assert [t.strip("\n").split("\n") for t in text] == [lines for _, lines in docs]
    assert data.streams("valid") == ["fp"] and data.streams("train") == []


def test_an_interrupted_stream_resumes_to_the_same_files(data, tmp_path):
    docs = fake_translation(data)
    write(data, docs)
    whole = {ext: (data.dir / f"valid.fp.stream.{ext}").read_bytes() for ext in ("bin", "idx", "txt")}
    writer = StreamWriter(data.dir, "valid", "fp", data.meta["dtype"], PLAN)
    writer.remove()
    write(data, docs, stop_after=2)                                         # two chunks, then a "crash" ...
    for ext in ("bin", "idx", "txt"):                                      # ... that left half-appended bytes
        with open(data.dir / f"valid.fp.stream.{ext}.partial", "ab") as f:
            f.write(b"\x07" * 5)
    assert StreamWriter(data.dir, "valid", "fp", data.meta["dtype"], PLAN).start(force=False) == 6
    write(data, docs)                                                       # resumes at document 6
    assert {ext: (data.dir / f"valid.fp.stream.{ext}").read_bytes() for ext in whole} == whole
    assert not list(data.dir.glob("*.partial*"))


def test_finished_or_foreign_streams_are_refused_without_force(data):
    docs = fake_translation(data)
    write(data, docs)
    with pytest.raises(CtxmtError, match="exists already.*`force`"):
        write(data, docs)
    writer = StreamWriter(data.dir, "valid", "fp", data.meta["dtype"], PLAN)
    assert writer.start(force=False, reuse=True) is None                    # same plan: nothing to do
    other = {**PLAN, "checkpoint": {"path": "y.pt"}}
    with pytest.raises(CtxmtError, match="other settings"):
        StreamWriter(data.dir, "valid", "fp", data.meta["dtype"], other).start(force=False, reuse=True)
    writer.remove()
    write(data, docs, plan=other, stop_after=1)                            # an unfinished stream of another plan
    with pytest.raises(CtxmtError, match="unfinished.*`force`"):
        StreamWriter(data.dir, "valid", "fp", data.meta["dtype"], PLAN).start(force=False)
    write(data, docs, force=True)
    assert data.stream("valid", "fp").info["plan"] == PLAN


def test_missing_or_mismatched_streams_are_one_line_errors(data):
    with pytest.raises(CtxmtError, match="no finished first-pass stream 'fp'.*ctxmt first-pass"):
        data.stream("valid", "fp")
    docs = fake_translation(data)
    write(data, docs[:-1])                                                  # a document short of the split
    with pytest.raises(CtxmtError, match="does not match the split"):
        data.stream("valid", "fp")
    for bad in ("a.b", "", "-x", "a b"):
        with pytest.raises(CtxmtError, match="`name`"):
            check_stream_name(bad)


class Full(OSError):
    """A full disk, raised by the stand-in writer below."""


def test_a_failure_before_any_recorded_document_leaves_no_partial_file(data, monkeypatch):
    docs = fake_translation(data)
    writer = StreamWriter(data.dir, "valid", "fp", data.meta["dtype"], PLAN)
    real = StreamWriter._save
    monkeypatch.setattr(StreamWriter, "_save", lambda self: (_ for _ in ()).throw(Full(28, "No space left")))
    with pytest.raises(OSError, match=f"No space left: '{data.dir}'"):     # the record of a fresh stream
        writer.start(force=False)
    assert not list(data.dir.glob("valid.fp.*"))
    monkeypatch.setattr(StreamWriter, "_save", real)
    writer.start(force=False)
    monkeypatch.setattr(StreamWriter, "_save", lambda self: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):                            # the first chunk: nothing to resume
        writer.append([ids for ids, _ in docs[:3]], [text for _, text in docs[:3]])
    assert not list(data.dir.glob("valid.fp.*"))


def test_a_failure_after_recorded_documents_keeps_the_stream_resumable(data, monkeypatch):
    docs = fake_translation(data)
    write(data, docs, stop_after=1)
    writer = StreamWriter(data.dir, "valid", "fp", data.meta["dtype"], PLAN)
    assert writer.start(force=False) == 3
    monkeypatch.setattr(StreamWriter, "_save", lambda self: (_ for _ in ()).throw(Full(28, "No space left")))
    with pytest.raises(OSError, match="No space left"):
        writer.append([ids for ids, _ in docs[3:6]], [text for _, text in docs[3:6]])
    assert StreamWriter(data.dir, "valid", "fp", data.meta["dtype"], PLAN).start(force=False) == 3


def test_a_stream_whose_record_cannot_be_written_is_not_finished(data, monkeypatch):
    import ctxmt_cli.data.streams as streams

    docs = fake_translation(data)
    writer = StreamWriter(data.dir, "valid", "fp", data.meta["dtype"], PLAN)
    writer.start(force=False)
    writer.append([ids for ids, _ in docs], [text for _, text in docs])     # every document, not finished
    monkeypatch.setattr(streams, "_write_json", lambda path, value: (_ for _ in ()).throw(Full(28, "No space")))
    with pytest.raises(Full):
        writer.finish({"side": "tgt", "language": "tgt"})
    monkeypatch.undo()
    assert writer.finished_info() is None and not list(data.dir.glob("valid.fp.stream.bin"))
    assert StreamWriter(data.dir, "valid", "fp", data.meta["dtype"], PLAN).start(force=False) == len(docs)
