"""Compressed corpus files (.gz, .xz, .bz2) read directly by every reader, errors still naming file:line."""

from __future__ import annotations

import bz2
import gzip
import lzma
import shutil
from pathlib import Path

import pytest

from ctxmt_cli.data.compressed import compression, open_binary, resolve_input
from ctxmt_cli.data.formats import iter_parallel_located
from ctxmt_cli.data.lines import count_lines, read_lines
from ctxmt_cli.data.prepare import resolve_split_input
from ctxmt_cli.errors import CtxmtError

FIX = Path(__file__).parents[1] / "fixtures" / "corpora"
OPENERS = {".gz": gzip.open, ".xz": lzma.open, ".bz2": bz2.open}


def compress(src: Path, dst: Path) -> Path:
    """``src`` compressed into ``dst`` by its suffix."""
    with open(src, "rb") as f, OPENERS[dst.suffix](dst, "wb") as g:
        shutil.copyfileobj(f, g)
    return dst


@pytest.mark.parametrize("suffix", list(OPENERS))
def test_every_compression_reads_as_the_plain_file(tmp_path, suffix):
    plain = FIX / "text/news.en"
    packed = compress(plain, tmp_path / f"news.en{suffix}")
    assert compression(packed) == {".gz": "gzip", ".xz": "xz", ".bz2": "bzip2"}[suffix]
    assert list(read_lines(packed)) == list(read_lines(plain))
    assert count_lines(packed) == count_lines(plain)


def test_magic_bytes_not_the_name_decide(tmp_path):
    misnamed = compress(FIX / "text/news.en", tmp_path / "news.en.xz").rename(tmp_path / "news.en")
    assert list(read_lines(misnamed)) == list(read_lines(FIX / "text/news.en"))
    plain_named_gz = tmp_path / "plain.gz"
    plain_named_gz.write_text("hello\n")
    assert compression(plain_named_gz) is None and list(read_lines(plain_named_gz)) == [(1, "hello")]
    with open_binary(plain_named_gz) as f:
        assert f.read() == b"hello\n"


def test_prefix_finds_compressed_files_and_docids(tmp_path):
    texts = {"en": "one\ntwo\nthree\n", "de": "eins\nzwei\ndrei\n"}
    for lang, text in texts.items():
        with gzip.open(tmp_path / f"train.{lang}.gz", "wt") as f:
            f.write(text)
    with bz2.open(tmp_path / "train.docids.bz2", "wt") as f:
        f.write("a\na\nb\n")
    assert resolve_input(tmp_path / "train.en") == tmp_path / "train.en.gz"
    assert resolve_input(tmp_path / "none.en") == tmp_path / "none.en"          # missing: named as given
    split = resolve_split_input("text", tmp_path / "train", "en", "de")
    assert split.docids == tmp_path / "train.docids.bz2"
    got = list(iter_parallel_located("text", split.src, split.tgt, split.docids))
    assert got == [([("one", "eins"), ("two", "zwei")], [1, 2]), ([("three", "drei")], [3])]


def test_errors_in_compressed_files_name_the_line(tmp_path):
    bad = tmp_path / "bad.en.gz"
    with gzip.open(bad, "wb") as f:
        f.write(b"fine\nstill fine\n\xff broken\n")
    with pytest.raises(CtxmtError, match=r"bad\.en\.gz:3: not valid UTF-8"):
        list(read_lines(bad))


def test_truncated_archive_is_one_line_with_its_place(tmp_path):
    whole = compress(FIX / "text/news.en", tmp_path / "whole.en.xz").read_bytes()
    cut = tmp_path / "cut.en.xz"
    cut.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(CtxmtError, match=r"cut\.en\.xz:\d+: cannot decompress .*damaged or truncated") as err:
        list(read_lines(cut))
    assert "\n" not in str(err.value)
    with pytest.raises(CtxmtError, match="cannot decompress"):
        count_lines(cut)


@pytest.mark.parametrize("suffix,tool", [(".gz", "gzip"), (".xz", "xz"), (".bz2", "bzip2")])
def test_a_damaged_archive_is_tested_with_its_own_tool_on_its_own_name(tmp_path, suffix, tool):
    """The hint names the file's compression and the file, never ``xz -t c.en.gz:1``."""
    whole = compress(FIX / "text/news.en", tmp_path / f"whole{suffix}").read_bytes()
    cut = tmp_path / f"c.en{suffix}"
    cut.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(CtxmtError) as err:
        list(read_lines(cut))
    assert f"`{tool} -t {cut}`)" in str(err.value) and f"{cut}:" in str(err.value)


@pytest.mark.parametrize("suffix", [".gz", ".xz", ".bz2"])
def test_a_file_named_compressed_that_is_not_gets_no_encoding_hint(tmp_path, suffix):
    fake = tmp_path / f"c.en{suffix}"
    fake.write_bytes(b"\x00\x9a\xff garbage")
    with pytest.raises(CtxmtError) as err:
        list(read_lines(fake))
    assert "iconv" not in str(err.value) and "does not start like a" in str(err.value)


@pytest.mark.parametrize("suffix", list(OPENERS))
def test_translate_and_evaluate_inputs_read_compressed_files(tmp_path, suffix):
    from ctxmt_cli.decode.documents import read_documents
    from ctxmt_cli.evaluate.text_files import read_lines as evaluate_lines

    plain = tmp_path / "doc.txt"
    plain.write_text("Hello there.\n\nAnother one.\n")
    packed = compress(plain, tmp_path / f"doc.txt{suffix}")
    assert read_documents(packed) == read_documents(plain) == [["Hello there."], ["Another one."]]
    assert evaluate_lines(packed, "hyp") == evaluate_lines(plain, "hyp")
    cut = tmp_path / f"cut{suffix}"
    cut.write_bytes(packed.read_bytes()[:-12])
    with pytest.raises(CtxmtError, match=r"cut\.\w+:\d+: cannot decompress"):
        read_documents(cut)
