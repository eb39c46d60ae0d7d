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
            "splits": splits, "spm": {"src": "spm.model", "tgt": "spm.model"}, "moses": False}


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
    assert list(s.documents()) == list(zip(starts[:-1].tolist(), starts[1:].tolist()))
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
    with pytest.raises(CtxmtError, match="inconsistent"):
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
    t0 = time.perf_counter()
    s = SplitArrays(tmp_path, "big", "uint16")
    opened = time.perf_counter() - t0
    assert opened < 0.5, f"opening took {opened:.2f}s"
    assert s.n_sentences == n and s.n_documents == n // 10
    assert isinstance(s.src_data, np.memmap)
    assert s.src(n - 1).tolist() == [0, 0, 0]
