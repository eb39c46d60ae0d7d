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
