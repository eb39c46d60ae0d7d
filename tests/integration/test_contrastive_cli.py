"""`ctxmt contrastive` / `score-contrastive` / `contrastive compare` through the CLI, and their user errors."""

from __future__ import annotations

import json

import pytest

from tests.integration.conftest import ROOT, assert_user_error, run_cli, tiny_sets


@pytest.fixture(scope="module")
def sentence_checkpoint(synthetic_dir, tmp_path_factory):
    save = tmp_path_factory.mktemp("cli") / "sentence"
    result = run_cli("train", ROOT / "recipes" / "lupo2022_focused_concat" / "en_de_base.yaml",
                     *tiny_sets(synthetic_dir, save), "--set", "train.early_stop_on=window_loss")
    assert result.exit_code == 0, result.output
    return save / "checkpoint_best.pt"


@pytest.fixture(scope="module")
def two_runs(concat_checkpoint, sentence_checkpoint, synthetic_dir, tmp_path_factory):
    runs = []
    for name, ckpt in (("concat", concat_checkpoint), ("sentence", sentence_checkpoint)):
        out = tmp_path_factory.mktemp("runs") / name
        result = run_cli("contrastive", "synthetic", "--data", synthetic_dir, "-c", ckpt, "--out", out)
        assert result.exit_code == 0, result.output
        runs.append(out)
    return runs


def test_outputs_in_the_publishers_layout(two_runs):
    out = two_runs[0]
    results = json.loads((out / "results.json").read_text())
    n = results["sets"]["synthetic"]["n"]
    decided = [json.loads(line) for line in (out / "synthetic.decisions.jsonl").read_text().splitlines()]
    scores = [float(x) for x in (out / "synthetic.scores").read_text().splitlines()]
    assert len(decided) == n and len(scores) == 2 * n
    # lower = better, correct candidate first: the publisher-style rule gives ctxmt's accuracy
    assert sum(scores[2 * i] < scores[2 * i + 1] for i in range(n)) / n == results["sets"]["synthetic"]["accuracy"]
    assert len(results["checkpoint"]["sha256"]) == 64 and results["sets"]["synthetic"]["checksums"]


def test_compare_prints_mcnemar(two_runs):
    result = run_cli("contrastive", "compare", *two_runs)
    assert result.exit_code == 0, result.output
    assert "McNemar" in result.output and "overall" in result.output and "pronoun" in result.output


def test_alias_span_and_normalize_options(concat_checkpoint, synthetic_dir, tmp_path):
    result = run_cli("score-contrastive", f"synthetic:{synthetic_dir}", "-c", concat_checkpoint, "--out", tmp_path,
                     "--score-span", "current", "--normalize", "none", "--context", "1")
    assert result.exit_code == 0, result.output
    options = json.loads((tmp_path / "results.json").read_text())["options"]
    assert options["span"] == "current" and options["normalize"] == "none" and options["context"] == 1


def test_user_errors(concat_checkpoint, synthetic_dir, two_runs, tmp_path):
    assert_user_error(run_cli("contrastive", "nosuchset", "-c", concat_checkpoint, "--data", tmp_path), "unknown test set")
    assert_user_error(run_cli("contrastive", "synthetic", "-c", concat_checkpoint), "--data")
    assert_user_error(run_cli("contrastive", "synthetic", "--data", synthetic_dir), "--checkpoint")
    assert_user_error(run_cli("contrastive", "jsonl:" + str(tmp_path / "missing.jsonl"), "-c", concat_checkpoint), "not found")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"src": "a", "candidates": ["x", "y"]}\n{"src": "a", "candidates": ["x"\n')
    assert_user_error(run_cli("contrastive", f"jsonl:{bad}", "-c", concat_checkpoint), f"{bad}:2", "malformed JSON")
    bad.write_text('{"src": "a", "candidates": ["x"]}\n')
    assert_user_error(run_cli("contrastive", f"jsonl:{bad}", "-c", concat_checkpoint), ">= 2 candidates")
    before = (two_runs[0] / "results.json").read_text()
    result = run_cli("contrastive", "synthetic", "--data", synthetic_dir, "-c", concat_checkpoint, "--out", two_runs[0])
    assert_user_error(result, "--force")
    assert (two_runs[0] / "results.json").read_text() == before
    assert_user_error(run_cli("contrastive", "compare", two_runs[0]), "RUN_A RUN_B")
    assert_user_error(run_cli("contrastive", "compare", two_runs[0], tmp_path), "decisions")
    assert_user_error(run_cli("contrastive", "synthetic", "--data", synthetic_dir, "-c", concat_checkpoint,
                              "--score-span", "middle"), "span")
