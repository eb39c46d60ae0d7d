"""Context windows from the real memory-mapped store: document boundaries, order, limits."""

import numpy as np
import pytest

from ctxmt_cli.data.store import SplitArrays, SplitWriter
from ctxmt_cli.data.windows import WindowDataset, WindowSpec, context_sizes, fit_window, two_sided_sizes
from ctxmt_cli.errors import CtxmtError

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
    spec = WindowSpec(src_context_sentences=3, tgt_context_sentences=0, max_window_tokens=7)
    ds = WindowDataset(split, spec, BRK, EOS)
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


# ---- next sentences (the offline context of Yang et al.'s HanoiT): [previous oldest first, next nearest first,
# current]
def offline(src=1, nxt=1, limit=1024):
    return WindowSpec(src_context_sentences=src, tgt_context_sentences=1, max_window_tokens=limit,
                      src_next_sentences=nxt)


def test_next_sentences_stop_at_document_ends(split):
    ds = WindowDataset(split, offline(), BRK, EOS)
    assert ds.source(0).tolist() == [11, 11, BRK, 10, EOS]             # first sentence: no previous, one next
    assert ds.source(1).tolist() == [10, BRK, 12, BRK, 11, 11, EOS]
    assert ds.source(3).tolist() == [12, BRK, 13, 13, 13, EOS]        # last sentence: the next document is not read
    assert ds.source(4).tolist() == [21, BRK, 20, 20, EOS]
    assert ds.source(5).tolist() == [20, 20, BRK, 21, EOS]
    assert ds.src_ctx.tolist() == [0, 1, 1, 1, 0, 1] and ds.src_next.tolist() == [1, 1, 1, 0, 1, 0]
    assert ds.target(0).tolist() == [60, EOS] and ds.target(1).tolist() == [60, BRK, 61, 61, EOS]   # previous only


def test_a_one_sentence_document_has_no_next_sentence(unordered):
    ds = WindowDataset(unordered, offline(2, 2), BRK, EOS)
    assert ds.source(0).tolist() == [10, EOS] and ds.src_next[0] == 0
    assert ds.source(1).tolist() == [21, 21, BRK, 22, BRK, 20, EOS]     # the next document starts clean


def test_next_sentences_nearest_first_after_the_previous_ones(split):
    ds = WindowDataset(split, offline(2, 2), BRK, EOS)
    assert ds.source(1).tolist() == [10, BRK, 12, BRK, 13, 13, 13, BRK, 11, 11, EOS]
    assert (ds.src_ctx[1], ds.src_next[1]) == (1, 2)
    assert ds.source(0).tolist() == [11, 11, BRK, 12, BRK, 10, EOS]
    for j in ds.indices:                                               # lengths and counts agree with the windows
        assert ds.src_len[j] == len(ds.source(j)) and ds.tgt_len[j] == len(ds.target(j)) + 1
        assert ds.source(j).tolist().count(BRK) == ds.src_ctx[j] + ds.src_next[j]


def test_long_windows_drop_the_farthest_then_next_before_previous(split):
    # sentence 1 (11 11) of the first document: previous 10 (distance 1), next 12 (1) and 13 13 13 (2)
    assert WindowDataset(split, offline(2, 2, limit=10), BRK, EOS).source(1).tolist() == [10, BRK, 12, BRK, 11, 11, EOS]
    six = WindowDataset(split, offline(2, 2, limit=6), BRK, EOS)      # equal distance: the next one goes first
    assert six.source(1).tolist() == [10, BRK, 11, 11, EOS] and six.src_next[1] == 0
    assert WindowDataset(split, offline(2, 2, limit=4), BRK, EOS).source(1).tolist() == [11, 11, EOS]


def test_truncation_goes_by_distance_not_by_length(unordered):
    # 22 between 21 21 and 23 23 23: dropping the (shorter) previous sentence would fit too; the next one goes
    assert WindowDataset(unordered, offline(1, 1, limit=8), BRK, EOS).source(3).tolist() == [21, 21, BRK, 22, EOS]
    # 23 23 23: previous 22 (distance 1) and 21 21 (2), next 24 24 (1): the farther previous one goes first
    far = WindowDataset(unordered, offline(2, 1, limit=11), BRK, EOS)
    assert far.source(4).tolist() == [22, BRK, 24, 24, BRK, 23, 23, 23, EOS]
    assert (far.src_ctx[4], far.src_next[4]) == (1, 1) and far.src_len[4] == 9


def test_one_sentence_rule_equals_the_array_rule():
    """fit_window (translation, scoring) keeps what two_sided_sizes (training) keeps, on random documents."""
    rng = np.random.default_rng(0)
    for _ in range(30):
        sizes = rng.integers(1, 6, rng.integers(1, 5))
        lengths = rng.integers(1, 9, sizes.sum())
        ends = np.cumsum(sizes)
        start, end = np.repeat(ends - sizes, sizes), np.repeat(ends, sizes)
        wanted, wanted_next, limit = rng.integers(0, 4), rng.integers(0, 4), int(rng.integers(2, 30))
        prev, nxt = two_sided_sizes(lengths, start, end, wanted, wanted_next, limit)
        for j in range(len(lengths)):
            if prev[j] < 0:
                assert lengths[j] + 1 > limit and nxt[j] == 0
                continue
            before, after = lengths[start[j]:j].tolist(), lengths[j + 1:end[j]].tolist()
            assert fit_window(before, after, wanted, wanted_next, limit - lengths[j] - 1) == (prev[j], nxt[j])
        if wanted_next == 0:                                           # the previous-only rule, as before
            assert np.array_equal(prev, context_sizes(lengths, start, wanted, limit)) and not nxt.any()


def test_fit_window_on_long_documents_matches_training():
    """The bisection of fit_window keeps what training keeps also where a window could hold dozens of sentences
    (a model reading every previous sentence the window limit holds)."""
    rng = np.random.default_rng(1)
    for _ in range(20):
        n = int(rng.integers(20, 80))
        lengths = rng.integers(1, 30, n)
        start, end = np.zeros(n, np.int64), np.full(n, n, np.int64)
        wanted, wanted_next, limit = int(rng.integers(0, n)), int(rng.integers(0, 6)), int(rng.integers(30, 600))
        prev, nxt = two_sided_sizes(lengths, start, end, wanted, wanted_next, limit)
        for j in np.flatnonzero(prev >= 0):
            before, after = lengths[:j].tolist(), lengths[j + 1:].tolist()
            assert fit_window(before, after, wanted, wanted_next, limit - lengths[j] - 1) == (prev[j], nxt[j])


def test_random_context_order_refuses_next_sentences():
    with pytest.raises(CtxmtError, match="context_order random.*src_next_sentences=1"):
        WindowSpec(2, 1, context_order="random", src_next_sentences=1)
