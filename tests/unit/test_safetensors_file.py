"""ctxmt_cli.models.safetensors_file: a checkpoint round-trips through safetensors; a foreign or damaged file is
one line. Read through :func:`read_checkpoint`, the loader every command uses."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file

from ctxmt_cli.config import recipe_to_dict, validate_recipe
from ctxmt_cli.core.batch import VocabInfo
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.models.families import build_model
from ctxmt_cli.models.loading import load_model, read_checkpoint
from ctxmt_cli.models.safetensors_file import TOKENIZER_PREFIX, is_safetensors, safetensors_bytes
from ctxmt_cli.outputs import torch_save
from ctxmt_cli.train.checkpoint import model_payload, save_checkpoint
from tests.unit.train_fixtures import TINY


@pytest.fixture(scope="module")
def payload(tokenizer) -> dict:
    recipe = validate_recipe({"model": {"family": "sentence", **TINY, "share_embeddings": "all"}})
    vocab = VocabInfo.of(tokenizer)
    torch.manual_seed(0)
    model = build_model(recipe.model, vocab)
    ckpt = model_payload(recipe_to_dict(recipe), tokenizer, vocab, {"src_lang": "src"}, model)
    ckpt.update(state={"step": 2, "best": float("inf"), "history": [{"step": 2, "window_loss": 1.5}]},
                optimizer={"state": {}, "param_groups": []})
    return ckpt


def test_round_trip_keeps_everything_inference_needs(payload, tmp_path):
    pt, st = tmp_path / "m.pt", tmp_path / "m.safetensors"
    torch_save(payload, pt)
    save_checkpoint(payload, st)
    assert is_safetensors(st) and not is_safetensors(pt)
    back = read_checkpoint(st)
    assert back["model"].keys() == payload["model"].keys()
    assert all(torch.equal(back["model"][k], v) for k, v in payload["model"].items())
    for key in ("recipe", "vocab", "vocab_fingerprint", "meta", "tokenizer", "format", "family"):
        assert back[key] == payload[key], key
    assert back["state"]["best"] == float("inf") and back["state"]["history"] == payload["state"]["history"]
    assert "optimizer" not in back                                      # weights for sharing, not for resuming
    a, b = load_model(pt), load_model(st)
    weights = zip(a.model.state_dict().values(), b.model.state_dict().values(), strict=True)
    assert all(torch.equal(x, y) for x, y in weights)


def test_tied_weights_are_stored_once(payload, tmp_path):
    tied = [k for k, v in payload["model"].items() if v.data_ptr() == payload["model"]["src_embed.weight"].data_ptr()]
    assert len(tied) > 1                                            # share_embeddings: all
    data = safetensors_bytes(payload)
    header = json.loads(data[8:8 + int.from_bytes(data[:8], "little")])
    aliases = json.loads(header["__metadata__"]["ctxmt"])["aliases"]
    assert set(tied) - set(header) == set(aliases) and TOKENIZER_PREFIX + "src_model" in header


@pytest.mark.parametrize("metadata,needle", [
    (None, "no 'ctxmt' metadata"), ({"ctxmt": "[" * 5000}, "not JSON"), ({"ctxmt": "[1]"}, "not a JSON object"),
    ({"ctxmt": json.dumps({"aliases": {"a": "missing"}, "tokenizer": {}})}, "alias map"),
])
def test_a_foreign_or_damaged_file_is_one_line(tmp_path, metadata, needle):
    path = tmp_path / "x.safetensors"
    save_file({"w": torch.zeros(2)}, str(path), metadata=metadata)
    with pytest.raises(CtxmtError, match=needle) as err:
        read_checkpoint(path)
    assert "\n" not in str(err.value) and str(path) in str(err.value)


def test_a_truncated_file_is_one_line(payload, tmp_path):
    path = tmp_path / "cut.safetensors"
    path.write_bytes(safetensors_bytes(payload)[:5000])
    with pytest.raises(CtxmtError, match="cannot be read"):
        read_checkpoint(path)
