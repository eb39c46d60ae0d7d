"""Checkpoints: atomic writes, pruning, averaging, RNG round trip, rebuilding a model from a file alone."""

import pickle
import random
import shutil

import numpy as np
import pytest
import torch

from ctxmt_cli.core.batch import Batch
from ctxmt_cli.data.windows import WindowDataset
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.models.loading import load_model, read_checkpoint
from ctxmt_cli.outputs import TEMP_TAG, copy_atomic, torch_save
from ctxmt_cli.train.checkpoint import (
    TMP_PREFIX,
    average_checkpoints,
    averaging_steps,
    capture_rng,
    last_steps,
    prune_checkpoints,
    restore_rng,
    step_checkpoints,
)
from ctxmt_cli.train.trainer import train
from tests.unit.train_fixtures import assert_same_weights, copy_prepared, recipe, weights


def no_temp_files(directory):
    return [p.name for p in directory.iterdir() if p.name.startswith(TMP_PREFIX) or TEMP_TAG in p.name] == []


def test_atomic_save_replaces_and_leaves_no_temp(tmp_path):
    target = tmp_path / "ck.pt"
    torch_save({"x": torch.ones(2)}, target)
    torch_save({"x": torch.zeros(2)}, target)
    assert torch.equal(torch.load(target, weights_only=True)["x"], torch.zeros(2))
    copy_atomic(target, tmp_path / "copy.pt")
    assert (tmp_path / "copy.pt").read_bytes() == target.read_bytes()
    assert no_temp_files(tmp_path)


def test_failed_write_keeps_the_old_file_and_no_temp(tmp_path):
    target = tmp_path / "ck.pt"
    torch_save({"x": torch.ones(2)}, target)
    before = target.read_bytes()
    with pytest.raises((pickle.PicklingError, AttributeError)):
        torch_save({"bad": lambda: None}, target)                         # unpicklable
    assert target.read_bytes() == before
    assert no_temp_files(tmp_path)


def test_rng_round_trip():
    state = capture_rng()
    a = (torch.rand(3), np.random.rand(3), random.random())
    restore_rng(state)
    b = (torch.rand(3), np.random.rand(3), random.random())
    assert torch.equal(a[0], b[0]) and np.array_equal(a[1], b[1]) and a[2] == b[2]


def test_prune_keeps_newest_best_and_averaging_window(tmp_path):
    for step in (10, 20, 30, 40, 50, 60, 70):
        torch_save({"step": step}, tmp_path / f"checkpoint_{step}.pt")
    prune_checkpoints(tmp_path, keep=2, best_step=20, average_n=2)
    assert sorted(step_checkpoints(tmp_path)) == [20, 30, 40, 60, 70]
    assert averaging_steps([20, 30, 40, 60, 70], 20, 2) == [20, 30, 40]
    assert averaging_steps([20, 30], 30, 5) == [30]                        # fewer when not there
    assert averaging_steps([20, 30], None, 5) == []


def test_read_checkpoint_errors(tmp_path):
    with pytest.raises(CtxmtError, match="checkpoint not found"):
        read_checkpoint(tmp_path / "missing.pt")
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(CtxmtError, match="not a readable ctxmt checkpoint"):
        read_checkpoint(tmp_path / "junk.pt")


@pytest.fixture(scope="module")
def run(prepared, tmp_path_factory):
    """A short run (6 updates, checkpoints at 3 and 6, averaging best + 1) on a private copy of the data."""
    root = tmp_path_factory.mktemp("ckrun")
    data = copy_prepared(prepared, root / "data")
    result = train(recipe(data, root / "run", average_checkpoints=1, patience=0), show_progress=False)
    return root, data, result


def test_run_writes_self_contained_checkpoints(run):
    root, _, result = run
    ck = read_checkpoint(result.last)
    for key in ("model", "optimizer", "state", "rng", "recipe", "tokenizer", "vocab", "vocab_fingerprint",
                "meta", "version", "family"):
        assert key in ck, key
    assert ck["family"] == "concat" and ck["state"]["step"] == 6
    assert ck["recipe"]["model"]["shift"] is None and "source" not in ck["meta"]
    assert no_temp_files(root / "run")


def test_average_equals_mean_of_weights(run, tmp_path):
    root, _, result = run
    paths = [root / "run" / "checkpoint_3.pt", root / "run" / "checkpoint_6.pt"]
    out = average_checkpoints(paths, tmp_path / "avg.pt")
    a, b, avg = weights(paths[0]), weights(paths[1]), weights(out)
    for key in avg:
        torch.testing.assert_close(avg[key], (a[key] + b[key]) / 2, rtol=0, atol=1e-7)
    assert "optimizer" not in read_checkpoint(out)
    # the run averaged the best and the step checkpoints that follow it
    best_step = read_checkpoint(result.best)["state"]["best_step"]
    expected = [best_step] + [s for s in (3, 6) if s > best_step][:1]
    trained = weights(result.averaged)
    mean = {k: sum(weights(root / "run" / f"checkpoint_{s}.pt")[k].double() for s in expected) / len(expected)
            for k in trained}
    for key in trained:
        torch.testing.assert_close(trained[key], mean[key].float(), rtol=0, atol=1e-7)


def test_load_model_from_the_checkpoint_alone(run):
    root, data, result = run
    from ctxmt_cli.data.batching import window_batch
    from ctxmt_cli.data.store import PreparedData
    from ctxmt_cli.data.windows import WindowDataset, WindowSpec

    prep = PreparedData(data)
    ds = WindowDataset(prep.split("valid"), WindowSpec(1, 1, 1024), prep.tokenizer.brk_id, prep.tokenizer.eos_id)
    batch = window_batch(ds, ds.indices[:5], 0, 2)
    first = load_model(result.best)
    expected = first.model(batch).logits
    shutil.rmtree(data)                                                    # nothing but the file remains
    loaded = load_model(result.best)
    assert not loaded.model.training
    assert torch.equal(loaded.model(batch).logits, expected)
    assert loaded.tokenizer.fingerprint() == read_checkpoint(result.best)["vocab_fingerprint"]
    assert loaded.vocab.brk == 4 and loaded.recipe.model.family == "concat"
    assert loaded.meta["src_lang"] == "src"
    assert isinstance(batch, Batch)


def test_average_refuses_different_models(run, tmp_path, prepared):
    root, _, _ = run
    other = train(recipe(prepared, tmp_path / "other", model={"family": "sentence"}, max_steps=1, valid_every=1),
                  show_progress=False)
    with pytest.raises(CtxmtError, match="cannot average"):
        average_checkpoints([root / "run" / "checkpoint_3.pt", other.last], tmp_path / "x.pt")


def test_resume_after_a_kill_before_the_best_copy_restores_best_and_cleans_temps(prepared, tmp_path):
    """kill -9 after checkpoint_3.pt but before its best/last copies: --resume still leaves checkpoint_best.pt."""
    save = tmp_path / "run"
    train(recipe(prepared, save, max_steps=3, valid_every=3), show_progress=False)
    # what such a kill leaves: the step file, no best/last copies, a half-written temp file of the copy
    (save / "checkpoint_best.pt").unlink()
    (save / "checkpoint_last.pt").unlink()
    (save / f"{TMP_PREFIX}checkpoint_best.pt.0123abcd").write_bytes(b"half a checkpoint")
    (save / f".checkpoint_last.pt{TEMP_TAG}999999999-0123abcd").write_bytes(b"half a checkpoint")   # writer gone
    # nothing left to train or validate: the resumed run must still report a best checkpoint that exists
    result = train(recipe(prepared, save, max_steps=3, valid_every=3), resume=True, show_progress=False)
    assert result.best.is_file() and read_checkpoint(result.best)["state"]["best_step"] == 3
    assert result.best.read_bytes() == result.last.read_bytes() == (save / "checkpoint_3.pt").read_bytes()
    assert no_temp_files(save)


def test_last_steps_and_pruning_keep_them(tmp_path):
    assert last_steps([200, 400, 600, 800], 3) == [400, 600, 800]
    assert last_steps([600, 200], 8) == [200, 600]                          # fewer when not there
    assert last_steps([200, 400], 0) == []
    for step in (10, 20, 30, 40, 50):
        torch_save({"step": step}, tmp_path / f"checkpoint_{step}.pt")
    prune_checkpoints(tmp_path, keep=3, best_step=10, average_n=0)          # keep >= average_last (schema)
    assert last_steps(list(step_checkpoints(tmp_path)), 3) == [30, 40, 50]


def test_average_last_is_the_mean_of_the_last_n_and_survives_a_resume(prepared, tmp_path, monkeypatch):
    """average_last 3 over checkpoints at 4, 8, 12, 16: the mean of exactly 8, 12 and 16, bit for bit the same
    when the run stopped at step 8 and resumed; with context_order random (re-drawn at the epoch boundary, ~12
    updates per epoch here) the resumed run must draw the same context, and the draw changes the weights."""
    model = {"src_context_sentences": 1, "tgt_context_sentences": 0, "context_order": "random"}
    settings = dict(model=model, max_steps=16, valid_every=4, average_last=3, keep_checkpoints=10)
    draws, real = [], WindowDataset.set_epoch
    monkeypatch.setattr(WindowDataset, "set_epoch", lambda ds, e: (draws.append((ds.spec.context_order, e)),
                                                                     real(ds, e))[1])
    whole = train(recipe(prepared, tmp_path / "whole", **settings), show_progress=False)
    assert ("random", 1) in draws                                           # the trainer re-draws per epoch
    assert sorted(step_checkpoints(tmp_path / "whole")) == [4, 8, 12, 16]
    trained = weights(whole.averaged)
    mean = {k: sum(weights(tmp_path / "whole" / f"checkpoint_{s}.pt")[k].double() for s in (8, 12, 16)) / 3
            for k in trained}
    for key in trained:
        torch.testing.assert_close(trained[key], mean[key].float(), rtol=0, atol=1e-7)
    with_4 = {k: (mean[k] * 3 + weights(tmp_path / "whole" / "checkpoint_4.pt")[k].double()) / 4 for k in trained}
    assert any(not torch.allclose(trained[k].double(), with_4[k], atol=1e-6) for k in trained)
    train(recipe(prepared, tmp_path / "resumed", **{**settings, "max_steps": 8}), show_progress=False)
    resumed = train(recipe(prepared, tmp_path / "resumed", **settings), resume=True, show_progress=False,
                    allow_changed=("train.max_steps",))
    assert_same_weights(weights(resumed.averaged), trained)
    ordered = train(recipe(prepared, tmp_path / "ordered", **{**settings, "model": {**model, "context_order":
                                                                                        "previous"}}),
                    show_progress=False)
    assert any(not torch.equal(weights(ordered.averaged)[k], trained[k]) for k in trained)
