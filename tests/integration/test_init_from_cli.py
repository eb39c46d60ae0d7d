"""``ctxmt train RECIPE --init-from CKPT`` (``train.init_from``): every family started from a sentence-level model,
weights only, the checkpoint's architecture, the load report and lineage, and the one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from ctxmt_cli.outputs import file_sha256
from ctxmt_cli.ownership import MANIFEST
from tests.integration.conftest import ROOT, assert_user_error, run_cli, tiny_sets

QUICKSTART = ROOT / "recipes" / "quickstart"
#: a short fine-tune: the run's own budget and schedule, on the synthetic data
SHORT = ["--set", "train.max_steps=2", "--set", "train.valid_every=2", "--set", "train.warmup_steps=1",
         "--set", "train.log_every=1", "--set", "data.max_tokens=400"]


@pytest.fixture(scope="module")
def sentence_run(synthetic_dir, tmp_path_factory) -> Path:
    """A tiny sentence-level model (quickstart/sentence at d 32, 1 + 1 layers, 4 updates)."""
    save = tmp_path_factory.mktemp("init") / "sentence"
    result = run_cli("train", QUICKSTART / "sentence.yaml", *tiny_sets(synthetic_dir, save))
    assert result.exit_code == 0, result.output
    return save


def fine_tune(recipe: str, parent: Path, data: Path, save: Path, *extra: str):
    """``ctxmt train quickstart/RECIPE --init-from PARENT`` for two updates into ``save``."""
    return run_cli("train", QUICKSTART / f"{recipe}.yaml", "--init-from", parent, "--set", f"data.path={data}",
                   "--set", f"train.save_dir={save}", *SHORT, "--log-format", "plain", *extra)


def load(path: Path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=True)


@pytest.mark.parametrize("recipe", ["concat", "caching_tokens", "grouping", "mbe", "hanoit", "hanoit_6_0", "sentence"])
def test_every_family_starts_from_a_sentence_model(recipe, sentence_run, synthetic_dir, tmp_path):
    parent = sentence_run / "checkpoint_best.pt"
    result = fine_tune(recipe, parent, synthetic_dir, tmp_path / "run")
    assert result.exit_code == 0, result.output
    parent_state = load(parent)["model"]
    report = [line for line in result.output.splitlines() if line.startswith(f"init_from {parent}")]
    assert report == [f"init_from {parent} (sentence, step 4): loaded {len(parent_state)} tensors, "
                      f"new {report[0].split('new ')[1].split(',')[0]}, skipped 0"], result.output
    ckpt = load(tmp_path / "run" / "checkpoint_last.pt")
    assert ckpt["recipe"]["model"]["d_model"] == 32 and ckpt["recipe"]["model"]["encoder_layers"] == 1
    assert ckpt["recipe"]["train"]["init_from"] == str(parent)
    # weights only: the run's own counters and optimiser (two Adam steps, not the parent's four plus two)
    assert ckpt["state"]["step"] == 2
    assert {int(s["step"]) for s in ckpt["optimizer"]["state"].values()} == {2}
    record = ckpt["init_from"]
    assert record["sha256"] == file_sha256(parent) and record["loaded"] == len(parent_state)
    assert set(record["new"]) == set(ckpt["model"]) - set(parent_state)
    manifest = json.loads((tmp_path / "run" / MANIFEST).read_text())
    assert manifest["init_from"] == record
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [row["init_from"] for row in rows if row.get("kind") == "message"] == [record]
    start = [row for row in rows if row.get("start")]              # where the run stands before its first update
    assert len(start) == 1 and start[0]["step"] == 0 and start[0]["kind"] == "valid"
    if recipe == "sentence":                                       # the very model the parent's best validation saw
        parent_rows = [json.loads(line) for line in (sentence_run / "metrics.jsonl").read_text().splitlines()]
        best = load(parent)["state"]["best_step"]
        before = next(r for r in parent_rows if r.get("kind") == "valid" and r["step"] == best)
        assert start[0]["current_loss"] == pytest.approx(before["current_loss"], abs=1e-6)


def test_loaded_tensors_are_the_parents_and_new_ones_a_fresh_runs(sentence_run, synthetic_dir, tmp_path):
    """With a learning rate too small to move anything, the fine-tuned model holds the parent's tensors and, for
    what the family adds, the tensors of a run from scratch with the same seed."""
    parent = sentence_run / "checkpoint_best.pt"
    frozen = ["--set", "train.lr=1e-12"]
    assert fine_tune("mbe", parent, synthetic_dir, tmp_path / "started", *frozen).exit_code == 0
    scratch = run_cli("train", QUICKSTART / "mbe.yaml", *tiny_sets(synthetic_dir, tmp_path / "scratch"), *SHORT,
                      *frozen)
    assert scratch.exit_code == 0, scratch.output
    started, fresh = (load(tmp_path / d / "checkpoint_last.pt")["model"] for d in ("started", "scratch"))
    parent_state = load(parent)["model"]
    for name, tensor in started.items():
        expected = parent_state[name] if name in parent_state else fresh[name]
        torch.testing.assert_close(tensor, expected, atol=1e-6, rtol=0, msg=name)


def test_lineage_chains_and_survives_resume(sentence_run, synthetic_dir, tmp_path):
    parent = sentence_run / "checkpoint_best.pt"
    assert fine_tune("concat", parent, synthetic_dir, tmp_path / "concat").exit_code == 0
    child = tmp_path / "concat" / "checkpoint_last.pt"
    assert fine_tune("caching_tokens", child, synthetic_dir, tmp_path / "caching").exit_code == 0
    kept = tmp_path / "kept.pt"
    child.rename(kept)                 # a resume reads its own checkpoints, not the one it started from
    resumed = fine_tune("caching_tokens", child, synthetic_dir, tmp_path / "caching", "--resume",
                        "--allow-changed", "train.max_steps", "--set", "train.max_steps=4")
    kept.rename(child)
    assert resumed.exit_code == 0, resumed.output
    assert "loaded" not in resumed.output                   # a resume restores its own weights, nothing else
    result = run_cli("inspect", "-c", tmp_path / "caching" / "checkpoint_last.pt", "--json")
    assert result.exit_code == 0, result.output
    info = json.loads(result.stdout)
    assert info["training"]["step"] == 4
    chain = info["training"]["init_from"]
    assert [(c["path"], c["family"], c["sha256"]) for c in chain] == [
        (str(child), "concat", file_sha256(child)), (str(parent), "sentence", file_sha256(parent))]
    table = run_cli("inspect", "-c", tmp_path / "caching" / "checkpoint_last.pt")
    assert "started from" in table.stdout and "which started from" in table.stdout


def test_recipe_sizes_give_way_to_the_checkpoints(sentence_run, synthetic_dir, tmp_path):
    result = run_cli("train", QUICKSTART / "hanoit.yaml", "--init-from", sentence_run / "checkpoint_best.pt",
                     "--set", f"data.path={synthetic_dir}", "--dry-run")
    assert result.exit_code == 0, result.output
    notes = [line for line in result.output.splitlines() if "architecture comes from the checkpoint" in line]
    assert len(notes) == 1
    for change in ("d_model 32 (recipe 128)", "encoder_layers 1 (recipe 6)", "selection_layers 0 (recipe 5)"):
        assert change in notes[0], notes[0]


def test_a_checkpoint_of_another_vocabulary_is_one_line(sentence_run, tmp_path):
    other = tmp_path / "other"
    assert run_cli("prepare", "synthetic", "--out", other, "--docs", 41, "--seed", 7,
                   "--vocab-size", 200).exit_code == 0
    result = fine_tune("concat", sentence_run / "checkpoint_best.pt", other, tmp_path / "run")
    assert_user_error(result, "train.init_from", "vocabulary fingerprint", str(other))
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("what", ["missing", "not a checkpoint"])
def test_a_bad_init_from_is_one_line(what, synthetic_dir, tmp_path):
    path = tmp_path / "model.pt"
    if what == "not a checkpoint":
        path.write_text("hello")
    result = fine_tune("concat", path, synthetic_dir, tmp_path / "run")
    assert_user_error(result, "train.init_from", str(path))
    assert not (tmp_path / "run").exists()
