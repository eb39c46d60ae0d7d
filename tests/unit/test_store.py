"""The memory-mapped prepared store: writer/reader round trip, offsets, dtype, errors."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from ctxmt_cli.data.store import PreparedData, SplitArrays, SplitWriter, choose_dtype, write_meta
from ctxmt_cli.errors import CtxmtError


def random_docs(rng: np.random.Generator, n_docs: int, high: int):
    docs = []
    for _ in range(n_docs):
        docs.append([(rng.integers(0, high, rng.integers(0, 9)).tolist(),
                      rng.integers(0, high, rng.integers(1, 9)).tolist())
                     for _ in range(rng.integers(1, 5))])
    return docs


def minimal_meta(dtype: str, splits: dict) -> dict:
    return {"format_version": 1, "src_lang": "en", "tgt_lang": "de", "dtype": dtype,
            "splits": splits, "spm": {"src": "spm.model", "tgt": "spm.model"}, "moses": False,
            "vocab_size": {"src": 100, "tgt": 100}}


def test_choose_dtype():
    assert choose_dtype(8000) == "uint16"
    assert choose_dtype(65535) == "uint16"
    assert choose_dtype(65536) == "int32"


@pytest.mark.parametrize("dtype,high", [("uint16", 65535), ("int32", 200_000)])
def test_round_trip(tmp_path, dtype, high):
    docs = random_docs(np.random.default_rng(0), 40, high)
    # a tiny flush threshold exercises the buffered writes
    with SplitWriter(tmp_path, "train", dtype, flush_tokens=7) as w:
        for doc in docs:
            w.add_document(doc)
    counts = w.close()
    pairs = [p for d in docs for p in d]
    assert counts == {"sentences": len(pairs), "documents": len(docs),
                      "src_tokens": sum(len(s) for s, _ in pairs),
                      "tgt_tokens": sum(len(t) for _, t in pairs)}
    s = SplitArrays(tmp_path, "train", dtype)
    assert s.src_data.dtype == np.dtype(dtype)
    assert (tmp_path / "train.src.bin").stat().st_size == counts["src_tokens"] * s.src_data.itemsize
    assert len(s.src_offsets) == len(pairs) + 1 and s.src_offsets.dtype == np.int64
    assert (s.n_sentences, s.n_documents) == (len(pairs), len(docs))
    for i, (src, tgt) in enumerate(pairs):
        assert s.src(i).tolist() == src and s.tgt(i).tolist() == tgt
    assert s.src_lengths.tolist() == [len(a) for a, _ in pairs]
    assert s.tgt_lengths.tolist() == [len(b) for _, b in pairs]
    starts = np.cumsum([0] + [len(d) for d in docs])
    assert s.doc_offsets.tolist() == starts.tolist()
    assert list(s.documents()) == list(zip(starts[:-1].tolist(), starts[1:].tolist(), strict=True))
    expected_index = [k for k, d in enumerate(docs) for _ in d]
    assert s.doc_index.tolist() == expected_index and s.doc_index.dtype == np.int64


def test_uint16_rejects_out_of_range_ids(tmp_path):
    with pytest.raises(OverflowError), SplitWriter(tmp_path, "train", "uint16") as w:
        w.add_document([([70000], [1])])


def test_empty_split(tmp_path):
    SplitWriter(tmp_path, "valid", "uint16").close()
    s = SplitArrays(tmp_path, "valid", "uint16")
    assert s.n_sentences == 0 and s.n_documents == 0 and list(s.documents()) == []


def test_prepared_data_splits_and_errors(tmp_path):
    with SplitWriter(tmp_path, "train", "uint16") as w:
        w.add_document([([5, 6], [7])])
    write_meta(tmp_path, minimal_meta("uint16", {"train": w.close()}))
    data = PreparedData(tmp_path)
    assert data.splits == ["train"]
    assert data.split("train").src(0).tolist() == [5, 6]
    assert data.split("train") is data.split("train")
    with pytest.raises(CtxmtError, match=r"split 'test' is not in .*available: train"):
        data.split("test")
    with pytest.raises(CtxmtError, match="not a prepared dataset"):
        PreparedData(tmp_path / "nothing")
    meta = json.loads((tmp_path / "meta.json").read_text())
    meta["format_version"] = 99
    write_meta(tmp_path, meta)
    with pytest.raises(CtxmtError, match="format_version 99"):
        PreparedData(tmp_path)


def test_inconsistent_files_are_detected(tmp_path):
    with SplitWriter(tmp_path, "train", "uint16") as w:
        w.add_document([([5, 6], [7]), ([8], [9])])
    with open(tmp_path / "train.src.bin", "ab") as f:
        f.write(b"\0\0")
    with pytest.raises(CtxmtError, match=r"train\.src\.idx: its last offset is 3, but train\.src\.bin holds 4 tokens"):
        SplitArrays(tmp_path, "train", "uint16")


def test_open_is_fast_for_millions(tmp_path):
    n = 2_000_000
    lengths = np.full(n, 3, dtype=np.int64)
    np.zeros(3 * n, dtype=np.uint16).tofile(tmp_path / "big.src.bin")
    np.zeros(3 * n, dtype=np.uint16).tofile(tmp_path / "big.tgt.bin")
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    offsets.tofile(tmp_path / "big.src.idx")
    offsets.tofile(tmp_path / "big.tgt.idx")
    np.arange(0, n + 1, 10, dtype=np.int64).tofile(tmp_path / "big.docs")
    times = []
    for _ in range(3):          # the best of three: opening reads the .idx/.docs files once (their checks)
        t0 = time.perf_counter()
        s = SplitArrays(tmp_path, "big", "uint16", vocab={"src": 8, "tgt": 8})
        times.append(time.perf_counter() - t0)
    opened = min(times)
    assert opened < 0.5, f"opening took {opened:.2f}s"
    assert s.n_sentences == n and s.n_documents == n // 10
    assert isinstance(s.src_data, np.memmap)
    assert s.src(n - 1).tolist() == [0, 0, 0]


def _split(tmp_path, docs=((([5, 6], [7]), ([8], [9])), (([10], [11, 12]),))):
    with SplitWriter(tmp_path, "train", "uint16") as w:
        for doc in docs:
            w.add_document(list(doc))
    write_meta(tmp_path, minimal_meta("uint16", {"train": w.close()}))
    return tmp_path


def _poke(path, index: int, value: int, dtype: str = "int64") -> None:
    array = np.fromfile(path, dtype=dtype)
    array[index] = value
    array.tofile(path)


@pytest.mark.parametrize("change, words", [
    (lambda d: _poke(d / "train.src.idx", 1, 2 ** 62), r"train\.src\.idx: offset 1 is 4611686018427387904, beyond"),
    (lambda d: _poke(d / "train.tgt.idx", 2, 0), r"train\.tgt\.idx: offset 2 \(0\) is below offset 1 \(1\)"),
    (lambda d: _poke(d / "train.src.idx", 0, 1), r"train\.src\.idx: its first offset is 1, not 0"),
    (lambda d: _poke(d / "train.docs", 1, 0), r"train\.docs: document 1 starts at sentence 0"),
    (lambda d: _poke(d / "train.docs", 2, 7), r"train\.docs: its documents end at sentence 7, but the index holds 3"),
    (lambda d: _poke(d / "train.docs", 0, -1), r"train\.docs: it does not start with document 0"),
    (lambda d: _poke(d / "train.tgt.bin", 1, 100, "uint16"), r"train\.tgt\.bin: token 1 has id 100, outside"),
    (lambda d: (d / "train.src.idx").write_bytes((d / "train.src.idx").read_bytes()[:-3]),
     r"train\.src\.idx: its 29 bytes are not a whole number of 8-byte entries"),
    (lambda d: (d / "train.docs").write_bytes(b""), r"train\.docs: it does not start with document 0"),
])
def test_a_tampered_split_is_one_line_naming_the_file(tmp_path, change, words):
    data = _split(tmp_path)
    change(data)
    with pytest.raises(CtxmtError, match=words) as err:
        PreparedData(data).split("train")
    assert "\n" not in str(err.value) and "prepare the dataset again" in str(err.value)


@pytest.mark.parametrize("key, value, words", [
    ("dtype", "float64", r"'dtype' is 'float64', not one of uint16, int32"),
    ("dtype", ["uint16"], r"'dtype' is \['uint16'\]"),
    ("splits", [], r"'splits' is \[\]"),
    ("splits", {"../x": {"sentences": 1, "documents": 1}}, r"split name '\.\./x' is not a name"),
    ("splits", {"train": {"sentences": "3"}}, r"'splits\.train' is"),
    ("vocab_size", {"src": 0, "tgt": 100}, r"'vocab_size' is"),
    ("spm", {"src": "/etc/passwd", "tgt": "spm.model"}, r"'spm' is .*naming files of the directory"),
    ("moses", "no", r"'moses' is 'no', not true or false"),
    ("src_lang", None, r"'src_lang' is None"),
])
def test_a_tampered_meta_json_is_one_line_naming_the_key(tmp_path, key, value, words):
    data = _split(tmp_path)
    meta = json.loads((data / "meta.json").read_text())
    meta[key] = value
    write_meta(data, meta)
    with pytest.raises(CtxmtError, match=r"meta\.json: " + words):
        PreparedData(data)


def test_meta_json_counts_must_match_the_files(tmp_path):
    data = _split(tmp_path)
    meta = json.loads((data / "meta.json").read_text())
    meta["splits"]["train"]["documents"] = 5
    write_meta(data, meta)
    with pytest.raises(CtxmtError, match=r"split 'train' holds 3 sentences in 5 documents, its files 3 in 2"):
        PreparedData(data).split("train")
    assert PreparedData(data).splits == ["train"]         # the other checks pass: only the split's open refuses


@pytest.mark.parametrize("name, words", [
    ("../test", "a split is a name such as test, not a path"),
    ("test", "prepare it with --test PATH"),
    ("dev", "pick one of the available splits"),
])
def test_a_missing_split_gets_a_fix_that_fits_its_name(tmp_path, name, words):
    with pytest.raises(CtxmtError, match=words):
        PreparedData(_split(tmp_path)).split(name)
