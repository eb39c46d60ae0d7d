"""DocRepair data: the grouping of a document's sentences, the repair corpus, the reversed prepared dataset."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from ctxmt_cli.data.docrepair import (
    build_repair_corpus,
    document_groups,
    group_bounds,
    join_group,
    reverse_prepared,
    reversed_tokenizer,
)
from ctxmt_cli.data.store import PreparedData
from ctxmt_cli.data.streams import StreamWriter
from ctxmt_cli.errors import CtxmtError


def test_disjoint_groups_of_four_with_a_short_tail():
    assert group_bounds(10) == [(0, 4), (4, 8), (8, 10)]
    assert group_bounds(8) == [(0, 4), (4, 8)]
    assert group_bounds(3) == [(0, 3)]
    assert group_bounds(1) == [(0, 1)]
    assert group_bounds(0) == []


def test_overlapping_groups_end_with_the_document():
    assert group_bounds(6, 4, 1) == [(0, 4), (1, 5), (2, 6)]
    assert group_bounds(9, 4, 2) == [(0, 4), (2, 6), (4, 8), (6, 9)]
    assert group_bounds(2, 4, 1) == [(0, 2)]


@pytest.mark.parametrize("size,stride", [(4, 4), (4, 1), (4, 3), (3, 2), (1, 1), (5, 5)])
def test_every_sentence_is_grouped_in_order(size, stride):
    for n in range(0, 23):
        groups = group_bounds(n, size, stride)
        covered = sorted({i for a, b in groups for i in range(a, b)})
        assert covered == list(range(n))
        assert all(0 < b - a <= size for a, b in groups)
        assert [a for a, _ in groups] == sorted({a for a, _ in groups})     # starts strictly increase
        if stride == size:                                                  # disjoint: each sentence once
            assert sum(b - a for a, b in groups) == n
            assert all(b - a == size for a, b in groups[:-1])


def test_bad_sizes_are_refused():
    for size, stride in ((0, None), (4, 0), (4, 5)):
        with pytest.raises(CtxmtError, match="`group_size`"):
            group_bounds(8, size, stride)


def test_groups_never_cross_documents():
    groups = document_groups(np.array([0, 5, 6, 14]), 4)
    assert groups == [[(0, 4), (4, 5)], [(5, 6)], [(6, 10), (10, 14)]]


def test_join_group_puts_one_separator_between_sentences():
    assert join_group([[5, 6], [7], [8, 9]], brk=4) == [5, 6, 4, 7, 4, 8, 9]
    assert join_group([[5, 6]], brk=4) == [5, 6]
    assert join_group([[], [7]], brk=4) == [4, 7]


@pytest.fixture
def data(prepared, tmp_path):
    """A private copy of the shared prepared directory with a round-trip stream on train and valid: each
    target sentence reversed, so a group's source is checkable by hand."""
    data = PreparedData(shutil.copytree(prepared, tmp_path / "data"))
    for split in ("train", "valid"):
        store = data.split(split)
        writer = StreamWriter(data.dir, split, "rt", data.meta["dtype"], {"split": split, "side": "tgt"})
        writer.start(force=False)
        ids = [[store.tgt(i).tolist()[::-1] for i in range(a, b)] for a, b in store.documents()]
        writer.append(ids, [[data.tokenizer.decode_tgt(s) for s in doc] for doc in ids])
        writer.finish({"side": "tgt", "language": "tgt"})
    return data


def test_repair_corpus_pairs_round_trip_groups_with_the_original_groups(data, tmp_path):
    meta = build_repair_corpus(data, {"train": "rt", "valid": "rt"}, tmp_path / "repair")
    repair, store = PreparedData(tmp_path / "repair"), data.split("train")
    brk = data.tokenizer.brk_id
    out = repair.split("train")
    assert out.n_documents == store.n_documents
    a, b = next(store.documents())                                          # the first document, by hand
    first = [store.tgt(i).tolist() for i in range(a, min(a + 4, b))]
    assert out.tgt(0).tolist() == join_group(first, brk)
    assert out.src(0).tolist() == join_group([s[::-1] for s in first], brk)
    expected = sum(-(-(e - s) // 4) for s, e in store.documents())         # ceil(n / 4) groups per document
    assert out.n_sentences == expected == meta["splits"]["train"]["sentences"]
    last_doc_start = int(store.doc_offsets[-2])
    tail = [store.tgt(i).tolist() for i in range(last_doc_start + 4 * ((store.n_sentences - last_doc_start - 1) // 4),
                                                 store.n_sentences)]
    assert out.tgt(out.n_sentences - 1).tolist() == join_group(tail, brk)  # the last, possibly short, group
    assert meta["src_lang"] == meta["tgt_lang"] == data.meta["tgt_lang"] and meta["joint"]
    assert meta["docrepair"]["group_size"] == 4 and repair.tokenizer.brk_id == brk
    assert repair.tokenizer.encode_src("ka lu") == data.tokenizer.encode_tgt("ka lu")


def test_repair_corpus_refuses_a_source_side_stream_and_an_existing_output(data, tmp_path):
    build_repair_corpus(data, {"train": "rt"}, tmp_path / "repair")
    with pytest.raises(CtxmtError, match="already exists.*`force`"):
        build_repair_corpus(data, {"train": "rt"}, tmp_path / "repair")
    info = data.dir / "train.rt.stream.json"
    info.write_text(info.read_text().replace('"side": "tgt",\n  "language"', '"side": "src",\n  "language"'))
    with pytest.raises(CtxmtError, match="source language"):
        build_repair_corpus(data, {"train": "rt"}, tmp_path / "other")


def test_reversed_dataset_swaps_sides_and_keeps_the_vocabulary(data, tmp_path):
    meta = reverse_prepared(data.dir, tmp_path / "rev")
    rev = PreparedData(tmp_path / "rev")
    for split in ("train", "valid"):
        a, b = data.split(split), rev.split(split)
        assert np.array_equal(a.src_data, b.tgt_data) and np.array_equal(a.tgt_data, b.src_data)
        assert np.array_equal(a.doc_offsets, b.doc_offsets)
    assert (meta["src_lang"], meta["tgt_lang"]) == (data.meta["tgt_lang"], data.meta["src_lang"])
    assert rev.tokenizer.fingerprint() == reversed_tokenizer(data.tokenizer).fingerprint()
    assert rev.streams("train") == []                                       # streams belong to the original
    with pytest.raises(CtxmtError, match="`data` directory"):
        reverse_prepared(data.dir, data.dir, force=True)


def test_reversing_separate_vocabularies_swaps_the_models(prepared, tmp_path):
    from ctxmt_cli.data.prepare import PrepareSpec, SplitInput, prepare_corpus

    raw = prepared.parent / "raw"                                           # the shared corpus' raw text
    spec = PrepareSpec(fmt="text", splits={"train": SplitInput(raw / "train.src", raw / "train.tgt")},
                       src_lang="src", tgt_lang="tgt", out=tmp_path / "sep", vocab_size=120, joint=False)
    prepare_corpus(spec)
    sep = PreparedData(tmp_path / "sep")
    reverse_prepared(sep.dir, tmp_path / "rev")
    rev = PreparedData(tmp_path / "rev")
    line = sep.tokenizer.decode_tgt(sep.split("train").tgt(0).tolist())
    assert rev.tokenizer.encode_src(line) == sep.tokenizer.encode_tgt(line) != sep.tokenizer.encode_src(line)
    assert rev.tokenizer.fingerprint() == reversed_tokenizer(sep.tokenizer).fingerprint() != sep.tokenizer.fingerprint()
    assert reversed_tokenizer(rev.tokenizer).fingerprint() == sep.tokenizer.fingerprint()
