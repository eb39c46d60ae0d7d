"""What ``ctxmt inspect`` reads from a checkpoint: recipe, family, parameter count, vocabulary, training state."""

from __future__ import annotations

import json

import pytest
import torch

from ctxmt_cli.config import load_recipe, recipe_to_dict
from ctxmt_cli.core.batch import VocabInfo
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.models.checkpoint_info import checkpoint_info, count_parameters
from ctxmt_cli.models.families import build_model, resolve_model_config
from ctxmt_cli.models.loading import load_model
from ctxmt_cli.recipe_catalog import packaged_recipes
from ctxmt_cli.train.checkpoint import average_checkpoints
from ctxmt_cli.train.trainer import train
from tests.unit.train_fixtures import recipe

NOMINAL_META = {"mean_sentence_length": {"src": 20.0, "tgt": 20.0}}


@pytest.fixture(scope="module")
def run(prepared, tmp_path_factory):
    """A tiny concat model trained 6 updates (validations at 3 and 6), and the average of its two step files."""
    save = tmp_path_factory.mktemp("inspect") / "run"
    result = train(recipe(prepared, save, keep_checkpoints=5))
    averaged = average_checkpoints([save / "checkpoint_3.pt", save / "checkpoint_6.pt"], save / "averaged.pt")
    return save, result, averaged


def test_the_meta_device_count_equals_the_built_model_for_every_quickstart_family():
    vocab = VocabInfo(300, 300)
    families = set()
    for entry in packaged_recipes("quickstart"):
        cfg = load_recipe(entry.path)
        if cfg.model.family in families:
            continue
        # a stored recipe is resolved (shift: auto -> the data's mean sentence length): resolve with a nominal one
        cfg = cfg.model_copy(update={"model": resolve_model_config(cfg.model, NOMINAL_META)})
        families.add(cfg.model.family)
        assert count_parameters(cfg, vocab) == build_model(cfg.model, vocab).num_parameters(), entry.name
    assert families == {"sentence", "concat", "caching", "mbe", "hanoit"}


def test_a_trained_checkpoint(run):
    save, result, _ = run
    info = checkpoint_info(save / "checkpoint_last.pt")
    loaded = load_model(save / "checkpoint_last.pt")
    assert info["family"] == "concat" == loaded.recipe.model.family
    assert info["parameters"] == loaded.model.num_parameters() > 0
    assert info["recipe"] == recipe_to_dict(loaded.recipe)
    vocab = info["vocabulary"]
    assert (vocab["source_size"], vocab["target_size"]) == (loaded.tokenizer.src_vocab_size,
                                                            loaded.tokenizer.tgt_vocab_size)
    assert vocab["joint"] is True and vocab["moses"] is False
    assert (vocab["source_language"], vocab["target_language"]) == ("src", "tgt")
    assert vocab["special_ids"] == {"pad": 0, "unk": 1, "bos": 2, "eos": 3, "brk": 4}
    training = info["training"]
    assert (training["step"], training["validations"], training["world_size"]) == (6, 2, 1)
    assert training["best_step"] in (3, 6) and training["best"] == pytest.approx(min(
        r[training["early_stop_on"]] for r in result.history if r["kind"] == "valid"))
    assert training["resumable"] is True and training["averaged_from"] == []
    json.dumps(info, allow_nan=False)                                    # --json is strict JSON


def test_an_averaged_checkpoint_is_weights_only_and_names_its_inputs(run):
    save, _, averaged = run
    training = checkpoint_info(averaged)["training"]
    assert training["resumable"] is False
    assert training["averaged_from"] == [str(save / "checkpoint_3.pt"), str(save / "checkpoint_6.pt")]


def test_missing_corrupt_and_foreign_files_are_one_line(tmp_path):
    (tmp_path / "junk.pt").write_bytes(b"\x00not a checkpoint" * 10)
    torch.save({"weights": torch.zeros(2)}, tmp_path / "foreign.pt")
    for name, needle in (("none.pt", "not found"), ("junk.pt", "not a readable ctxmt checkpoint"),
                         ("foreign.pt", "not a ctxmt checkpoint")):
        with pytest.raises(CtxmtError, match=needle) as err:
            checkpoint_info(tmp_path / name)
        assert "\n" not in str(err.value)
