"""The bilingual HanoiT's target concatenation (Yang et al., §2.3): the row layout, document boundaries, its own
truncation, the per-row drop of eq. 13 and where the target context comes from."""

from __future__ import annotations

import numpy as np
import pytest

from ctxmt_cli.data.store import MemorySplit, PreparedData
from ctxmt_cli.data.target_concat import ReferenceSide, TargetConcat, target_side
from ctxmt_cli.data.windows import WindowDataset, WindowSpec
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.models.hanoit.bilingual import TargetConcatRows

BRK, EOS, PAD, BOS = 4, 3, 0, 2


class Side:
    """A stand-in first pass: target ids per sentence (what a stream gives)."""

    def __init__(self, sentences):
        self.sentences = [np.asarray(s, dtype=np.int64) for s in sentences]
        self.lengths = np.asarray([len(s) for s in sentences])

    def sentence(self, i: int) -> np.ndarray:
        return self.sentences[i]


def split_and_side():
    """Two documents (3 and 2 sentences); source ids 1x, first pass 5x, reference 3x (sentence x)."""
    docs = [[([10 + j], [30 + j]) for j in range(3)], [([13], [33]), ([14], [34])]]
    first = Side([[50 + j, 50 + j] for j in range(5)])                      # two tokens each
    return MemorySplit(docs), first


def dataset(prev=1, nxt=1, limit=64, alpha=0.0, seed=1, side=None):
    split, first = split_and_side()
    spec = WindowSpec(prev, 0, limit, src_next_sentences=nxt, seed=seed)
    return WindowDataset(split, spec, BRK, EOS, TargetConcat(side or first, alpha, seed))


def test_row_layout_previous_then_next_then_the_current_source_sentence():
    ds = dataset(prev=1, nxt=1)
    row, following = ds.tgt_concat(1)
    assert row.tolist() == [50, 50, BRK, 52, 52, BRK, 11, EOS] and following == 1
    assert ds.source(1).tolist() == [10, BRK, 12, BRK, 11, EOS]           # the same context sentences


def test_rows_never_cross_a_document_boundary():
    ds = dataset(prev=2, nxt=2)
    rows = {j: ds.tgt_concat(j) for j in range(5)}
    assert rows[0][0].tolist() == [51, 51, BRK, 52, 52, BRK, 10, EOS] and rows[0][1] == 2   # no previous
    assert rows[2][0].tolist() == [50, 50, BRK, 51, 51, BRK, 12, EOS] and rows[2][1] == 0   # document 0 ends
    assert rows[3][0].tolist() == [54, 54, BRK, 13, EOS] and rows[3][1] == 1               # document 1 starts
    assert rows[4][0].tolist() == [53, 53, BRK, 14, EOS] and rows[4][1] == 0


def test_the_row_is_truncated_by_its_own_lengths():
    """Long first-pass sentences: the source window keeps 1 previous + 1 next, the target row only the previous
    one (at equal distance the next sentence goes first), so its next count differs from the source window's."""
    long = Side([[60 + j] * 3 for j in range(5)])
    split, _ = split_and_side()
    spec = WindowSpec(1, 0, 7, src_next_sentences=1)                        # source window: 1 + 1 + 1 + 2 + 1 = 6
    ds = WindowDataset(split, spec, BRK, EOS, TargetConcat(long))
    assert ds.src_next[1] == 1 and ds.src_ctx[1] == 1
    row, following = ds.tgt_concat(1)
    assert row.tolist() == [60, 60, 60, BRK, 11, EOS] and following == 0  # 6 tokens; with the next one, 10


def test_reference_side_reads_the_split_target():
    split, _ = split_and_side()
    ds = WindowDataset(split, WindowSpec(1, 0, 64, src_next_sentences=1), BRK, EOS, TargetConcat(ReferenceSide(split)))
    assert ds.tgt_concat(1)[0].tolist() == [30, BRK, 32, BRK, 11, EOS]


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_alpha_one_drops_every_row_and_zero_none(alpha):
    ds = dataset(alpha=alpha)
    for epoch in range(3):
        ds.set_epoch(epoch)
        rows = [ds.tgt_concat(j) for j in range(5)]
        assert all((len(r) == 0) == (alpha == 1.0) for r, _ in rows)
        assert (TargetConcatRows.of(rows, PAD) is None) == (alpha == 1.0)   # no row reads target context


def test_the_dropped_share_is_alpha_and_the_draw_comes_from_seed_and_epoch():
    n = 20000
    side = Side([[7]] * n)
    tc = TargetConcat(side, alpha=0.5, seed=3)
    tc.fit(np.ones(n, np.int64), np.zeros(n, np.int64), np.full(n, n), WindowSpec(1, 0, 64, src_next_sentences=1))
    draws = []
    for epoch in (0, 1, 0):
        tc.draw(epoch)
        draws.append(tc.off.copy())
    assert abs(draws[0].mean() - 0.5) < 0.015 and abs(draws[1].mean() - 0.5) < 0.015   # binomial sd 0.0035
    assert np.array_equal(draws[0], draws[2]) and not np.array_equal(draws[0], draws[1])
    other = TargetConcat(side, alpha=0.5, seed=4)
    other.fit(np.ones(n, np.int64), np.zeros(n, np.int64), np.full(n, n), WindowSpec(1, 0, 64, src_next_sentences=1))
    other.draw(0)
    assert not np.array_equal(other.off, draws[0])
    tc.alpha = 0.2
    tc.draw(5)
    assert abs(tc.off.mean() - 0.2) < 0.015


def test_set_epoch_redraws_the_dropped_rows_with_the_previous_order():
    ds = dataset(alpha=0.5, seed=2)
    seen = set()
    for epoch in range(8):
        ds.set_epoch(epoch)
        seen.add(tuple(ds.target_concat.off))
    assert len(seen) > 1


def test_batch_rows_pad_dropped_rows_and_carry_next_counts():
    extras = TargetConcatRows.of([(np.array([5, 6, EOS]), 1), (np.zeros(0, np.int64), 0)], PAD)
    assert extras.tokens.tolist() == [[5, 6, EOS], [PAD, PAD, PAD]] and extras.next_sentences.tolist() == [1, 0]
    assert TargetConcatRows.of([(np.zeros(0, np.int64), 0)], PAD) is None
    assert extras.rows(0, 1).tokens.tolist() == [[5, 6, EOS]]                  # a chunk's rows keep the width


def test_a_missing_stream_names_the_command_that_writes_it(prepared):
    data = PreparedData(prepared)
    with pytest.raises(CtxmtError, match=r"ctxmt first-pass -c SENTENCE_CKPT .*--split train --name nope"):
        target_side(data, "train", "first_pass", "nope")
    assert isinstance(target_side(data, "train", "reference", None), ReferenceSide)
