"""A training run's ``save_dir`` as ctxmt owns it: one run at a time, and every file the run writes listed.

Rank 0 takes the folder's run lock (:mod:`ctxmt_cli.run_lock`) before it writes anything and holds it to the end,
so a second run into the same folder stops with one line naming the first one's PID. The folder's manifest
(:mod:`ctxmt_cli.ownership`) lists, with size and hash, exactly the files the run wrote: each checkpoint as it is
saved (a pruned one dropped), ``metrics.jsonl``, its own TensorBoard event files, the averaged checkpoint. A file
the run did not write (a user's ``checkpoint_my_finetuned.pt``, notes in ``tensorboard/``) is never listed, so a
later ``--force`` (a quickstart replaced) refuses the folder rather than delete it.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ctxmt_cli.errors import CtxmtError, option
from ctxmt_cli.ownership import claim, record
from ctxmt_cli.run_lock import RunLock, take
from ctxmt_cli.train.checkpoint import step_checkpoints


class RunFolder:
    """Rank 0's hold on ``save_dir``: its run lock, and its manifest kept up to date."""

    def __init__(self, save_dir: Path, lock: RunLock):
        self.dir, self.lock = Path(save_dir), lock

    @classmethod
    def take(cls, save_dir: Path, fresh: bool) -> RunFolder:
        """Create ``save_dir`` if needed and hold its run lock; a ``fresh`` run (no checkpoint to resume) is refused
        when checkpoints appeared meanwhile (a run that finished between this one's checks and its lock)."""
        save_dir = Path(save_dir)
        save_dir.mkdir(parents=True, exist_ok=True)
        folder = cls(save_dir, take(save_dir))
        if fresh and (step_checkpoints(save_dir) or (save_dir / "checkpoint_last.pt").is_file()):
            folder.release()
            raise CtxmtError(f"train.save_dir {save_dir} received checkpoints from another run while this one started; "
                             f"pass {option('resume')} to continue that run, or set another train.save_dir (nothing "
                             "was overwritten)")
        return folder

    def claim(self, fields: dict | None = None) -> None:
        """Give the folder a manifest (listing nothing yet) unless it has one; ``fields``: kept in it."""
        claim(self.dir, "train", fields)

    def record(self, paths: Iterable[Path], copies: dict | None = None) -> None:
        """List ``paths`` as the run wrote them (a path gone since is dropped); ``copies``: path -> its source."""
        record(self.dir, list(paths), copies=copies)

    def saved(self, step_path: Path, copies: Iterable[Path], removed: Iterable[Path], logs: Iterable[Path]) -> None:
        """After a checkpoint: the step file, its ``copies`` (best, last), the pruned files and the logs."""
        copies = list(copies)
        self.record([step_path, *copies, *removed, *logs], copies={c: step_path for c in copies})

    def release(self) -> None:
        """Let the next run in (idempotent)."""
        self.lock.release()
