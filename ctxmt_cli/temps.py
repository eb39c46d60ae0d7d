"""Temp and set-aside names, and cleaning up after a run that is gone.

A file or directory being written is a temp beside its target, ``.NAME.ctxmt-tmp-PID-HEX``; an output that a
run replaces is first set aside as ``.NAME.ctxmt-old-PID-HEX`` (:func:`set_aside`) and deleted only once the new
one stands, renamed to a temp name first (:func:`renamed_to_temp`): so an aside that is still there means its
run never committed, and it holds the only whole copy of that output. Ctrl-C, SIGTERM and SIGHUP unwind through
every cleanup (:mod:`ctxmt_cli.signals`); a kill -9 or a power cut skips them all, and the next run into the
same folder calls :func:`remove_stale`: the temps of runs that are gone are deleted and their asides are put
back in place (:func:`restore_aside`), never deleted.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import uuid
from pathlib import Path

#: the file that marks a directory as a ctxmt output (:mod:`ctxmt_cli.outputs`)
MANIFEST = ".ctxmt-output.json"
TEMP_TAG = ".ctxmt-tmp-"
ASIDE_TAG = ".ctxmt-old-"
#: ``.NAME.ctxmt-tmp-PID-HEX`` (a temp file or directory being written) or ``.NAME.ctxmt-old-PID-HEX`` (an
#: output set aside while its replacement is installed)
OURS = re.compile(r"^\..+\.ctxmt-(?:tmp|old)-(\d+)-[0-9a-f]{8}$")
ASIDE = re.compile(r"^\..+\.ctxmt-old-\d+-[0-9a-f]{8}$")


def temp_name(target: Path, tag: str = TEMP_TAG) -> Path:
    """A fresh temp path beside ``target`` that :func:`remove_stale` recognises once its writer is gone."""
    target = Path(target)
    return target.with_name(f".{target.name}{tag}{os.getpid()}-{uuid.uuid4().hex[:8]}")


def fsync_dir(directory: Path) -> None:
    """Persist a rename (best effort: not every platform can open a directory)."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def disk_full(directory: Path) -> bool:
    """Whether the file system of ``directory`` has (next to) no space left: a writer that does not report
    ENOSPC itself (torch's zip writer raises RuntimeError, SentencePiece writes a truncated model) failed
    because of it."""
    try:
        usage = os.statvfs(directory)
    except OSError:
        return False
    return usage.f_bavail * usage.f_frsize < 1 << 16


def alive(pid: int) -> bool:
    """Whether the process ``pid`` (a temp's writer) still runs."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:                     # exists, owned by someone else
        return True
    return True


def remove_stale(directory: Path) -> list[Path]:
    """Clean up after the runs in ``directory`` whose process is gone (a kill -9 or a power cut skips every
    cleanup): delete their temp files and directories, and put back each output they had set aside
    (:func:`restore_aside`: such a copy may be the only one, so it is never deleted); returns what was removed."""
    directory = Path(directory)
    removed = []
    if not directory.is_dir() or directory.is_symlink():
        return removed
    for entry in sorted(os.scandir(directory), key=lambda e: ASIDE.match(e.name) is None):     # asides first
        match = OURS.match(entry.name)
        if match is None or alive(int(match.group(1))):
            continue
        path = Path(entry.path)
        if ASIDE.match(entry.name):
            removed.extend(restore_aside(path))
            continue
        with contextlib.suppress(OSError):
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(path)
            else:
                path.unlink()
            removed.append(path)
    return removed


def aside_of(aside: Path) -> Path:
    """The output that ``aside`` (``.NAME.ctxmt-old-PID-HEX``) was set aside from: ``NAME`` beside it."""
    aside = Path(aside)
    return aside.with_name(aside.name[1:aside.name.rindex(ASIDE_TAG)])


def restore_aside(aside: Path) -> list[Path]:
    """Put the output that a run which is gone set aside in ``aside`` back in place; returns what was removed.

    An aside still standing means its run never committed (a committed run renames it to a temp name before
    deleting it), so it holds the output as it was before that run. What stands in its place is then that
    run's unfinished replacement: removed when it is ctxmt's (empty, or holding a manifest). Anything else
    there keeps both where they are: nothing that could be the only copy of an output is deleted."""
    aside, out = Path(aside), aside_of(aside)
    removed = []
    try:
        if out.is_dir() and not out.is_symlink() and not any(out.iterdir()):
            out.rmdir()                                     # a run killed before its manifest: nothing in it
        elif out.exists() or out.is_symlink():
            if out.is_symlink() or not out.is_dir() or not (out / MANIFEST).is_file():
                return removed
            shutil.rmtree(renamed_to_temp(out), ignore_errors=True)
            removed.append(out)
        os.rename(aside, out)
    except OSError:
        return removed
    fsync_dir(out.parent)
    return removed


def set_aside(out: Path) -> Path:
    """Rename the existing output ``out`` to an aside name beside it (put back if the run does not commit)."""
    aside = temp_name(out, ASIDE_TAG)
    os.rename(out, aside)
    return aside


def renamed_to_temp(path: Path) -> Path:
    """``path`` renamed to a temp name beside it, to be deleted: one atomic step, after which a kill leaves only
    litter that :func:`remove_stale` deletes, never a half-deleted aside it would restore."""
    garbage = temp_name(path)
    try:
        os.rename(path, garbage)
    except OSError:
        return path
    return garbage


def put_back(aside: Path | None, out: Path, made: bool) -> None:
    """A run that did not commit: the ``out`` it ``made`` removed, the old one set aside in ``aside`` restored."""
    if made:
        shutil.rmtree(renamed_to_temp(out), ignore_errors=True)     # unlinks symbolic links, never follows them
    if aside is not None:
        os.rename(aside, out)
