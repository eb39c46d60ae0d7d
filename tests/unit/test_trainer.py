"""The trainer end to end on a tiny synthetic corpus: learning, resume after kill -9, AMP, stopping rules, errors."""

import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from ctxmt_cli.config import validate_recipe
from ctxmt_cli.core.batch import VocabInfo
from ctxmt_cli.data.batching import collate
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.models.families import build_model
from ctxmt_cli.models.loading import read_checkpoint
from ctxmt_cli.train import step as step_module
from ctxmt_cli.train.checkpoint import TMP_PREFIX, step_checkpoints
from ctxmt_cli.train.distributed import DistEnv
from ctxmt_cli.train.step import LossSettings, Updater
from ctxmt_cli.train.trainer import KILL_ENV, train
from ctxmt_cli.train.validate import Validator
from tests.unit.train_fixtures import TINY, assert_same_weights, prepare_tiny, recipe, weights


def metrics(save_dir: Path, kind: str) -> list[dict]:
    lines = (save_dir / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["kind"] == kind]


def test_loss_decreases(prepared, tmp_path):
    rec = recipe(prepared, tmp_path / "run", max_steps=30, valid_every=15, log_every=5, lr=5e-3, warmup_steps=5,
                 clip_norm=1.0, label_smoothing=0.1, model={"dropout": 0.1})
    result = train(rec, show_progress=True)
    train_loss = [r["loss"] for r in metrics(tmp_path / "run", "train")]
    assert len(train_loss) == 6 and train_loss[-1] < train_loss[0] - 0.5
    valid = [r["window_loss"] for r in result.history]
    assert len(valid) == 2 and valid[1] < valid[0]
    assert all(math.isfinite(r["grad_norm"]) for r in metrics(tmp_path / "run", "train"))
    assert not [p for p in (tmp_path / "run").iterdir() if p.name.startswith(TMP_PREFIX)]
    assert torch.get_num_threads() == 1                                    # train.threads honoured


RESUME = dict(max_steps=14, valid_every=4, log_every=3, update_freq=2, clip_norm=0.5, weight_decay=0.01,
              label_smoothing=0.1, model={"dropout": 0.2, "cd": 0.5})


def test_resume_after_kill_equals_uninterrupted_run(prepared, tmp_path):
    ref = train(recipe(prepared, tmp_path / "ref", **RESUME), show_progress=False)
    killed = tmp_path / "killed"
    script = (
        f"import sys; sys.path.insert(0, {str(Path(__file__).parents[2])!r})\n"
        "from tests.unit.train_fixtures import recipe\nfrom ctxmt_cli.train.trainer import train\n"
        f"train(recipe({str(prepared)!r}, {str(killed)!r}, **{RESUME!r}), show_progress=False)\n"
    )
    env = {**os.environ, KILL_ENV: "8"}
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert read_checkpoint(killed / "checkpoint_last.pt")["state"]["step"] == 8
    assert sorted(step_checkpoints(killed)) == [4, 8]
    resumed = train(recipe(prepared, killed, **RESUME), resume=True, show_progress=False)
    assert_same_weights(weights(resumed.last), weights(ref.last))
    assert resumed.history == ref.history
    steps = [(r["step"], r["kind"]) for r in map(json.loads, (killed / "metrics.jsonl").read_text().splitlines())]
    assert len(steps) == len(set(steps))                                   # no duplicated lines after resume
    # resuming a finished run changes nothing
    again = train(recipe(prepared, killed, **RESUME), resume=True, show_progress=False)
    assert_same_weights(weights(again.last), weights(ref.last))


def two_batches(vocab_size=50, seed=0):
    rng = np.random.default_rng(seed)

    def rows(n: int, lo: int, hi: int) -> list:                         # n random sentences of lo..hi-1 pieces
        return [rng.integers(5, vocab_size, rng.integers(lo, hi)) for _ in range(n)]

    def windows(sentences: list) -> list:                               # context + current
        return [np.concatenate([x, [4], x[:2], [3]]) for x in sentences]

    src, tgt = rows(6, 3, 9), rows(6, 3, 9)
    src, tgt = windows(src), windows(tgt)
    return (collate(src[:3], tgt[:3], 0, 2), collate(src[3:], tgt[3:], 0, 2), collate(src, tgt, 0, 2))


def test_accumulation_equals_one_double_batch():
    cfg = validate_recipe({"model": {"family": "concat", **TINY, "dropout": 0.0, "cd": 0.3,
                                     "src_context_sentences": 1, "tgt_context_sentences": 1},
                           "train": {"clip_norm": 0.1, "label_smoothing": 0.1}})
    vocab = VocabInfo(src_size=50, tgt_size=50)
    b1, b2, both = two_batches()
    results = []
    for groups in ([b1, b2], [both]):
        torch.manual_seed(0)
        model = build_model(cfg.model, vocab)
        # SGD with lr 1: the update is the (normalised, clipped) gradient itself. Adam would turn the
        # float noise of gradients that are zero in exact arithmetic (attention key biases) into ±lr steps.
        opt = torch.optim.SGD(model.parameters(), lr=1.0)
        updater = Updater(model, opt, None, DistEnv(), LossSettings.from_recipe(cfg, vocab, model), "off", 0.1)
        stats, norm = updater.update(groups)
        results.append((stats, norm, {k: v.clone() for k, v in model.state_dict().items()}))
    torch.testing.assert_close(results[0][0], results[1][0], rtol=1e-6, atol=1e-5)
    torch.testing.assert_close(results[0][1], results[1][1], rtol=1e-5, atol=1e-6)
    assert_same_weights(results[0][2], results[1][2], atol=1e-6)


@pytest.mark.slow
def test_compiled_update_equals_eager_update():
    """``train.compile``: the inductor-compiled forward and loss give the eager update (a minute of compiling on
    CPU: 1 min 20 s of CPU time on 2 cores)."""
    cfg = validate_recipe({"model": {"family": "concat", **TINY, "dropout": 0.0}})
    vocab = VocabInfo(src_size=50, tgt_size=50)
    b1, b2, _ = two_batches()
    results = []
    for compiled in (False, True):
        torch.manual_seed(0)
        model = build_model(cfg.model, vocab)
        opt = torch.optim.SGD(model.parameters(), lr=1.0)
        loss = LossSettings.from_recipe(cfg, vocab, model)
        updater = Updater(model, opt, None, DistEnv(), loss, "off", 0.0, compiled)
        stats = [updater.update([b])[0] for b in (b1, b2)]                  # two shapes, one dynamic graph
        results.append((stats, {k: v.clone() for k, v in model.state_dict().items()}))
    for eager, compiled in zip(results[0][0], results[1][0], strict=True):
        torch.testing.assert_close(compiled, eager, rtol=1e-4, atol=1e-4)
    assert_same_weights(results[0][1], results[1][1], atol=1e-4)


def test_early_stopping_honours_patience(prepared, tmp_path, monkeypatch):
    script = iter([3.0, 2.0, 2.5, 2.4, 1.0, 0.5])
    monkeypatch.setattr(Validator, "run", lambda self, model: {
        "window_loss": next(script), "discounted_loss": 1.0, "current_loss": 1.0, "context_loss": 1.0,
        "tokens": 1.0, "current_tokens": 1.0})
    result = train(recipe(prepared, tmp_path / "run", max_steps=50, valid_every=2, patience=2), show_progress=False)
    assert [r["window_loss"] for r in result.history] == [3.0, 2.0, 2.5, 2.4]
    assert read_checkpoint(result.last)["state"]["step"] == 8
    assert read_checkpoint(result.best)["state"]["step"] == 4


def test_patience_zero_never_stops_and_limits_apply(prepared, tmp_path, monkeypatch):
    monkeypatch.setattr(Validator, "run", lambda self, model: {
        "window_loss": 5.0, "discounted_loss": 5.0, "current_loss": 5.0, "context_loss": 5.0,
        "tokens": 1.0, "current_tokens": 1.0})
    result = train(recipe(prepared, tmp_path / "a", max_steps=7, valid_every=2, patience=0, keep_checkpoints=1),
                   show_progress=False)
    assert [r["step"] for r in result.history] == [2, 4, 6, 7]           # validated at the end too
    assert sorted(step_checkpoints(tmp_path / "a")) == [2, 7]             # newest + best kept
    epochs = train(recipe(prepared, tmp_path / "b", max_steps=10_000, max_epochs=1, valid_every=1000),
                   show_progress=False)
    assert read_checkpoint(epochs.last)["state"]["epoch"] == 1
    timed = train(recipe(prepared, tmp_path / "c", max_steps=10_000, max_minutes=1e-9, valid_every=1000),
                  show_progress=False)
    assert read_checkpoint(timed.last)["state"]["step"] == 1


@pytest.mark.parametrize("amp", ["bf16", "fp16"])
def test_autocast_on_cpu_keeps_the_loss_finite(prepared, tmp_path, amp):
    result = train(recipe(prepared, tmp_path / "run", amp=amp, max_steps=4, valid_every=4), show_progress=False)
    assert all(math.isfinite(r["loss"]) for r in metrics(tmp_path / "run", "train"))
    assert math.isfinite(result.history[-1]["window_loss"])
    assert (read_checkpoint(result.last)["scaler"] is not None) == (amp == "fp16")


def poisoned_loss(at_call: int):
    """batch_loss that returns a NaN objective on its ``at_call``-th training call."""
    real, calls = step_module.batch_loss, {"n": 0}

    def fake(*args, **kwargs):
        objective, sums = real(*args, **kwargs)
        if torch.is_grad_enabled():
            calls["n"] += 1
            if calls["n"] == at_call:
                objective, sums = objective * float("nan"), sums.clone().fill_(float("nan"))
        return objective, sums
    return fake


def test_non_finite_loss_stops_with_a_message(prepared, tmp_path, monkeypatch):
    monkeypatch.setattr(step_module, "batch_loss", poisoned_loss(5))
    with pytest.raises(CtxmtError, match=r"non-finite training loss \(nan\) at step 5; lower train.lr") as err:
        train(recipe(prepared, tmp_path / "run", max_steps=12, valid_every=3, log_every=4), show_progress=False)
    assert "amp: off" in str(err.value)
    # the step-3 checkpoint is the last one: nothing with NaN weights was written
    assert sorted(step_checkpoints(tmp_path / "run")) == [3]


def test_fp16_scaler_skips_a_non_finite_update(prepared, tmp_path, monkeypatch):
    monkeypatch.setattr(step_module, "batch_loss", poisoned_loss(2))
    train(recipe(prepared, tmp_path / "run", amp="fp16", max_steps=4, valid_every=4, log_every=4),
          show_progress=False)
    record = metrics(tmp_path / "run", "train")[-1]
    assert record["skipped_updates"] == 1 and math.isfinite(record["loss"])
    assert all(torch.isfinite(v).all() for v in weights(tmp_path / "run" / "checkpoint_last.pt").values())


def test_existing_save_dir_needs_resume(prepared, tmp_path):
    rec = recipe(prepared, tmp_path / "run", max_steps=2, valid_every=2)
    train(rec, show_progress=False)
    before = {p.name: p.read_bytes() for p in (tmp_path / "run").iterdir()}
    with pytest.raises(CtxmtError, match="already holds checkpoints; pass `resume`"):
        train(rec, show_progress=False)
    assert {p.name: p.read_bytes() for p in (tmp_path / "run").iterdir()} == before


def test_resume_refuses_another_family_or_vocabulary(prepared, tmp_path):
    train(recipe(prepared, tmp_path / "run", max_steps=1, valid_every=1), show_progress=False)
    with pytest.raises(CtxmtError, match="was trained with family concat / vocabulary fingerprint"):
        train(recipe(prepared, tmp_path / "run", model={"family": "sentence"}, max_steps=2), resume=True,
              show_progress=False)
    other = prepare_tiny(prepared.parent, vocab_size=150)
    with pytest.raises(CtxmtError, match="fingerprint"):
        train(recipe(other, tmp_path / "run", max_steps=2), resume=True, show_progress=False)


def test_missing_prepared_dir(tmp_path):
    with pytest.raises(CtxmtError, match=r"prepared data not found: .*nowhere.*run ctxmt prepare"):
        train(recipe(tmp_path / "nowhere", tmp_path / "run"), show_progress=False)
    assert not (tmp_path / "run").exists()


class Killed(BaseException):
    """A kill -9 at a chosen write: nothing after it runs (not even an ``except Exception``)."""


def _kill_at(monkeypatch, what: str) -> None:
    """Kill the run at step 6 while writing ``what``: the step file itself, or its copy to best or last."""
    from ctxmt_cli.train import trainer as trainer_module

    real_save, real_copy = trainer_module.save_checkpoint, trainer_module.copy_atomic

    def save(obj, path):
        if what == "step" and Path(path).name == "checkpoint_6.pt":
            raise Killed
        return real_save(obj, path)

    def copy(src, dst):
        if Path(src).name == "checkpoint_6.pt" and Path(dst).name == f"checkpoint_{what}.pt":
            raise Killed
        return real_copy(src, dst)

    monkeypatch.setattr(trainer_module, "save_checkpoint", save)
    monkeypatch.setattr(trainer_module, "copy_atomic", copy)


@pytest.mark.parametrize("what", ["step", "last"])
def test_a_kill_between_checkpoint_writes_loses_no_validation_row(prepared, tmp_path, monkeypatch, what):
    """The validation row reaches metrics.jsonl before its step's checkpoints: killed while the step file is
    written, the resume from step 3 drops the row with the work it redoes and writes it again (once); killed
    between the best and the last copy, the resume continues from the complete step file and keeps the row. Either
    way the rows, the history and the weights are the uninterrupted run's."""
    ref = train(recipe(prepared, tmp_path / "ref"), show_progress=False)
    save = tmp_path / "killed"
    _kill_at(monkeypatch, what)
    with pytest.raises(Killed):
        train(recipe(prepared, save), show_progress=False)
    monkeypatch.undo()
    assert read_checkpoint(save / "checkpoint_last.pt")["state"]["step"] == 3
    assert [r["step"] for r in metrics(save, "valid")] == [3, 6]                # the row came first
    resumed = train(recipe(prepared, save), resume=True, show_progress=False)
    assert metrics(save, "valid") == metrics(tmp_path / "ref", "valid") == [
        {**r, "kind": "valid"} for r in (dict(h) for h in ref.history)]
    assert resumed.history == ref.history == read_checkpoint(save / "checkpoint_last.pt")["state"]["history"]
    assert [r["step"] for r in metrics(save, "train")] == [r["step"] for r in metrics(tmp_path / "ref", "train")]
    assert_same_weights(weights(resumed.last), weights(ref.last))
    assert read_checkpoint(resumed.best)["state"]["best_step"] == read_checkpoint(ref.best)["state"]["best_step"]


def test_a_resume_refuses_a_changed_recipe_and_applies_an_allowed_one(prepared, tmp_path):
    """Without --allow-changed a changed value is refused before anything is written; allowed, the optimiser
    runs with the new betas/weight decay (not the stored ones) and the run records the change."""
    from ctxmt_cli.train.distributed import setup_distributed, teardown_distributed
    from ctxmt_cli.train.trainer import Trainer

    save = tmp_path / "run"
    train(recipe(prepared, save, max_steps=3, valid_every=3), show_progress=False)
    changed = recipe(prepared, save, max_steps=3, valid_every=3, weight_decay=0.05, betas=(0.8, 0.9))
    before = {p.name: p.read_bytes() for p in save.iterdir()}
    with pytest.raises(CtxmtError, match=r"other recipe values: train.weight_decay 0.0 → 0.05; ") as err:
        train(changed, resume=True, show_progress=False, allow_changed=("train.betas",))
    assert "betas" not in str(err.value)                                 # allowed: not listed
    assert {p.name: p.read_bytes() for p in save.iterdir()} == before
    env = setup_distributed("cpu")
    trainer = Trainer(changed, env, True, False, allow_changed=("train.betas", "train.weight_decay"))
    try:
        group = trainer.optimizer.param_groups[0]
        assert group["weight_decay"] == 0.05 and tuple(group["betas"]) == (0.8, 0.9)
        assert trainer.optimizer.state                                 # the moments were restored all the same
        assert trainer.state.recipe_history == [{"step": 3, "changed": {"train.betas": [[0.9, 0.98], [0.8, 0.9]],
                                                                        "train.weight_decay": [0.0, 0.05]}}]
    finally:
        trainer.close()
        teardown_distributed(env)
    notes = metrics(save, "message")
    assert len(notes) == 1 and notes[0]["changed"]["train.weight_decay"] == [0.0, 0.05]


def test_the_trainer_plans_its_batches_with_the_recipes_budget(prepared, tmp_path):
    """Training and validation batches are planned with one budget built from the recipe's data section: padded
    rows × the widest target row within data.max_tokens when data.max_tokens_of is target."""
    from ctxmt_cli.data.batching import BatchBudget
    from ctxmt_cli.train.distributed import setup_distributed, teardown_distributed
    from ctxmt_cli.train.trainer import Trainer

    rec = recipe(prepared, tmp_path / "run")
    data = rec.data.model_copy(update={"max_tokens": 200, "bucket_width": 4, "max_tokens_of": "target"})
    env = setup_distributed("cpu")
    trainer = Trainer(rec.model_copy(update={"data": data}), env, False, False)
    try:
        assert trainer.budget == BatchBudget(max_tokens=200, bucket_width=4, side="target")
        width = trainer.train_ds.tgt_len
        plans = trainer._epoch_batches(0)
        assert all(len(p) == 1 or len(p) * width[p].max() <= 200 for p in plans)
        assert max(len(p) * width[p].max() for p in plans) > 100                 # and filled to it
        assert all(len(b.tgt_out) == 1 or b.tgt_out.numel() <= 200 for b in trainer.validator.batches)
    finally:
        trainer.close()
        teardown_distributed(env)
