"""A family kept outside the package (tests/toy_family/, the worked example of docs/architecture.md) joins at run
time and every command reads it: ctxmt train, translate, contrastive and the server, with no file of the package
naming it."""

from __future__ import annotations

import json

import pytest
import yaml

from ctxmt_cli.models.families import FAMILIES, add_family, remove_family
from tests.integration.conftest import ROOT, TINY_SETS, run_cli
from tests.toy_family.config import PrevSrcConfig
from tests.toy_family.model import PrevSrc


@pytest.fixture
def prevsrc():
    add_family(PrevSrcConfig, PrevSrc)
    yield
    remove_family("prevsrc")


def test_a_family_outside_the_package_trains_translates_scores_and_serves(prevsrc, synthetic_dir, two_documents,
                                                                             tmp_path):
    from tests.unit.test_serve_app import serving

    recipe = tmp_path / "prevsrc.yaml"
    recipe.write_text(yaml.safe_dump({"name": "prevsrc", "model": {"family": "prevsrc", "src_context_sentences": 2}}))
    save = tmp_path / "run"
    sets = [f"data.path={synthetic_dir}", f"train.save_dir={save}", *TINY_SETS]
    result = run_cli("train", recipe, *[arg for s in sets for arg in ("--set", s)])
    assert result.exit_code == 0, result.output
    assert "src_window_tokens" in (save / "metrics.jsonl").read_text()       # its loss term, validated
    ckpt = save / "checkpoint_best.pt"
    out = tmp_path / "out.txt"
    result = run_cli("translate", two_documents, "-c", ckpt, "-o", out, "--beam", 2, "--context", 1)
    assert result.exit_code == 0, result.output
    assert len(out.read_text().splitlines()) == len(two_documents.read_text().splitlines())
    result = run_cli("contrastive", "synthetic", "--data", synthetic_dir, "-c", ckpt, "--out", tmp_path / "scores")
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "scores" / "results.json").read_text())["sets"]["synthetic"]["n"] > 0
    with serving(ckpt) as (client, model):
        assert model.family == "prevsrc"
        doc = two_documents.read_text().split("\n\n")[0].splitlines()
        first = client.translate("d", doc[:1])
        second = client.translate("d", doc[1:3])
        assert second["context_sentences"] == 1 and len(first["translations"] + second["translations"]) == 3
        assert first["translations"] + second["translations"] == model.translate([doc[:3]])[0].translations


def test_the_family_leaves_the_schema_with_it(prevsrc):
    from ctxmt_cli.config import validate_recipe
    from ctxmt_cli.errors import CtxmtError

    assert validate_recipe({"model": {"family": "prevsrc"}}).model.src_context_sentences == 1
    remove_family("prevsrc")
    assert "prevsrc" not in FAMILIES
    with pytest.raises(CtxmtError, match="model"):
        validate_recipe({"model": {"family": "prevsrc"}})
    assert (ROOT / "tests" / "toy_family" / "model.py").is_file()
