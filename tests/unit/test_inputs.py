"""The inputs contract (ctxmt_cli/models/inputs.py): each family's answers, and the plain defaults it overrides.

The behaviour behind each answer (windows, batches, translation, scoring, the server) is tested where it runs;
here: that every family answers through its inputs class, what each answer is, and that the refusals are one
line naming the option.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ctxmt_cli.config import validate_recipe
from ctxmt_cli.core.batch import Batch, VocabInfo
from ctxmt_cli.data.batching import BatchBudget
from ctxmt_cli.data.store import MemorySplit
from ctxmt_cli.data.windows import WindowDataset, WindowSpec
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.models.families import FAMILIES, inputs_of
from ctxmt_cli.models.inputs import TRANSLATIONS, Inputs

TINY = {"preset": None, "d_model": 32, "ffn_dim": 64, "heads": 4, "encoder_layers": 2, "decoder_layers": 1}


def cfg(family: str, **spec):
    return validate_recipe({"model": {**TINY, "family": family, **spec}}).model


def test_every_family_names_an_inputs_class():
    for name, family in FAMILIES.items():
        assert issubclass(family.inputs, Inputs), name
        assert isinstance(inputs_of(cfg(name)), family.inputs)


def test_context_sizes_and_their_refusals():
    assert inputs_of(cfg("sentence")).context() == (0, 0)
    with pytest.raises(CtxmtError, match="context=2: this sentence model reads no context"):
        inputs_of(cfg("sentence")).context(2)
    concat = inputs_of(cfg("concat", src_context_sentences=2, tgt_context_sentences=0))
    assert concat.context() == (2, 0) and concat.context(4) == (4, 0) and concat.next_sentences() == 0
    with pytest.raises(CtxmtError, match="reads no next sentences"):
        concat.next_sentences(1)
    offline = inputs_of(cfg("hanoit", src_context_sentences=0, src_next_sentences=1))
    assert offline.context(2) == (0, 0)                       # a model reading only next sentences resizes too
    assert offline.next_sentences() == 1 and offline.next_sentences(3) == 3 and offline.resized_next(2) == 2
    online = inputs_of(cfg("hanoit", src_context_sentences=1, src_next_sentences=0))
    assert online.resized_next(4) == 0
    with pytest.raises(CtxmtError, match="src_next_sentences=1"):
        online.next_sentences(1)


def test_group_options_are_read_by_mbe_alone():
    mbe = inputs_of(cfg("mbe"))
    mbe.check_groups(2, "length")
    assert mbe.kept_sentences(3, None) == {"group": 3}
    assert mbe.kept_sentences(None, None) == {"max_sentences": 1024}
    assert mbe.kept_sentences(None, 7) == {"max_sentences": 7}
    assert mbe.scoring_context(None, 5) == (5, 0) and mbe.scoring_context(0, 5) == (0, 0)
    concat = inputs_of(cfg("concat", src_context_sentences=2, tgt_context_sentences=2))
    with pytest.raises(CtxmtError, match="group_sentences=2: this concat model does not read sentence groups"):
        concat.check_groups(2)
    with pytest.raises(CtxmtError, match="group_order='length'"):
        concat.check_groups(None, "length")
    with pytest.raises(CtxmtError, match="max_document_sentences=7"):
        concat.kept_sentences(None, 7)
    assert concat.kept_sentences(None, None) == {"window": 2}
    assert concat.scoring_context(None, 5) == (2, 2)


def test_first_pass_is_read_by_the_bilingual_model_alone():
    bilingual = inputs_of(cfg("hanoit", bilingual=True))
    assert bilingual.target_concat and not inputs_of(cfg("hanoit")).target_concat
    with pytest.raises(CtxmtError, match="give `first_pass`"):
        bilingual.check_first_pass([["a"]], None)
    bilingual.check_first_pass([["a"]], [["b"]])
    for name in ("sentence", "concat", "caching", "mbe", "hanoit"):
        assert not inputs_of(cfg(name)).target_concat
        with pytest.raises(CtxmtError, match="reads no target context"):
            inputs_of(cfg(name)).check_first_pass([["a"]], [["b"]])


def test_each_family_declares_how_it_translates_a_document():
    for name in FAMILIES:
        assert inputs_of(cfg(name)).translation() in TRANSLATIONS, name
    declared = {"sentence": "slots", "concat": "slots", "hanoit": "slots", "caching": "memory", "mbe": "groups"}
    assert {name: inputs_of(cfg(name)).translation() for name in declared} == declared
    assert inputs_of(cfg("hanoit", bilingual=True)).translation() == "first_pass"
    assert inputs_of(cfg("caching", bilingual=True)).translation() == "first_pass"   # its memory would need one too


def dataset(pairs_per_doc=(5, 3, 6)):
    rng = np.random.default_rng(0)
    docs = [[(list(rng.integers(5, 30, rng.integers(2, 7))), list(rng.integers(5, 30, rng.integers(2, 7))))
             for _ in range(n)] for n in pairs_per_doc]
    return WindowDataset(MemorySplit(docs), WindowSpec(1, 1, 64), 4, 3)


def test_batch_plans_rows_by_default_and_whole_groups_for_mbe():
    ds = dataset()
    rows = inputs_of(cfg("sentence")).plan_batches(ds, ds.indices, budget=BatchBudget(max_tokens=40), seed=1)
    assert sorted(np.concatenate(rows).tolist()) == ds.indices.tolist()
    mbe = inputs_of(cfg("mbe", group_tokens=64, mixed_groups=0.0))
    plans = mbe.plan_batches(ds, ds.indices, budget=BatchBudget(max_tokens=200), seed=1, shuffle=False)
    doc = np.asarray(ds.split.doc_index)
    for plan in plans:                                           # every group holds one document's sentences
        for g in np.unique(plan.groups):
            assert len(np.unique(doc[plan.indices[plan.groups == g]])) == 1
    assert inputs_of(cfg("mbe")).mixed_share == 0.5
    assert inputs_of(cfg("mbe", gate=False, mixed_groups=0.0)).mixed_share == 0


def test_scoring_batches_become_groups_for_mbe():
    vocab = VocabInfo(40, 40)
    src = Batch(src=torch.tensor([[5, 6, 4, 7, 3], [8, 3, 0, 0, 0]]), tgt_out=torch.tensor([[9, 3], [9, 3]]))
    plain = inputs_of(cfg("sentence")).scoring_batch(src, vocab)
    assert plain is src and plain.extras is None
    grouped = inputs_of(cfg("mbe")).scoring_batch(Batch(src=src.src.clone(), tgt_out=src.tgt_out), vocab)
    assert grouped.src.tolist() == [[5, 6, 3], [7, 3, 0], [8, 3, 0]]     # each window's sentences, each + </s>
    assert grouped.extras.groups.tolist() == [0, 0, 1] and grouped.src_index.tolist() == [1, 2]


def test_a_target_context_model_reads_its_target_concatenation_as_its_source():
    """context_side: target (§3.5's target mono-lingual context): the rows it reads are the target side of the
    context sentences, then the current source sentence, in Batch.src (nothing beside it); the batch budget counts
    those rows; a translation step and a scoring batch read the same, a scoring row without context its sentence
    alone."""
    from ctxmt_cli.data.target_concat import ReferenceSide, TargetConcat
    from ctxmt_cli.models.hanoit.inputs import TargetContextWindows

    inputs = inputs_of(cfg("hanoit", context_side="target", target_context_from="reference"))
    assert inputs.target_concat
    split = dataset().split
    ds = TargetContextWindows(split, WindowSpec(1, 0, 64, src_next_sentences=1), 4, 3,
                              TargetConcat(ReferenceSide(split)))
    batch = inputs.collate(ds, ds.indices, VocabInfo(40, 40))
    starts = np.asarray(split.doc_offsets)[np.asarray(split.doc_index)]
    ends = np.asarray(split.doc_offsets)[np.asarray(split.doc_index) + 1]
    for row, j in enumerate(batch.ids.tolist()):
        before = [split.tgt(j - 1).tolist() + [4]] if j > starts[j] else []
        after = [split.tgt(j + 1).tolist() + [4]] if j + 1 < ends[j] else []
        expected = sum(before + after, []) + split.src(j).tolist() + [3]
        assert batch.src[row][batch.src[row] != 0].tolist() == expected
        assert batch.src_next[row].item() == len(after) and ds.src_len[j] == len(expected)
    assert batch.extras is None
    sentence = Batch(src=torch.tensor([[5, 6, 4, 7, 3], [8, 3, 0, 0, 0]]), tgt_out=torch.tensor([[9, 3], [9, 3]]))
    scored = inputs.scoring_batch(sentence, VocabInfo(40, 40), [np.array([20, 21, 4, 7, 3]), np.zeros(0, np.int64)])
    assert scored.src.tolist() == [[20, 21, 4, 7, 3], [8, 3, 0, 0, 0]] and scored.extras is None
