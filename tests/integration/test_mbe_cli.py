"""The mbe family through the CLI: train with groups, translate in groups, the Figure 4 sweep, contrastive scoring."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.conftest import assert_user_error, run_cli, tiny_sets


@pytest.fixture(scope="module")
def mbe_checkpoint(synthetic_dir, tmp_path_factory) -> Path:
    save = tmp_path_factory.mktemp("mbe") / "mbe"
    result = run_cli("train", "quickstart/mbe", *tiny_sets(synthetic_dir, save))   # a packaged recipe, by name
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (save / "metrics.jsonl").read_text().splitlines()]
    valid = [r for r in rows if r["kind"] == "valid"]
    assert valid
    assert all(k in valid[-1] for k in ("classifier_loss", "classifier_accuracy", "alpha_same", "alpha_mixed"))
    return save / "checkpoint_best.pt"


def test_translate_in_groups(mbe_checkpoint, two_documents, tmp_path):
    lines = two_documents.read_text().splitlines()
    for extra in ([], ["--group-sentences", "2"], ["--group-sentences", "3", "--group-order", "length"]):
        out = tmp_path / f"out{len(extra)}.txt"
        result = run_cli("translate", two_documents, "-c", mbe_checkpoint, "-o", out, "--beam", "2", *extra)
        assert result.exit_code == 0, result.output
        hyp = out.read_text().splitlines()
        assert len(hyp) == len(lines)
        assert [i for i, s in enumerate(lines) if not s.strip()] == [i for i, h in enumerate(hyp) if not h.strip()]
    assert_user_error(run_cli("translate", two_documents, "-c", mbe_checkpoint, "--group-order", "random"),
                      "--group-order")


def test_evaluate_sweeps_sentences_per_group(mbe_checkpoint, synthetic_dir, tmp_path):
    out = tmp_path / "sweep.json"
    result = run_cli("evaluate", "-c", mbe_checkpoint, "--data", synthetic_dir, "--group-sentences", "1,all",
                     "--beam", "1", "--out", out)
    assert result.exit_code == 0, result.output
    assert "sentences per group N" in result.stdout
    by = json.loads(out.read_text())["by_group_sentences"][str(mbe_checkpoint)]
    assert list(by) == ["1", "all"] and all(0 <= row["BLEU"] <= 100 for row in by.values())
    assert out.with_suffix(".group_sentences.png").stat().st_size > 0
    assert_user_error(run_cli("evaluate", "-c", mbe_checkpoint, "--data", synthetic_dir, "--group-sentences", "0"),
                      "--group-sentences")


def test_group_sentences_refused_for_other_models(concat_checkpoint, synthetic_dir, two_documents):
    assert_user_error(run_cli("translate", two_documents, "-c", concat_checkpoint, "--group-sentences", "2"),
                      "does not read sentence groups")
    assert_user_error(run_cli("translate", two_documents, "-c", concat_checkpoint, "--group-order", "length"),
                      "--group-order length", "does not read sentence groups")
    assert_user_error(run_cli("evaluate", "-c", concat_checkpoint, "--data", synthetic_dir, "--group-sentences",
                              "1,all"), "does not read sentence groups")


def test_contrastive_scoring_reads_the_items_context_as_the_group(mbe_checkpoint, synthetic_dir, tmp_path):
    result = run_cli("contrastive", "synthetic", "--data", synthetic_dir, "-c", mbe_checkpoint, "--out", tmp_path)
    assert result.exit_code == 0, result.output
    sets = json.loads((tmp_path / "results.json").read_text())["sets"]
    assert all(0 <= s["accuracy"] <= 1 for s in sets.values())
