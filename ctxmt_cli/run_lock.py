"""One run per folder: a ``ctxmt train`` holds an exclusive ``fcntl.flock`` on ``.ctxmt-train.lock`` in its
``save_dir`` for the whole run, so a second run into the same folder (started by mistake, or a job scheduled
twice) stops with one line naming the first one's PID instead of interleaving checkpoints and metrics.

The kernel drops the lock when the holder exits, however it ends (a kill -9 included): a lock file left behind
holds nothing and the next run takes it. The holder removes the file when it finishes; a run that opened the
old file just before then sees that the path now names another file (or none) and opens it again.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from pathlib import Path

from ctxmt_cli.errors import CtxmtError

LOCK_NAME = ".ctxmt-train.lock"


class RunLock:
    """The lock of one run on ``directory`` (taken by :func:`take`); :meth:`release` ends it."""

    def __init__(self, path: Path, fd: int):
        self.path, self.fd = path, fd

    def release(self) -> None:
        """Remove the lock file and drop the lock (in that order: no other run holds the removed file)."""
        if self.fd < 0:
            return
        with contextlib.suppress(OSError):
            if _same(self.path, self.fd):
                self.path.unlink()
        os.close(self.fd)
        self.fd = -1


def _same(path: Path, fd: int) -> bool:
    """Whether ``path`` still names the open file ``fd``."""
    try:
        st, own = os.stat(path), os.fstat(fd)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == (own.st_dev, own.st_ino)


def _read_pid(fd: int) -> int | None:
    with contextlib.suppress(OSError, ValueError):
        return int(os.pread(fd, 32, 0).decode("ascii").strip() or "x")
    return None


def holder(path: Path) -> int | None:
    """The PID of the run holding the lock file ``path`` (0 when it holds it but wrote no PID), None when no run
    holds it (a left-over file, or none). Opens the file read-only: nothing is created or changed."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return None
    except OSError as err:
        if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
            return None
        return _read_pid(fd) or 0
    finally:
        os.close(fd)


def take(directory: Path, what: str = "train.save_dir") -> RunLock:
    """Hold the run lock of ``directory`` (which exists) until :meth:`RunLock.release` or the process ends; a
    folder another run holds is one line naming its PID, and nothing in the folder is changed."""
    path = Path(directory) / LOCK_NAME
    while True:
        other = holder(path)
        if other is not None:
            raise _busy(directory, what, other)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            pid = _read_pid(fd)
            os.close(fd)
            if err.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise _busy(directory, what, pid or 0) from None
            raise
        if _same(path, fd):                            # not a file the previous holder removed meanwhile
            with contextlib.suppress(OSError):         # the PID only names the holder (a full disk: unnamed)
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
            return RunLock(path, fd)
        os.close(fd)


def _busy(directory: Path, what: str, pid: int) -> CtxmtError:
    who = f"PID {pid}" if pid else "another process"
    return CtxmtError(f"{what} {directory} is in use by another ctxmt train run ({who}); wait for it to finish, "
                      f"stop it, or set another {what} (nothing was changed)")
