"""Token-budget batches: budget respected, every item once, deterministic per (seed, epoch), sharding."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxmt_cli.data.batching import BatchBudget, collate, shard_batches, token_batches


def lengths(n=500, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(3, 60, n), rng.integers(3, 60, n)


def test_budget_and_coverage():
    src, tgt = lengths()
    batches = token_batches(src, tgt, np.arange(len(src)), budget=BatchBudget(max_tokens=400))
    seen = np.concatenate(batches)
    assert sorted(seen.tolist()) == list(range(len(src)))
    for b in batches:
        assert len(b) * max(src[b].max(), tgt[b].max()) <= 400 or len(b) == 1


def greedy_by_item(src, tgt, order, max_tokens):
    """The packing's definition, one item at a time: a batch takes items while rows × widest fits."""
    batches, current, widest = [], [], 0
    for item in order:
        size = max(src[item], tgt[item])
        if current and max(widest, size) * (len(current) + 1) > max_tokens:
            batches.append(current)
            current, widest = [], 0
        current.append(int(item))
        widest = max(widest, size)
    return batches + [current] if current else batches


@pytest.mark.parametrize("bucket_width", [1, 8])
@pytest.mark.parametrize("max_tokens", [7, 100, 4096])
def test_packing_equals_the_item_by_item_definition(bucket_width, max_tokens):
    """Batches are cut once per run of equal widths; the cuts are those of packing item by item, also where
    buckets mix widths and where one item alone exceeds the budget."""
    src, tgt = lengths(2000, seed=bucket_width + max_tokens)
    budget = BatchBudget(max_tokens=max_tokens, bucket_width=bucket_width)
    batches = token_batches(src, tgt, np.arange(len(src)), budget=budget, shuffle=False)
    expected = greedy_by_item(src, tgt, np.concatenate(batches), max_tokens)
    assert [b.tolist() for b in batches] == expected
    noise = np.random.default_rng([1, 0]).random(len(src))        # shuffled: ties in random order, then batches
    order = np.lexsort((noise, (src + tgt) // bucket_width, np.maximum(src, tgt) // bucket_width))
    shuffled = token_batches(src, tgt, np.arange(len(src)), budget=budget, seed=1, epoch=0)
    assert sorted(b.tolist() for b in shuffled) == sorted(greedy_by_item(src, tgt, order, max_tokens))
    assert token_batches(src, tgt, np.arange(0), budget=budget) == []


def padding(lens, batches) -> float:
    return 1 - sum(lens[b].sum() for b in batches) / sum(len(b) * lens[b].max() for b in batches)


def test_bucketing_keeps_padding_low_on_both_sides():
    """Translations' lengths correlate loosely: the (longer) target side stays within 10% padding, the source near
    it."""
    rng = np.random.default_rng(0)
    src = rng.integers(3, 60, 4000)
    tgt = np.maximum(2, (src * rng.normal(1.1, 0.1, len(src))).astype(int))
    batches = token_batches(src, tgt, np.arange(len(src)), budget=BatchBudget(max_tokens=4096))
    assert padding(tgt, batches) < 0.10 and padding(src, batches) < 0.12


def test_deterministic_per_epoch_and_different_across_epochs():
    src, tgt = lengths()
    a = token_batches(src, tgt, np.arange(len(src)), budget=BatchBudget(max_tokens=400), seed=3, epoch=1)
    b = token_batches(src, tgt, np.arange(len(src)), budget=BatchBudget(max_tokens=400), seed=3, epoch=1)
    c = token_batches(src, tgt, np.arange(len(src)), budget=BatchBudget(max_tokens=400), seed=3, epoch=2)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert not all(len(x) == len(y) and np.array_equal(x, y) for x, y in zip(a, c, strict=False))


def test_shards_are_disjoint_and_equal_sized():
    batches = [np.array([i]) for i in range(7)]
    shards = [shard_batches(batches, r, 2) for r in range(2)]
    assert len(shards[0]) == len(shards[1]) == 3
    assert not set(np.concatenate(shards[0])) & set(np.concatenate(shards[1]))


def test_collate_teacher_forcing():
    batch = collate([np.array([5, 6, 3]), np.array([7, 3])], [np.array([8, 9, 3]), np.array([3])], pad=0, bos=2)
    assert batch.tgt_in.tolist() == [[2, 8, 9], [2, 0, 0]]
    assert batch.tgt_out.tolist() == [[8, 9, 3], [3, 0, 0]]
    assert batch.src.dtype == torch.long and batch.src.tolist() == [[5, 6, 3], [7, 3, 0]]


def test_groups_are_packed_by_length():
    """Whole groups go into batches by their longest sentence, as sentences do (wider ones only fill what a batch
    has left), so a batch needs few row chunks, and the chunks pad less than one padded tensor per group would
    (the spread inside one document's group, the floor of one padded tensor per batch)."""
    from ctxmt_cli.data.batching import group_batches

    rng = np.random.default_rng(0)
    docs = np.repeat(np.arange(300), rng.integers(2, 12, 300))            # document of each sentence
    src, tgt = rng.integers(3, 30, len(docs)), rng.integers(3, 30, len(docs))
    size = np.maximum(src, tgt)
    batches = group_batches(docs, src, tgt, np.arange(len(docs)), budget=BatchBudget(max_tokens=600), group_tokens=120,
                            mixed_share=0.5, seed=2, epoch=1)
    assert np.mean([len(b.ends) for b in batches]) <= 8
    groups = [b.indices[b.groups == g] for b in batches for g in range(len(b.mixed))]
    inside = padding(size, groups)                                         # one padded tensor per group
    chunks = [b.indices[a:e] for b in batches for a, e in zip((0, *b.ends[:-1]), b.ends, strict=True)]
    assert padding(size, chunks) < inside / 2


def test_window_batch_counts_next_sentences_only_where_windows_hold_them(tmp_path):
    from ctxmt_cli.data.batching import GroupedBatch, window_batch
    from ctxmt_cli.data.store import SplitArrays, SplitWriter
    from ctxmt_cli.data.windows import WindowDataset, WindowSpec

    with SplitWriter(tmp_path, "train", "uint16") as writer:
        for doc in ([[10], [11, 11], [12]], [[20, 20], [21]]):
            writer.add_document([(s, [x + 50 for x in s]) for s in doc])
    split = SplitArrays(tmp_path, "train", "uint16")
    rows = np.array([2, 0, 3, 1, 4])
    previous = window_batch(WindowDataset(split, WindowSpec(2, 1), 4, 3), rows, 0, 2)
    assert previous.src_next is None                                   # other families: the batch as before
    ds = WindowDataset(split, WindowSpec(2, 1, src_next_sentences=1), 4, 3)
    batch = window_batch(ds, rows, 0, 2)
    assert batch.src_next.dtype == torch.long and batch.src_next.tolist() == [0, 1, 1, 1, 0]
    for r, j in enumerate(rows):
        assert batch.src[r, : len(ds.source(j))].tolist() == ds.source(j).tolist()
    assert torch.equal(batch.tgt_out, previous.tgt_out) and torch.equal(batch.tgt_in, previous.tgt_in)
    plan = GroupedBatch(rows, np.array([0, 0, 1, 0, 1]), np.array([False, False]), ends=(2, 5))
    parts = window_batch(ds, plan, 0, 2, chunked=True).parts()          # row chunks keep each row's count
    assert [p.src_next.tolist() for p in parts] == [[0, 1], [1, 1, 0]]


@pytest.mark.parametrize("side", ["source", "target", "longer"])
def test_the_budget_counts_the_side_it_names(side):
    """A budget of the target side: padded rows × the longest *target* row stays within the budget, and windows with
    long source context (3× the target here) fill a batch with about 3× the sentences the longer-side budget takes."""
    rng = np.random.default_rng(3)
    tgt = rng.integers(5, 30, 2000)
    src = 3 * tgt + rng.integers(0, 5, 2000)                         # a window: context sentences + the current one
    batches = token_batches(src, tgt, np.arange(2000), budget=BatchBudget(max_tokens=600, side=side), seed=1)
    width = {"source": src, "target": tgt, "longer": np.maximum(src, tgt)}[side]
    assert sorted(np.concatenate(batches).tolist()) == list(range(2000))
    assert all(len(b) * width[b].max() <= 600 for b in batches)
    assert sum(len(b) * width[b].max() for b in batches) > 0.9 * 600 * len(batches)    # batches are full
    if side == "target":
        longer = token_batches(src, tgt, np.arange(2000), budget=BatchBudget(max_tokens=600), seed=1)
        assert len(longer) / len(batches) > 2.5                       # about 3× the sentences per batch


def test_an_mbe_model_refuses_a_one_sided_budget():
    from ctxmt_cli.config import validate_recipe
    from ctxmt_cli.errors import OptionError
    from ctxmt_cli.models.families import inputs_of

    cfg = validate_recipe({"model": {"family": "mbe", "preset": "small"}}).model
    with pytest.raises(OptionError, match="max_tokens_of='target'"):
        inputs_of(cfg).plan_batches(None, np.arange(3), budget=BatchBudget(max_tokens=100, side="target"))


@settings(max_examples=50, deadline=None)
@given(max_tokens=st.integers(16, 100_000), bucket_width=st.integers(1, 64),
       side=st.sampled_from(["longer", "source", "target"]))
def test_the_budget_of_a_recipe_is_the_recipes_data_section(max_tokens, bucket_width, side):
    from ctxmt_cli.config import validate_recipe

    data = {"max_tokens": max_tokens, "bucket_width": bucket_width, "max_tokens_of": side}
    budget = BatchBudget.of(validate_recipe({"data": data}).data)
    assert (budget.max_tokens, budget.bucket_width, budget.side) == (max_tokens, bucket_width, side)


def test_the_default_budget_is_the_schemas():
    from ctxmt_cli.config import DataConfig

    data = DataConfig()
    assert BatchBudget() == BatchBudget.of(data)
    assert BatchBudget().max_tokens == data.max_tokens == DataConfig.model_fields["max_tokens"].default


@pytest.mark.parametrize("fields, message", [({"side": "both"}, "budget side 'both'"),
                                             ({"max_tokens": 0}, "give 1 or more"),
                                             ({"bucket_width": 0}, "give 1 or more")])
def test_a_budget_that_cannot_work_is_refused(fields, message):
    with pytest.raises(ValueError, match=message):
        BatchBudget(**fields)


def test_the_planners_take_their_settings_by_name():
    """max_tokens, bucket width, seed and epoch are all numbers: passed by position they could be swapped without
    an error, so every planner takes them by name (the data arrays alone by position)."""
    from ctxmt_cli.data.batching import group_batches, sentence_groups
    from ctxmt_cli.data.store import MemorySplit
    from ctxmt_cli.data.windows import WindowDataset, WindowSpec
    from ctxmt_cli.evaluate.contrastive import shared_source_batches
    from ctxmt_cli.models.families import inputs_of
    from tests.unit.test_inputs import cfg

    src, tgt = lengths(40)
    docs, items, budget = np.repeat(np.arange(8), 5), np.arange(40), BatchBudget(max_tokens=400)
    ds = WindowDataset(MemorySplit([[([5, 6], [7, 8])] * 3]), WindowSpec(1, 1, 64), 4, 3)
    calls = {
        "token_batches": (lambda: token_batches(src, tgt, items, budget, 1, 3, 0),
                          lambda: token_batches(src, tgt, items, budget=budget, seed=3, epoch=0)),
        "group_batches": (lambda: group_batches(docs, src, tgt, items, budget, 120),
                          lambda: group_batches(docs, src, tgt, items, budget=budget, group_tokens=120)),
        "sentence_groups": (lambda: sentence_groups(docs, src, items, 120, 0.5, np.random.default_rng(0), True),
                            lambda: sentence_groups(docs, src, items, group_tokens=120, mixed_share=0.5,
                                                    rng=np.random.default_rng(0), shuffle=True)),
        "shared_source_batches": (lambda: shared_source_batches(items, src, tgt, 400),
                                  lambda: shared_source_batches(items, src, tgt, max_tokens=400)),
        "plan_batches": (lambda: inputs_of(cfg("sentence")).plan_batches(ds, ds.indices, budget, 1, 0),
                         lambda: inputs_of(cfg("sentence")).plan_batches(ds, ds.indices, budget=budget, seed=1)),
        "plan_batches (mbe)": (lambda: inputs_of(cfg("mbe")).plan_batches(ds, ds.indices, budget),
                               lambda: inputs_of(cfg("mbe")).plan_batches(ds, ds.indices, budget=budget)),
    }
    for name, (by_position, by_name) in calls.items():
        with pytest.raises(TypeError, match="positional argument"):
            by_position()
        assert len(by_name()), name


def test_group_batches_read_the_bucket_width():
    """Groups are sorted by their widths in buckets, as sentences are: a bucket wider than every group leaves the
    order to the random draw alone, so the batches change (and still hold every group whole)."""
    from ctxmt_cli.data.batching import group_batches

    rng = np.random.default_rng(0)
    docs = np.repeat(np.arange(100), rng.integers(2, 8, 100))
    src, tgt = rng.integers(3, 30, len(docs)), rng.integers(3, 30, len(docs))
    plans = {width: group_batches(docs, src, tgt, np.arange(len(docs)), group_tokens=120, seed=2,
                                  budget=BatchBudget(max_tokens=600, bucket_width=width)) for width in (1, 64)}
    for batches in plans.values():
        assert sorted(np.concatenate([b.indices for b in batches]).tolist()) == list(range(len(docs)))
    assert [b.indices.tolist() for b in plans[1]] != [b.indices.tolist() for b in plans[64]]
    assert group_batches(docs, src, tgt, np.arange(len(docs)), group_tokens=120, seed=2,
                         budget=BatchBudget(max_tokens=600))[0].indices.tolist() == plans[1][0].indices.tolist()
