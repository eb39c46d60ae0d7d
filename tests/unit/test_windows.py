"""Context windows from the real memory-mapped store: document boundaries, order, limits."""

import numpy as np
import pytest

from ctxmt_cli.data.store import SplitArrays, SplitWriter
from ctxmt_cli.data.windows import WindowDataset, WindowSpec

BRK, EOS = 4, 3


@pytest.fixture
def split(tmp_path):
    # two documents: sentence ids encode (doc, position) so windows are easy to read
    docs = [[[10], [11, 11], [12], [13, 13, 13]], [[20, 20], [21]]]
    with SplitWriter(tmp_path, "train", "uint16") as writer:
        for doc in docs:
            writer.add_document([(s, [x + 50 for x in s]) for s in doc])
    return SplitArrays(tmp_path, "train", "uint16")


def test_windows_oldest_first_and_never_cross_documents(split):
    ds = WindowDataset(split, WindowSpec(src_context_sentences=2, tgt_context_sentences=1), BRK, EOS)
    assert ds.source(0).tolist() == [10, EOS]                         # document start: no context
    assert ds.source(3).tolist() == [11, 11, BRK, 12, BRK, 13, 13, 13, EOS]
    assert ds.target(3).tolist() == [62, BRK, 63, 63, 63, EOS]
    assert ds.source(4).tolist() == [20, 20, EOS]                     # second document starts clean
    assert ds.source(5).tolist() == [20, 20, BRK, 21, EOS]
    assert ds.src_ctx.tolist() == [0, 1, 2, 2, 0, 1]


def test_window_lengths_match_built_windows(split):
    ds = WindowDataset(split, WindowSpec(src_context_sentences=3, tgt_context_sentences=3), BRK, EOS)
    for j in ds.indices:
        assert ds.src_len[j] == len(ds.source(j))
        assert ds.tgt_len[j] == len(ds.target(j)) + 1                 # + <s>


def test_long_windows_lose_oldest_whole_sentences(split):
    ds = WindowDataset(split, WindowSpec(src_context_sentences=3, tgt_context_sentences=0, max_window_tokens=7), BRK, EOS)
    assert ds.source(3).tolist() == [12, BRK, 13, 13, 13, EOS]        # 11 11 dropped whole, not cut
    tight = WindowDataset(split, WindowSpec(max_window_tokens=3), BRK, EOS)
    assert 3 not in tight.indices.tolist()                            # the sentence alone is too long
    assert len(tight) == 5


def test_sentence_level_windows_are_single_sentences(split):
    ds = WindowDataset(split, WindowSpec(), BRK, EOS)
    assert all(BRK not in ds.source(j).tolist() for j in range(6))
    assert np.array_equal(ds.src_len, split.src_lengths + 1)


@pytest.fixture
def unordered(tmp_path):
    # documents of 1, 5 and 3 sentences; ids encode (doc, position), lengths vary
    docs = [[[10]], [[20], [21, 21], [22], [23, 23, 23], [24, 24]], [[30, 30], [31], [32]]]
    with SplitWriter(tmp_path, "train", "uint16") as writer:
        for doc in docs:
            writer.add_document([(s, [x + 50 for x in s]) for s in doc])
    return SplitArrays(tmp_path, "train", "uint16")


def random_spec(src=2, tgt=1, limit=1024, seed=1):
    return WindowSpec(src, tgt, limit, context_order="random", seed=seed)


def sentences(ds, window):
    """The sentence ids (split positions) of a window's context, read back from its tokens."""
    first = {int(ds.split.src(j)[0]): j for j in range(ds.split.n_sentences)}
    first.update({int(ds.split.tgt(j)[0]): j for j in range(ds.split.n_sentences)})
    parts = np.split(window, np.nonzero(window == BRK)[0])
    return [first[int(p[p != BRK][0])] for p in parts[:-1]]


def test_random_context_comes_from_the_same_document_never_the_sentence_itself(unordered):
    ds = WindowDataset(unordered, random_spec(), BRK, EOS)
    doc_of = np.asarray(unordered.doc_index)
    for epoch in range(20):
        ds.set_epoch(epoch)
        assert ds.src_ctx[0] == 0 and ds.source(0).tolist() == [10, EOS]   # a one-sentence document has none
        for j in range(1, unordered.n_sentences):
            ctx = sentences(ds, ds.source(j))
            assert len(ctx) == min(2, np.sum(doc_of == doc_of[j]) - 1)
            assert j not in ctx and len(set(ctx)) == len(ctx)
            assert all(doc_of[i] == doc_of[j] for i in ctx)
            assert sentences(ds, ds.target(j)) == ctx[-1:]                 # the target side: the nearest one
            assert ds.src_len[j] == len(ds.source(j)) and ds.tgt_len[j] == len(ds.target(j)) + 1


def test_random_context_is_drawn_per_seed_and_epoch(unordered):
    a, b = (WindowDataset(unordered, random_spec(), BRK, EOS) for _ in range(2))
    tables = {}
    for epoch in (0, 1, 2, 5):
        a.set_epoch(epoch)
        tables[epoch] = a.context.copy()
    b.set_epoch(5)
    assert np.array_equal(b.context, tables[5])                              # a resumed run's epoch 5
    b.set_epoch(0)
    assert np.array_equal(b.context, tables[0])                              # any order of epochs
    assert len({t.tobytes() for t in tables.values()}) == len(tables)        # re-drawn every epoch
    other = WindowDataset(unordered, random_spec(seed=2), BRK, EOS)
    assert not np.array_equal(other.context, tables[0])


def test_random_context_reaches_every_other_sentence(unordered):
    ds = WindowDataset(unordered, random_spec(src=1, tgt=0), BRK, EOS)
    seen = set()
    for epoch in range(60):
        ds.set_epoch(epoch)
        seen.update(sentences(ds, ds.source(3)))
    assert seen == {1, 2, 4, 5}                                              # document 2 minus sentence 3


def test_random_windows_respect_the_token_limit(unordered):
    ds = WindowDataset(unordered, random_spec(src=4, tgt=4, limit=7), BRK, EOS)
    for epoch in range(10):
        ds.set_epoch(epoch)
        for j in ds.indices:
            assert len(ds.source(j)) <= 7 and len(ds.target(j)) <= 7
            assert ds.src_len[j] == len(ds.source(j))
