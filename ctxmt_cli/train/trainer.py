"""The trainer: ``train(recipe, resume=False, show_progress=True) -> TrainResult``.

One loop serves a CPU smoke test and a multi-node GPU job: token-budget batches
reshuffled per epoch from ``(seed, epoch)`` alone and sharded by rank;
``update_freq`` accumulation; AMP (bf16 / fp16 with a grad scaler); DDP under
``torchrun``; validation every ``valid_every`` updates with early stopping;
atomic checkpoints that make ``--resume`` after a kill -9 reach the weights of
an uninterrupted run bit for bit on CPU (the checkpoint holds the epoch and the
position inside it, the optimiser/scaler state and every rank's RNG state; the
schedule is a function of the step). The update itself lives in
:mod:`ctxmt_cli.train.step`, checkpoint files in :mod:`ctxmt_cli.train.checkpoint`.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ctxmt_cli.config import Recipe, recipe_to_dict
from ctxmt_cli.core.batch import VocabInfo
from ctxmt_cli.data.batching import BatchBudget, shard_batches
from ctxmt_cli.data.noise import replace_tokens
from ctxmt_cli.errors import CtxmtError, option
from ctxmt_cli.models.families import build_model, inputs_of
from ctxmt_cli.models.loading import load_state_strict
from ctxmt_cli.outputs import copy_atomic
from ctxmt_cli.signals import act_on_pending, deferred, pending
from ctxmt_cli.train import setup as S
from ctxmt_cli.train.checkpoint import (
    average_run,
    averages,
    capture_rng,
    model_payload,
    prune_checkpoints,
    remove_stale_temps,
    restore_copies,
    restore_rng,
    save_checkpoint,
)
from ctxmt_cli.train.distributed import (
    DistEnv,
    any_rank,
    barrier,
    gather_objects,
    setup_distributed,
    teardown_distributed,
    unwrap,
    wrap_model,
)
from ctxmt_cli.train.init_from import InitRecord, describe_changes, start_from
from ctxmt_cli.train.progress import make_reporter
from ctxmt_cli.train.resume import record_changes
from ctxmt_cli.train.run_folder import RunFolder
from ctxmt_cli.train.schedule import InverseSqrtSchedule
from ctxmt_cli.train.step import LossSettings, Updater, make_optimizer, make_scaler
from ctxmt_cli.train.telemetry import TrainLog
from ctxmt_cli.train.validate import Validator

#: test hook: SIGKILL this process right after the checkpoint of this step is written
KILL_ENV = "CTXMT_TEST_KILL_AFTER_STEP"


@dataclass
class TrainResult:
    """Paths of the checkpoints a run produced, its validation history and its wall time."""

    best: Path
    last: Path
    averaged: Path | None
    history: list[dict]
    seconds: float


def train(recipe: Recipe, resume: bool = False, show_progress: bool = True, *, device: str = "auto",
          log_format: str | None = None, allow_changed: tuple = ()) -> TrainResult:
    """Train the system ``recipe`` describes; see the module docstring.

    ``device``: auto (CUDA device LOCAL_RANK when present, else the CPU), cpu, cuda or cuda:N. ``log_format``:
    the progress as a rich bar, plain lines or JSON lines (None: rich when stdout is a terminal, else plain).
    ``allow_changed``: recipe keys (or sections) whose values may differ from the checkpoint's on ``resume``
    (:mod:`ctxmt_cli.train.resume`); any other difference is refused before anything is written.
    """
    env = setup_distributed(device)
    try:
        trainer = Trainer(recipe, env, resume, show_progress, log_format, tuple(allow_changed))
        try:
            return trainer.run()
        finally:
            trainer.close()
    finally:
        teardown_distributed(env)


class Trainer:
    """State and steps of one training run (one instance per process)."""

    def __init__(self, *args, **kwargs):
        self.folder: RunFolder | None = None           # rank 0's lock on save_dir, released on any failure
        try:
            self._setup(*args, **kwargs)
        except BaseException:
            self.close()
            raise

    def _setup(self, recipe: Recipe, env: DistEnv, resume: bool, show_progress: bool,
               log_format: str | None = None, allow_changed: tuple = ()):
        self.env, self.cfg = env, recipe.train
        if self.cfg.threads:
            torch.set_num_threads(self.cfg.threads)
        data = S.open_prepared(recipe)
        self.tokenizer, self.meta = data.tokenizer, data.meta
        self.vocab = VocabInfo.of(self.tokenizer)
        recipe, self.parent, self.arch_changes = S.init_source(recipe, self.tokenizer.fingerprint(), resume)
        self.recipe = S.resolve_recipe(recipe, self.meta)
        self.save_dir = Path(self.cfg.save_dir)
        ckpt = S.find_resume_checkpoint(self.save_dir, resume, env, self.tokenizer, self.recipe, allow_changed)
        self.inputs = inputs_of(self.recipe.model)
        self.budget = BatchBudget.of(self.recipe.data)                      # training and validation batches
        self.train_ds = S.window_dataset(data, recipe.data.train_split, self.recipe, self.vocab, "train")
        valid_ds = S.window_dataset(data, recipe.data.valid_split, self.recipe, self.vocab, "valid")
        self._build(ckpt)
        self.loss = LossSettings.from_recipe(self.recipe, self.vocab, self.model)
        self.validator = Validator(valid_ds, self.budget, env, self.loss, self.cfg.amp, self.vocab, self.inputs)
        self.updater = Updater(self.model, self.optimizer, self.scaler, env, self.loss, self.cfg.amp,
                               self.cfg.clip_norm, self.cfg.compile)
        if env.is_main:
            self.folder = RunFolder.take(self.save_dir, fresh=ckpt is None)    # before anything is written
            self.folder.claim({"init_from": self.init_record})
            remove_stale_temps(self.save_dir)
            if ckpt is not None:
                self.folder.record(restore_copies(self.save_dir, Path(ckpt["_path"]), self.state.best_step))
        barrier(env)
        # metrics.jsonl keeps only lines up to the start step (0: a fresh run starts a fresh file)
        self.reporter = make_reporter(env.is_main, self.save_dir, self.cfg, show_progress, self.state.step,
                                      self.loss.layout.terms, log_format)
        self.log = TrainLog(self.cfg, env, self.scaler is not None, self.loss.layout)
        if ckpt is not None:
            self.reporter.message(f"resumed from {ckpt['_path']} at step {self.state.step}")
            record_changes(self.reporter, self.state.recipe_history, self.state.step, ckpt.get("_changes") or {})
        elif resume:
            self.reporter.message(f"no checkpoint in {self.save_dir} to resume from; starting a fresh run")
        if ckpt is None and self.parent is not None:
            self._report_init()
        self.t0 = time.monotonic() - self.state.elapsed
        self.stop_reason: str | None = None
        self._epoch_cache: tuple[int, list] = (-1, [])

    def _report_init(self) -> None:
        """Print the init_from lines (architecture values overridden; tensors loaded, new, skipped) and record
        them in metrics.jsonl."""
        if self.arch_changes:
            self.reporter.message(describe_changes(self.arch_changes))
        record = self.init_record
        self.reporter.record_message(0, InitRecord(**record).summary(), init_from=record)

    def _build(self, ckpt: dict | None) -> None:
        """Model, optimiser, scaler, schedule and state: fresh from the seed or restored from ``ckpt``; a fresh run
        with ``train.init_from`` then takes that checkpoint's weights (its lineage kept in ``init_record``)."""
        S.seed_everything(self.cfg.seed)           # the same initial weights on every rank
        net = build_model(self.recipe.model, self.vocab).to(self.env.device)
        self.init_record = ckpt.get("init_from") if ckpt is not None else None
        if ckpt is None and self.parent is not None:
            self.init_record = start_from(net, self.parent, self.arch_changes).to_dict()
        self.optimizer = make_optimizer(net, self.cfg)
        self.scaler = make_scaler(self.cfg.amp, self.env.device)
        self.schedule = InverseSqrtSchedule(self.optimizer, self.cfg.lr, self.cfg.warmup_steps)
        self.state = S.TrainState()
        if ckpt is not None:
            load_state_strict(net, ckpt["model"], Path(ckpt["_path"]))
        restored = self._restore(ckpt) if ckpt is not None else False
        if not restored and (self.env.rank > 0 or ckpt is not None):
            # dropout streams differ per rank (and per resume point when a job changed size)
            torch.manual_seed(self.cfg.seed + 1000 * self.env.rank + self.state.step)
        self.model = wrap_model(net, self.env)

    def _restore(self, ckpt: dict) -> bool:
        """Optimiser, scaler and counters from ``ckpt``, and this rank's RNG state when it holds one (returns
        whether it did). The optimiser keeps the recipe's betas/eps/weight decay, not the stored ones, so a change
        accepted with --allow-changed applies (the learning rate comes from the schedule at every step). A state
        that does not fit (a crafted or foreign checkpoint) is one line, not a traceback."""
        settings = [{k: v for k, v in group.items() if k != "params"} for group in self.optimizer.param_groups]
        try:
            self.optimizer.load_state_dict(ckpt["optimizer"])
            for group, own in zip(self.optimizer.param_groups, settings, strict=True):
                group.update(own)
            if self.scaler is not None and ckpt.get("scaler"):
                self.scaler.load_state_dict(ckpt["scaler"])
            self.state = S.TrainState.from_dict(ckpt["state"])
            rng = S.rank_rng(ckpt, self.env)
            if rng is not None:
                restore_rng(rng)
            return rng is not None
        except (KeyError, TypeError, ValueError, IndexError, RuntimeError) as err:
            raise CtxmtError(f"{ckpt['_path']}: its optimiser, scaler or RNG state does not fit this run "
                             f"({type(err).__name__}); resume from another checkpoint of the run, or start a fresh "
                             "run in another train.save_dir") from None

    # ---- batches --------------------------------------------------------------------------------
    def _epoch_batches(self, epoch: int) -> list:
        """This rank's micro-batches (index arrays) of ``epoch``; depends on (seed, epoch) only."""
        if self._epoch_cache[0] != epoch:
            ds = self.train_ds
            ds.set_epoch(epoch)                     # context_order random: this epoch's context draw
            every = self.inputs.plan_batches(ds, ds.indices, budget=self.budget, seed=self.cfg.seed, epoch=epoch)
            mine = shard_batches(every, self.env.rank, self.env.world)
            if not mine:
                raise CtxmtError(f"the train split gives {len(every)} batches, fewer than the {self.env.world} "
                                 "workers; lower data.max_tokens or use fewer processes")
            self._epoch_cache = (epoch, mine)
        return self._epoch_cache[1]

    def _collate(self, group: list, epoch: int = 0, position: int = 0) -> list:
        """Window batches of one update, the first at ``position`` of ``epoch`` (runs in the prefetch thread,
        overlapping the previous update); with ``data.input_noise``, source tokens replaced, drawn from (seed,
        epoch, position, rank) alone, so a resumed run sees the same noise."""
        batches = [self.inputs.collate(self.train_ds, plan, self.vocab, chunked=True) for plan in group]
        share = self.recipe.data.input_noise
        for i, batch in enumerate(batches if share > 0 else []):
            rng = np.random.default_rng([self.cfg.seed, epoch, position + i, self.env.rank])
            batch.src = replace_tokens(batch.src, share, self.vocab, rng)
        if self.env.device.type == "cuda":
            batches = [b.map(lambda t: t.pin_memory()) for b in batches]
        return batches

    # ---- the loop -------------------------------------------------------------------------------
    def run(self) -> TrainResult:
        """Train until a stopping rule fires, validate at the end, average; returns the result."""
        if self.state.step == 0 and self.parent is not None:
            self._validate_start()
        self.reporter.start(self.state.step, self.state.elapsed)
        if self.state.step >= self.cfg.max_steps or self.state.epoch >= self.cfg.max_epochs:
            self.stop_reason = "done"
        with deferred(), ThreadPoolExecutor(max_workers=1, thread_name_prefix="ctxmt-collate") as pool:
            while self.stop_reason is None:
                self._run_epoch(pool)
            if self.stop_reason == "signal":
                self._save_resumable()
        self.log.flush(self.state.step, self.reporter, self.save_dir)
        if self.state.last_valid_step != self.state.step or self.state.best_step is None:
            self._validate_and_save()
        averaged = self._average()
        barrier(self.env)
        self.reporter.message(f"stopped at step {self.state.step} ({self.stop_reason}); "
                              f"best {self.cfg.early_stop_on} {self.state.best:.4f} at step {self.state.best_step}")
        return TrainResult(self.save_dir / "checkpoint_best.pt", self.save_dir / "checkpoint_last.pt", averaged,
                           list(self.state.history), time.monotonic() - self.t0)

    def _run_epoch(self, pool: ThreadPoolExecutor) -> None:
        """The remaining updates of the current epoch (from the saved position after a resume)."""
        epoch, f = self.state.epoch, self.cfg.update_freq
        batches = self._epoch_batches(epoch)
        start = self.state.position
        groups = [batches[i:i + f] for i in range(start, len(batches), f)]
        pending = pool.submit(self._collate, groups[0], epoch, start) if groups else None
        for k, group in enumerate(groups):
            micro = pending.result()
            if k + 1 < len(groups):
                pending = pool.submit(self._collate, groups[k + 1], epoch, start + (k + 1) * f)
            else:
                pending = None
            self._update([b.to(self.env.device) for b in micro], len(group), len(batches))
            if self.stop_reason is not None:
                break
        if pending is not None:
            pending.cancel()
        if not groups:                              # a position at the end of an epoch: move on
            self._next_epoch()

    def _next_epoch(self) -> None:
        self.state.epoch, self.state.position = self.state.epoch + 1, 0
        if self.state.epoch >= self.cfg.max_epochs and self.stop_reason is None:
            self.stop_reason = "max_epochs"

    def _update(self, micro: list, n_micro: int, n_epoch: int) -> None:
        """One optimiser update, then the bookkeeping that follows it."""
        step = self.state.step + 1
        lr = self.schedule.apply(step)
        stats, grad_norm = self.updater.update(micro)
        self.state.step, self.state.position = step, self.state.position + n_micro
        if self.state.position >= n_epoch:
            self._next_epoch()
        self.log.add(step, stats, grad_norm, lr, self.state.epoch)
        if step % self.cfg.log_every == 0:
            self.log.flush(step, self.reporter, self.save_dir)
            self._check_time(at_sync_point=True)
        else:
            self._check_time(at_sync_point=False)
        if step % self.cfg.valid_every == 0:
            self._validate_and_save()
        if step >= self.cfg.max_steps and self.stop_reason is None:
            self.stop_reason = "max_steps"
        if any_rank(pending() is not None, self.env):              # every rank stops after the same update
            self.stop_reason = "signal"

    def _check_time(self, at_sync_point: bool) -> None:
        """``max_minutes``: every update alone; at log points in a job, where ranks agree on it."""
        if self.cfg.max_minutes is None or (self.env.distributed and not at_sync_point):
            return
        over = (time.monotonic() - self.t0) >= self.cfg.max_minutes * 60
        if any_rank(over, self.env) and self.stop_reason is None:
            self.stop_reason = "max_minutes"

    # ---- validation and checkpoints -------------------------------------------------------------
    def _validate_start(self) -> None:
        """A run started from another checkpoint validates once before its first update: how far from that model
        it starts (a ``valid`` row at step 0 with ``start: true``; no checkpoint, no best, not training time)."""
        t0 = time.monotonic()
        metrics = self.validator.run(unwrap(self.model))
        self.reporter.valid({"step": 0, "kind": "valid", "epoch": 0, **metrics, "start": True})
        self.t0 += time.monotonic() - t0

    def _validate_and_save(self) -> None:
        """Validate, update best/patience, write the checkpoints (rank 0), maybe stop early."""
        st = self.state
        self.log.flush(st.step, self.reporter, self.save_dir)      # never checkpoint non-finite weights
        metrics = self.validator.run(unwrap(self.model))
        value = metrics[self.cfg.early_stop_on]
        improved = math.isfinite(value) and value < st.best
        if improved:
            st.best, st.best_step, st.bad = value, st.step, 0
        else:
            st.bad += 1
        st.last_valid_step = st.step
        record = {"step": st.step, "kind": "valid", "epoch": st.epoch, **metrics,
                  "best": st.best, "bad_validations": st.bad}
        st.history.append(record)
        # the row first (flushed to disk), then the checkpoints that include it: a kill in between loses no row,
        # and a resume from the checkpoint before it drops the row with the work it redoes
        self.reporter.valid(record)
        self._save(improved)
        self.log.restart_clock()                                   # validation and saving are not training time
        if self.cfg.patience > 0 and st.bad >= self.cfg.patience and self.stop_reason is None:
            self.stop_reason = f"early stop: no {self.cfg.early_stop_on} improvement in {st.bad} validations"
        if os.environ.get(KILL_ENV) == str(st.step):
            os.kill(os.getpid(), signal.SIGKILL)

    def _save(self, improved: bool, step_file: bool = True) -> None:
        """checkpoint_{step}.pt, then _best (if improved) and _last as atomic copies; prune old ones. Without
        ``step_file``, checkpoint_last.pt alone (a run stopped between validations: averaging sees validated steps)."""
        self.state.elapsed = time.monotonic() - self.t0
        rng = gather_objects(capture_rng(), self.env)              # collective: every rank takes part
        if not self.env.is_main:
            return
        payload = model_payload(recipe_to_dict(self.recipe), self.tokenizer, self.vocab, self.meta, unwrap(self.model))
        payload.update(
            optimizer=self.optimizer.state_dict(), scaler=self.scaler.state_dict() if self.scaler else None,
            state=self.state.to_dict(), rng=rng, world_size=self.env.world, init_from=self.init_record,
        )
        if not step_file:
            last = save_checkpoint(payload, self.save_dir / "checkpoint_last.pt")
            self.folder.record([last, *self.reporter.files()])
            return
        step_path = save_checkpoint(payload, self.save_dir / f"checkpoint_{self.state.step}.pt")   # hashed
        copies = [copy_atomic(step_path, self.save_dir / name) for name in
                  (["checkpoint_best.pt"] if improved else []) + ["checkpoint_last.pt"]]
        pruned = prune_checkpoints(self.save_dir, self.cfg.keep_checkpoints, self.state.best_step,
                                   self.cfg.average_checkpoints)
        self.folder.saved(step_path, copies, pruned, self.reporter.files())

    def _save_resumable(self) -> None:
        """Stopped by a signal (Ctrl-C, SIGTERM, SIGHUP: a Slurm preemption) after an update: its train row logged,
        checkpoint_last.pt written for ``--resume``, then the interruption raised, saying so (on every rank)."""
        step = self.state.step
        self.log.flush(step, self.reporter, self.save_dir)
        if step > self.state.last_valid_step:                      # else checkpoint_last.pt holds this step
            self._save(improved=False, step_file=False)
        barrier(self.env)
        act_on_pending(f"saved {self.save_dir / 'checkpoint_last.pt'} at step {step}; continue it with "
                       f"{option('resume')}", fallback=signal.SIGTERM)

    def _average(self) -> Path | None:
        """checkpoint_avg.pt as the recipe says (:func:`~ctxmt_cli.train.checkpoint.average_run`), on rank 0."""
        plan = dict(best_step=self.state.best_step, around_best=self.cfg.average_checkpoints,
                    last=self.cfg.average_last)
        if not averages(**plan):
            return None
        if self.env.is_main:
            out, steps = average_run(self.save_dir, **plan)
            self.folder.record([out])
            self.reporter.message(f"averaged {len(steps)} checkpoints (steps {steps}) into {out}")
        return self.save_dir / "checkpoint_avg.pt"

    def close(self) -> None:
        """Stop the progress bar and close log files (also after an error)."""
        reporter = getattr(self, "reporter", None)
        if reporter is not None:
            reporter.close()
        if self.folder is not None:                      # the logs as the run leaves them, then the next run may start
            with contextlib.suppress(OSError):           # not listed: a later --force refuses them, as it should
                self.folder.record(reporter.files() if reporter is not None else [])
            self.folder.release()
