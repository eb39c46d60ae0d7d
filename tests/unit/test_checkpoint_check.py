"""ctxmt_cli.models.checkpoint_check: every field a loader reads is checked once, each flaw one line."""

from __future__ import annotations

import copy

import pytest
import torch

from ctxmt_cli.config import recipe_to_dict, validate_recipe
from ctxmt_cli.core.batch import VocabInfo
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.models.checkpoint_check import check_checkpoint
from ctxmt_cli.models.families import build_model
from ctxmt_cli.train.checkpoint import model_payload
from tests.unit.train_fixtures import TINY


@pytest.fixture(scope="module")
def payload(tokenizer) -> dict:
    """A checkpoint as training writes it (untrained weights: the structure is what counts here)."""
    recipe = validate_recipe({"model": {"family": "concat", **TINY}})
    vocab = VocabInfo.of(tokenizer)
    torch.manual_seed(0)
    model = build_model(recipe.model, vocab)
    ckpt = model_payload(recipe_to_dict(recipe), tokenizer, vocab, {"src_lang": "src"}, model)
    ckpt["state"] = {"step": 3, "best": float("inf"), "best_step": None, "history": []}
    return ckpt


def test_a_sound_checkpoint_passes_with_its_parts_built(payload, tokenizer):
    checked = check_checkpoint(payload, "ck.pt")
    assert checked.raw is payload and checked.recipe.model.family == "concat"
    assert checked.vocab == VocabInfo.of(tokenizer)
    assert checked.tokenizer.fingerprint() == tokenizer.fingerprint()


def _drop(key):
    return lambda c: c.pop(key)


def _set(*path, value):
    def change(c):
        for key in path[:-1]:
            c = c[key]
        c[path[-1]] = value
    return change


FLAWS = [
    (lambda c: c.clear(), "not a ctxmt checkpoint (none of model/recipe/vocab/tokenizer inside)"),
    (_drop("model"), "no 'model' (the model weights)"),
    (_drop("recipe"), "no 'recipe' (the resolved recipe)"),
    (_drop("vocab"), "no 'vocab' (the vocabulary record)"),
    (_drop("tokenizer"), "no 'tokenizer' (the SentencePiece model(s))"),
    (_set("vocab", value=(1, 2)), "'vocab' is a tuple, not a vocabulary record"),
    (_set("vocab", "src_size", value=True), "'vocab.src_size' is True, not an index"),
    (_set("vocab", "pad", value=-1), "'vocab.pad' is -1"),
    (_set("vocab", "extra", value=1), "unknown fields ['extra']"),
    (_set("vocab", "tgt_size", value=7), "vocabulary record"),
    (_set("tokenizer", value="spm"), "'tokenizer' is a str"),
    (_set("tokenizer", "src_model", value=None), "'tokenizer.src_model' is missing"),
    (_set("tokenizer", "moses", value="no"), "'tokenizer.moses' is a str"),
    (_set("tokenizer", "user_symbols", value=[1]), "user_symbols"),
    (_set("tokenizer", "src_model", value=b"\x00" * 40), "SentencePiece model is corrupt"),
    (_set("recipe", value=[]), "'recipe' is a list, not a recipe mapping"),
    (_set("recipe", "train", "lr", value=0), "stored recipe): train.lr"),
    (_set("family", value="mbe"), "'family' says mbe but its recipe builds concat"),
    (_set("format", value=99), "checkpoint format 99"),
    (_set("meta", value=[]), "'meta' is a list"),
    (_set("meta", "tgt_lang", value=7), "'meta.tgt_lang' is an int"),
    (_set("meta", "docrepair", value={"group_size": "four"}), "'meta.docrepair.group_size' is 'four'"),
    (_set("state", "history", value=5), "'state.history' is an int"),
    (_set("state", "best", value="low"), "'state.best' is a str"),
    (_set("state", "recipe_history", value=[{"step": 1, "changed": {"train.lr": 3}}]), "'state.recipe_history'"),
    (_set("model", value=[1]), "'model' is not a mapping of parameter names to tensors"),
    (_set("model", "src_embed.weight", value=[0.0]), "'model' is not a mapping"),
    (_set("model", "bogus", value=torch.zeros(1)), "1 unexpected tensors (e.g. bogus)"),
    (_set("recipe", "model", "ffn_dim", value=128), "weights do not fit the concat model"),
]


@pytest.mark.parametrize("change,needle", FLAWS)
def test_each_flaw_is_one_line_naming_the_file(payload, change, needle):
    ckpt = copy.deepcopy(payload)
    change(ckpt)
    with pytest.raises(CtxmtError) as err:
        check_checkpoint(ckpt, "run/ck.pt")
    assert str(err.value).startswith("run/ck.pt") and needle in str(err.value), str(err.value)
    assert "\n" not in str(err.value)


def test_a_non_mapping_is_named_by_its_type():
    with pytest.raises(CtxmtError, match=r"ck.pt is not a ctxmt checkpoint \(it holds a list"):
        check_checkpoint([1, 2], "ck.pt")
