"""`ctxmt contrastive` / `score-contrastive` / `contrastive compare` through the CLI, and their user errors."""

from __future__ import annotations

import json
from pathlib import Path

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


def test_classes_balanced_accuracy_and_context_gain(two_runs, sentence_level_checkpoint, synthetic_dir, tmp_path):
    """Every set reports its accuracy per class and their mean; the context gain (on by default) compares the run
    with the same model's run without context: a model reading context gets both runs' figures and McNemar's p, a
    sentence-level one exactly no gain, and --no-context-gain leaves the second run out."""
    results = json.loads((two_runs[0] / "results.json").read_text())
    res = results["sets"]["synthetic"]
    assert res["class_key"] == "phenomenon/distance" and sum(c["n"] for c in res["by_class"].values()) == res["n"]
    accuracies = [c["accuracy"] for c in res["by_class"].values()]
    assert res["balanced_accuracy"] == pytest.approx(sum(accuracies) / len(accuracies))
    gain = res["context_gain"]
    assert gain["accuracy"] == pytest.approx(res["accuracy"] - gain["without_context"]["accuracy"])
    without = gain["without_context"]
    assert gain["balanced_accuracy"] == pytest.approx(res["balanced_accuracy"] - without["balanced_accuracy"])
    assert 0 < gain["p_exact"] <= 1 and results["options"]["context_gain"] is True
    assert "context_gain" in results["definitions"] and "balanced_accuracy" in results["definitions"]
    result = run_cli("contrastive", "synthetic", "--data", synthetic_dir, "-c", sentence_level_checkpoint, "--out",
                     tmp_path / "sentence")
    assert result.exit_code == 0, result.output
    assert "context gain" in result.stdout and "balanced" in result.stdout and "pronoun/3" in result.stdout
    gain = json.loads((tmp_path / "sentence" / "results.json").read_text())["sets"]["synthetic"]["context_gain"]
    assert gain["accuracy"] == gain["balanced_accuracy"] == 0.0 and gain["p_exact"] == 1.0
    result = run_cli("contrastive", "synthetic", "--data", synthetic_dir, "-c", sentence_level_checkpoint, "--out",
                     tmp_path / "off", "--no-context-gain")
    assert result.exit_code == 0, result.output
    off = json.loads((tmp_path / "off" / "results.json").read_text())
    assert "context_gain" not in off["sets"]["synthetic"] and off["options"]["context_gain"] is False


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
    assert_user_error(run_cli("contrastive", "nosuchset", "-c", concat_checkpoint, "--data", tmp_path),
                      "unknown test set")
    assert_user_error(run_cli("contrastive", "synthetic", "-c", concat_checkpoint), "--data")
    assert_user_error(run_cli("contrastive", "synthetic", "--data", synthetic_dir), "--checkpoint")
    missing = "jsonl:" + str(tmp_path / "missing.jsonl")
    assert_user_error(run_cli("contrastive", missing, "-c", concat_checkpoint), "not found")
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


VOITA = ROOT.parent / "shared" / "data" / "voita_consistency"


def test_a_model_without_the_sets_language_reports_ties_and_unknown_tokens(concat_checkpoint, tmp_path):
    """A model trained on the synthetic languages has no Russian vocabulary: Voita's deixis candidates turn into
    the same unknown tokens, tie, and Voita's rule (first index on ties, true_ind 0) calls that a win."""
    if not VOITA.is_dir():
        pytest.skip(f"real Voita sets not found at {VOITA} (see ../shared/data/README.md)")
    groups = json.loads((VOITA / "deixis_test.json").read_text(encoding="utf-8"))[:60]
    (tmp_path / "deixis_test.json").write_text(json.dumps(groups, ensure_ascii=False), encoding="utf-8")
    result = run_cli("contrastive", f"voita:{tmp_path / 'deixis_test.json'}", "-c", concat_checkpoint,
                     "--out", tmp_path / "out")
    assert result.exit_code == 0, result.output
    res = json.loads((tmp_path / "out" / "results.json").read_text())["sets"]["deixis_test"]
    print(f"synthetic model on 60 deixis groups: accuracy {res['accuracy']:.3f} (first_index), strict "
          f"{res['strict_accuracy']:.3f}, ties {res['ties']}, unknown tgt {res['unknown_share']['tgt']:.3f} "
          f"src {res['unknown_share']['src']:.3f}")
    assert res["n"] == 60 and res["tie_rule"] == "first_index"
    assert res["ties"] > 0.05 * res["n"] and res["unknown_share"]["tgt"] > 0.05
    assert res["accuracy"] - res["strict_accuracy"] == pytest.approx(res["ties"] / res["n"])  # true_ind is 0 throughout
    warnings = [line for line in result.stderr.splitlines() if line.startswith("ctxmt: warning: deixis_test:")]
    assert len(warnings) == 1 and "unknown to the model's vocabulary" in warnings[0] and "are ties" in warnings[0]
    assert "strict" in result.stdout and "unk tgt/src" in result.stdout


@pytest.mark.parametrize("option, owner", [(("--testset-json", "x.json"), "lopes"), (("--split", "valid"), "scat"),
                                           (("--dev",), "voita"), (("--documents", "docs"), "contrapro")])
def test_set_options_belong_to_their_set(option, owner, concat_checkpoint, synthetic_dir):
    """An option of one test set kind is refused for another, never silently ignored."""
    assert_user_error(run_cli("contrastive", "synthetic", "--data", synthetic_dir, "-c", concat_checkpoint, *option),
                      option[0], owner, "'synthetic'")


def test_lopes_without_context_uses_the_file_of_the_models_size(concat_checkpoint, sentence_checkpoint, tmp_path):
    """Without --context the reader takes the cN file of the model's context size: the quickstart-shaped model
    reads 3 sentences (the fixture's largest file, c2, is read whole), the sentence-level one none; --context 1
    reads c1; the current script's order is read with the json found one folder up; --json none: file order."""
    lopes = ROOT / "tests" / "fixtures" / "lopes"
    cases = ((concat_checkpoint, (), ["Tiny.c2.context.src"]),
             (concat_checkpoint, ("--context", "1"), ["Tiny.c1.context.src"]),
             (sentence_checkpoint, (), []))
    for n, (ckpt, args, context_files) in enumerate(cases):
        out = tmp_path / f"out{n}"
        result = run_cli("contrastive", f"lopes:{lopes / 'extracted-current'}", "-c", ckpt, "--out", out, *args)
        assert result.exit_code == 0, result.output
        res = json.loads((out / "results.json").read_text())["sets"]["Tiny"]
        assert res["n"] == 6 and res["strict_accuracy"] == res["accuracy"] and "ties" in res
        read = sorted(Path(path).name for path in res["checksums"])
        assert [name for name in read if ".context." in name and name.endswith(".src")] == context_files
        assert "testset-en-fr.json" in read
    result = run_cli("contrastive", f"lopes:{lopes / 'extracted'}", "-c", concat_checkpoint, "--testset-json", "none")
    assert result.exit_code == 0, result.output
