"""The start of a search in chunks of rows of similar length (ctxmt_cli.decode.start): the plan, the joined
state, and the same hypotheses as one start (the contract suite checks the last on every family)."""

from __future__ import annotations

from itertools import accumulate

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxmt_cli.config import validate_recipe
from ctxmt_cli.core.batch import Batch, SharedRows, VocabInfo
from ctxmt_cli.decode import start as start_module
from ctxmt_cli.decode.search import beam_search
from ctxmt_cli.decode.start import (
    batch_rows,
    chunkable,
    join_shared,
    join_states,
    merge_blocks,
    merged,
    plan_chunks,
    start,
)
from ctxmt_cli.models.families import build_model

PAD, BOS, EOS, BRK = 0, 2, 3, 4
VOCAB = VocabInfo(src_size=40, tgt_size=40)
TINY = {"preset": None, "d_model": 32, "ffn_dim": 64, "heads": 4, "encoder_layers": 2, "decoder_layers": 2,
        "dropout": 0.0}

widths = st.lists(st.tuples(st.integers(1, 300), st.integers(1, 300)), min_size=1, max_size=150)


def padded_area(chunks, w) -> int:
    return sum(len(c) * (max(w[r][0] for r in c) + max(w[r][1] for r in c)) for c in chunks)


@settings(max_examples=60, deadline=None)
@given(widths, st.integers(0, 5000))
def test_plan_covers_every_row_once_and_never_costs_more_than_one_chunk(w, cost):
    chunks = plan_chunks(w, cost)
    assert sorted(r for c in chunks for r in c) == list(range(len(w)))
    assert all(chunks)
    assert padded_area(chunks, w) + cost * len(chunks) <= padded_area([list(range(len(w)))], w) + cost
    flat = [r for c in chunks for r in c]                                  # longest first, chunk after chunk
    assert [sum(w[r]) for r in flat] == sorted((sum(x) for x in w), reverse=True)


@settings(max_examples=30, deadline=None)
@given(widths)
def test_plan_keeps_one_chunk_where_a_chunk_costs_more_than_any_padding(w):
    assert len(plan_chunks(w, cost=10 ** 9)) == 1


def test_plan_separates_short_rows_from_long_ones():
    w = [(100, 100)] * 8 + [(5, 5)] * 8
    chunks = plan_chunks(w, cost=64)
    assert sorted(map(sorted, chunks)) == [list(range(8)), list(range(8, 16))]


blocks = st.lists(st.tuples(st.integers(1, 40), st.integers(0, 300)), min_size=1, max_size=12).map(
    lambda sizes: tuple(zip(accumulate(n for n, _ in sizes), (w for _, w in sizes), strict=True)))


def keys_read(widths) -> int:
    firsts = [0, *(end for end, _ in widths[:-1])]
    return sum((end - first) * width for first, (end, width) in zip(firsts, widths, strict=True))


@settings(max_examples=80, deadline=None)
@given(blocks, st.integers(0, 5000))
def test_merged_blocks_are_runs_of_the_blocks_read_at_their_widest_and_never_cost_more(widths, cost):
    runs = merge_blocks(widths, cost) or ((widths[-1][0], max(w for _, w in widths)),)
    ends = [end for end, _ in widths]
    assert runs[-1][0] == ends[-1] and {end for end, _ in runs} <= set(ends)
    firsts = [0, *(end for end, _ in runs[:-1])]
    for first, (end, width) in zip(firsts, runs, strict=True):
        assert width == max(w for e, w in widths if first < e <= end)
    assert keys_read(runs) + cost * len(runs) <= keys_read(widths) + cost * len(widths)
    again = merge_blocks(runs, cost) or ((runs[-1][0], max(w for _, w in runs)),)
    assert keys_read(again) + cost * len(again) == keys_read(runs) + cost * len(runs)   # already the cheapest


def test_a_block_left_with_a_row_or_two_joins_its_neighbour():
    assert merge_blocks(((30, 130), (60, 120), (90, 100)), 200) == ((30, 130), (60, 120), (90, 100))
    assert merge_blocks(((1, 130), (2, 120), (10, 50), (11, 60)), 200) == ((2, 130), (11, 60))
    assert merge_blocks(((1, 130), (2, 120)), 200) is None


def model(family: str = "concat"):
    torch.manual_seed(0)
    spec = {"family": family, **TINY}
    if family == "concat":
        spec |= {"src_context_sentences": 2, "tgt_context_sentences": 2}
    m = build_model(validate_recipe({"model": spec}).model, VOCAB).eval()
    with torch.no_grad():
        for p in m.parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.35)
    return m


def pad(rows):
    out = torch.full((len(rows), max(map(len, rows))), PAD, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, :len(r)] = torch.tensor(r)
    return out


def mixed_batch() -> Batch:
    """Rows of very different lengths: two long windows with long prefixes, short ones with none, in mixed order."""
    long_src = [7, 8, 9, 10, 11, BRK, 12, 13, 14, 15, BRK, 16, 17, 18, EOS]
    long_pre = [BOS, 20, 21, 22, 23, BRK, 24, 25, 26, BRK]
    rows = [([30, EOS], [BOS]), (long_src, long_pre), ([31, 32, EOS], [BOS]), (long_src[3:], long_pre[:6]),
            ([33, EOS], [BOS, 34, BRK])]
    return Batch(src=pad([s for s, _ in rows]), tgt_prefix=pad([p for _, p in rows]),
                 tgt_sentences=torch.tensor([p.count(BRK) + 1 for _, p in rows]))


def test_joined_state_steps_like_one_start():
    """Chunks started apart and joined, put back in the batch's order, give the next step's logits of one start."""
    m, batch = model(), mixed_batch()
    with torch.no_grad():
        whole = m.init_state(m.encode(batch), batch)
        chunks = [[1, 3], [4, 2, 0]]
        parts = [batch_rows(batch, c, PAD) for c in chunks]
        joined = join_states([m.init_state(m.encode(p), p) for p in parts])
        back = m.reorder_state(joined, torch.tensor([4, 0, 3, 1, 2]))       # batch row r sits at this joined row
        want, _ = m.decode_step(whole.pending, whole)
        got, _ = m.decode_step(back.pending, back)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    assert joined.cross.mask.size(1) == whole.cross.mask.size(1)          # padded to the widest, masked there


def test_joining_shared_rows_with_and_without_a_prefix():
    k = [torch.randn(2, 4, 3, 8)]
    with_prefix = SharedRows.one_per_row([(k[0], k[0] + 1)], torch.ones(2, 3, dtype=torch.bool))
    joined = join_shared([with_prefix, None], [2, 3])
    assert joined.k[0].shape == (5, 4, 3, 8)
    assert joined.mask.tolist() == [[True] * 3] * 2 + [[False] * 3] * 3
    assert joined.group.tolist() == [0, 1, 2, 3, 4]
    assert joined.widths == ((2, 3), (5, 0))                                # a step reads 3 keys, then none
    assert join_shared([None, None], [1, 2]) is None
    kept = joined.index_select(torch.tensor([0, 3, 3]))                     # 2 of 5 stored rows used: compacted
    assert kept.k[0].shape == (2, 4, 3, 8) and kept.group.tolist() == [0, 1, 1]
    assert kept.widths == ((1, 3), (2, 0))
    assert joined.index_select(torch.tensor([3, 4])).widths is None         # one block left: every key read


def test_keys_keep_the_layout_a_cpu_step_reads_through_compaction_and_joining():
    """Stored keys are the transpose of a contiguous (G, H, D, M): a step's q @ k^T reads them as a plain product."""
    k = torch.randn(3, 4, 5, 8)
    rows = SharedRows.one_per_row([(k, k + 1)], torch.ones(3, 5, dtype=torch.bool))
    joined = join_shared([rows, rows], [3, 3])
    compacted = joined.index_select(torch.tensor([1, 4]))
    for stored in (rows, joined, compacted):
        assert stored.k[0].mT.is_contiguous() and stored.v[0].is_contiguous()
    torch.testing.assert_close(compacted.k[0], torch.cat([k[1:2], k[1:2]]))


def test_blocks_merge_once_the_stored_rows_are_compacted_and_the_step_is_unchanged(monkeypatch):
    m, batch = model(), mixed_batch()
    with torch.no_grad():
        parts = [batch_rows(batch, c, PAD) for c in ([1, 3], [4, 2, 0])]
        joined = join_states([m.init_state(m.encode(p), p) for p in parts])
        monkeypatch.setattr(start_module, "BLOCK_COST", 0)
        assert merged(joined) is joined                                     # blocks that cost nothing stay
        kept = m.reorder_state(joined, torch.tensor([0, 4]))                # compacted to one row per block
        monkeypatch.setattr(start_module, "BLOCK_COST", 10 ** 6)
        joined_up = merged(kept)
        assert kept.cross.widths is not None and joined_up.cross.widths is None and joined_up.prefix.widths is None
        want, _ = m.decode_step(kept.pending, kept)
        got, _ = m.decode_step(joined_up.pending, joined_up)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_steps_read_only_each_blocks_keys():
    """A step of a joined state reads each block's own keys: padding the stored keys with garbage beyond a block's
    width changes nothing, where the mask alone would have had to hide it."""
    m, batch = model(), mixed_batch()
    with torch.no_grad():
        parts = [batch_rows(batch, c, PAD) for c in ([1, 3], [4, 2, 0])]
        joined = join_states([m.init_state(m.encode(p), p) for p in parts])
        want, _ = m.decode_step(joined.pending, joined)
        width = joined.cross.widths[0][0]
        for t in (*joined.cross.k, *joined.cross.v):
            t[width:, :, parts[1].src.size(1):] = float("nan")              # beyond the second block's keys
        got, _ = m.decode_step(joined.pending, joined)
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("family", ["sentence", "concat"])
@pytest.mark.parametrize("beam", [1, 4])
def test_search_started_in_chunks_finds_what_one_start_finds(family, beam, monkeypatch):
    m, batch = model(family), mixed_batch()
    if family == "sentence":
        batch = Batch(src=batch.src, tgt_sentences=torch.ones(batch.size, dtype=torch.long))
    monkeypatch.setattr(start_module, "CHUNK_COST", 10 ** 9)
    one = beam_search(m, batch, beam=beam, max_len=12, banned=[BRK])
    monkeypatch.setattr(start_module, "CHUNK_COST", 0)
    monkeypatch.setattr(start_module, "BLOCK_COST", 10 ** 6 if beam == 4 else 0)   # merged at once, or never
    assert len(start(m, batch).state.pos) == batch.size and start(m, batch).order is not None   # chunked indeed
    chunked = beam_search(m, batch, beam=beam, max_len=12, banned=[BRK])
    assert [h.tokens for h in chunked] == [h.tokens for h in one]
    assert [h.score for h in chunked] == pytest.approx([h.score for h in one], abs=1e-5)


def test_rows_that_read_each_other_are_never_chunked():
    batch = mixed_batch()
    assert chunkable(batch)
    assert not chunkable(Batch(src=batch.src, memory=[[] for _ in range(batch.size)]))
    assert not chunkable(Batch(src=batch.src, src_index=torch.zeros(2, dtype=torch.long)))
    assert not chunkable(Batch(src=batch.src[:1]))
