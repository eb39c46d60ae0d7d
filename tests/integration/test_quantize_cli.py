"""``--quantize int8`` (``ctxmt translate``, ``ctxmt serve``, ``api.load``): every family translates in int8 on the
CPU, a trained model's int8 translations stay those of float32 almost everywhere, and what cannot run in int8 is
refused in one line (int8 on CUDA: tests/integration/test_cuda.py)."""

from __future__ import annotations

import pytest
from torch import nn

from ctxmt_cli import api
from ctxmt_cli.models.families import FAMILIES
from tests.integration.conftest import assert_user_error, run_cli
from tests.unit.test_api import write_checkpoint
from tests.unit.train_fixtures import prepare_tiny

DOCUMENTS = [["a b c", "d e", "f"], ["g h", "i"]]


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """A tiny random checkpoint of every family: concat s2to2, a caching memory of 2 sentences, the others'
    defaults."""
    root = tmp_path_factory.mktemp("quantize")
    prepared = prepare_tiny(root)
    specs = {"concat": {"src_context_sentences": 1, "tgt_context_sentences": 1},
             "caching": {"src_context_sentences": 2}}
    return {family: write_checkpoint(prepared, family, root / f"{family}.pt",
                                     {"family": family, **specs.get(family, {})})
            for family in FAMILIES}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_family_translates_in_int8(family, checkpoints):
    model = api.load(checkpoints[family], device="cpu", quantize="int8")
    assert not any(isinstance(m, nn.Linear) for m in model.loaded.model.modules())
    done = model.translate(DOCUMENTS, beam=2)
    assert [len(d.translations) for d in done] == [3, 2]


def test_a_trained_model_translates_about_the_same_in_int8(concat_checkpoint, two_documents, tmp_path):
    outputs = {}
    for name, extra in (("float32", []), ("int8", ["--quantize", "int8"])):
        result = run_cli("translate", two_documents, "-c", concat_checkpoint, "--device", "cpu", "-o",
                         tmp_path / f"{name}.txt", *extra)
        assert result.exit_code == 0, result.output
        outputs[name] = (tmp_path / f"{name}.txt").read_text().splitlines()
    pairs = list(zip(outputs["float32"], outputs["int8"], strict=True))
    same = sum(a == b for a, b in pairs if a)
    assert same >= 0.8 * sum(1 for a, _ in pairs if a), pairs                # the quickstart model is confident


def test_what_int8_cannot_run_is_refused_in_one_line(checkpoints, tmp_path):
    docs = tmp_path / "docs.txt"
    docs.write_text("a b\n")
    ckpt = checkpoints["sentence"]
    assert_user_error(run_cli("translate", docs, "-c", ckpt, "--quantize", "int4"), "--quantize")
    exported = tmp_path / "ct2"
    result = run_cli("export", "ctranslate2", "-c", ckpt, "-o", exported)
    assert result.exit_code == 0, result.output
    assert_user_error(run_cli("translate", docs, "-c", exported, "--engine", "ctranslate2", "--quantize", "int8"),
                      "--quantize", "export the checkpoint again in int8")
    assert not (tmp_path / "out.txt").exists()
