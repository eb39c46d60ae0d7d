"""Streaming translation input: documents read as they arrive and batched as they are ready."""

import threading
import typing

import pytest

from ctxmt_cli.cli.options import InputFormat
from ctxmt_cli.decode.records import Document
from ctxmt_cli.decode.streaming import INPUT_FORMATS, read_input, ready_chunks
from ctxmt_cli.errors import CtxmtError


def test_a_list_is_cut_in_order():
    assert list(ready_chunks(list(range(7)), 3)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert list(ready_chunks([], 3)) == []


def test_a_slow_source_never_waits_for_a_full_chunk():
    seen = [threading.Event() for _ in range(3)]

    def source():                                   # item i+1 exists only once the consumer got item i
        for i in range(3):
            yield i
            assert seen[i].wait(timeout=30), "ready_chunks waited for more items than were ready"

    chunks = []
    for chunk in ready_chunks(source(), 8):
        chunks.append(chunk)
        for i in chunk:
            seen[i].set()
    assert chunks == [[0], [1], [2]]


def test_a_ready_source_fills_its_chunks_and_an_error_comes_after_the_items_read():
    def source():
        yield from range(5)
        raise CtxmtError("in.jsonl:6: not valid JSON")

    got = []
    with pytest.raises(CtxmtError, match="in.jsonl:6"):
        for chunk in ready_chunks(source(), 2):
            assert 1 <= len(chunk) <= 2
            got += chunk
    assert got == [0, 1, 2, 3, 4]


def test_input_files_are_read_before_any_translation(tmp_path):
    text = tmp_path / "in.txt"
    text.write_text("a .\nb .\n\nc .\n", encoding="utf-8")
    assert read_input(text) == [Document(["a .", "b ."]), Document(["c ."])]
    jsonl = tmp_path / "in.jsonl"
    jsonl.write_text('{"src": ["a ."]}\n{"src": ["b ."], "oops": 1}\n', encoding="utf-8")
    with pytest.raises(CtxmtError, match="in.jsonl:2: unknown field 'oops'"):
        read_input(jsonl, "jsonl")                                  # a file is checked whole, at once
    with pytest.raises(CtxmtError, match="text or jsonl"):
        read_input(text, "xml")
    assert typing.get_args(InputFormat) == INPUT_FORMATS             # the CLI's choices are the readers'
