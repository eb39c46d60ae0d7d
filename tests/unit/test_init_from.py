"""train.init_from's pieces: matching tensors by name and shape, the architecture the checkpoint imposes, the
vocabulary check (the CLI end to end: tests/integration/test_init_from_cli.py; update 0 per family: the
contract suite)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from ctxmt_cli.config import validate_recipe
from ctxmt_cli.core.batch import VocabInfo
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.models.families import build_model
from ctxmt_cli.train.init_from import ARCHITECTURE, InitRecord, adopt_architecture, check_vocabulary, load_matching

VOCAB = VocabInfo(src_size=40, tgt_size=40)
SMALL = {"preset": None, "d_model": 32, "ffn_dim": 64, "heads": 4, "encoder_layers": 2, "decoder_layers": 2}


def model(family: str, **spec):
    torch.manual_seed(0)
    return build_model(validate_recipe({"model": {**SMALL, "family": family, **spec}}).model, VOCAB)


def parent(family: str = "sentence", fingerprint: str = "abc", **spec) -> SimpleNamespace:
    """What adopt_architecture and check_vocabulary read of a checked checkpoint."""
    recipe = validate_recipe({"model": {**SMALL, "family": family, **spec}})
    return SimpleNamespace(path=Path("parent.pt"), recipe=recipe, raw={"vocab_fingerprint": fingerprint})


def test_load_matching_copies_shared_tensors_and_reports_the_rest():
    source, target = model("sentence"), model("mbe")
    before = {k: v.clone() for k, v in target.state_dict().items()}
    loaded, new, skipped = load_matching(target, source.state_dict(), Path("s.pt"))
    assert loaded == len(source.state_dict()) and skipped == []
    assert new and all(k.startswith(("summary_", "classifier")) for k in new)
    for name, tensor in target.state_dict().items():
        expected = source.state_dict()[name] if name in source.state_dict() else before[name]
        assert torch.equal(tensor, expected), name
    loaded, new, skipped = load_matching(model("sentence"), target.state_dict(), Path("m.pt"))
    assert sorted(skipped) == sorted(k for k in target.state_dict() if k not in source.state_dict())


def test_a_shape_mismatch_names_the_parameter():
    state = model("sentence").state_dict()
    state["encoder_layers.0.ffn.fc1.weight"] = torch.zeros(3, 3)
    with pytest.raises(CtxmtError, match=r"encoder_layers\.0\.ffn\.fc1\.weight has shape \(3, 3\)"):
        load_matching(model("sentence"), state, Path("bad.pt"))


def test_the_checkpoints_architecture_wins_and_each_change_is_reported():
    recipe = validate_recipe({"model": {"family": "concat", "preset": "small"}})
    adopted, changes = adopt_architecture(recipe, parent(normalize_before=False))
    assert {k: getattr(adopted.model, k) for k in ARCHITECTURE} == {
        k: getattr(parent(normalize_before=False).recipe.model, k) for k in ARCHITECTURE}
    assert changes["d_model"] == [256, 32] and changes["normalize_before"] == [True, False]
    assert "heads" not in changes and adopted.model.preset is None
    assert adopted.model.src_context_sentences == recipe.model.src_context_sentences   # the family's own options


@pytest.mark.parametrize(("n1", "n2", "layers", "fitted"), [(1, 5, 2, (1, 1)), (6, 0, 2, (2, 0)), (1, 1, 2, (1, 1)),
                                                           (1, 2, 6, (1, 5))])
def test_hanoit_fits_its_layer_split_to_the_checkpoints_depth(n1, n2, layers, fitted):
    recipe = validate_recipe({"model": {**SMALL, "family": "hanoit", "encoder_layers": n1 + n2, "unified_layers": n1,
                                        "selection_layers": n2}})
    adopted, changes = adopt_architecture(recipe, parent(encoder_layers=layers))
    assert (adopted.model.unified_layers, adopted.model.selection_layers) == fitted
    assert ("selection_layers" in changes) == (fitted[1] != n2)


def test_another_vocabulary_is_refused():
    check_vocabulary(parent(fingerprint="abc"), "abc", "data")
    with pytest.raises(CtxmtError, match="vocabulary fingerprint abc.*data.path data has def"):
        check_vocabulary(parent(fingerprint="abc"), "def", "data")


def test_the_record_summarises_in_one_line():
    record = InitRecord(path="s.pt", sha256="0" * 64, family="sentence", step=4000, vocab_fingerprint="abc",
                        loaded=99, new=["segment.weight"], skipped=[])
    assert record.summary() == "init_from s.pt (sentence, step 4000): loaded 99 tensors, new 1, skipped 0"
    assert InitRecord(**record.to_dict()) == record
