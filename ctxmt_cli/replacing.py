"""Replacing an output folder without ever losing the old one: build the new folder beside it, swap it in.

:func:`build_dir` runs a command's build on a temp folder beside ``out`` (``.NAME.ctxmt-tmp-PID-HEX``), gives it
a manifest (:mod:`ctxmt_cli.ownership`) and swaps it into place; :func:`rebuilding` does the same for a
command that fills its folder in place over a long run (``quickstart``). The old folder is first checked
(``--force`` replaces only what ctxmt wrote, unchanged), then set aside, and deleted only once the new one stands;
any failure, a signal included (:mod:`ctxmt_cli.signals`: the swap itself is held whole), removes the new one and
puts the old one back. A kill -9 leaves an aside that the next run restores (:mod:`ctxmt_cli.temps`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TypeVar

from ctxmt_cli.errors import CtxmtError, option
from ctxmt_cli.ownership import check_replaceable, write_manifest
from ctxmt_cli.paths import check_not_input
from ctxmt_cli.signals import Interrupted, held
from ctxmt_cli.temps import fsync_dir, put_back, remove_stale, renamed_to_temp, set_aside, temp_name

T = TypeVar("T")
#: the errors of a full disk (or quota): a run that fails with one names the output, not a file it removed
_FULL = (errno.ENOSPC, errno.EDQUOT)


def check_new_or_replaceable(out: Path, what: str, force: bool, inputs: Iterable = (),
                             kind: str = "a directory ctxmt wrote", *, command: str) -> None:
    """Before any work: ``out`` is new (or an empty directory), or ``force`` and :func:`check_replaceable`. What a
    killed run left beside it is cleaned up first, so ``out`` is seen as it was before that run."""
    out = Path(out)
    check_not_input(out, inputs, what)
    remove_stale(out.parent)
    if out.is_dir() and not out.is_symlink() and os.path.ismount(out):
        raise CtxmtError(f"{what} {out} is a mount point: ctxmt builds its output beside {what} and swaps it in, "
                         f"which a mount point does not allow; give a folder inside it, e.g. {out / 'out'}")
    if out.is_dir() and not out.is_symlink() and not any(out.iterdir()):
        return
    if out.exists() or out.is_symlink():
        if not force:
            raise CtxmtError(f"{what} {out} already exists; pass {option('force')} to overwrite it or choose another "
                             f"{what}")
        check_replaceable(out, what, inputs, kind, command=command)


def _make_way(out: Path, what: str, inputs: Iterable = (), *, command: str) -> bool:
    """Before ``out`` is replaced: an empty folder there is removed, anything else checked again (it must still be
    ctxmt's); whether something remains to be set aside."""
    if out.is_dir() and not out.is_symlink() and not any(out.iterdir()):
        out.rmdir()
        return False
    if out.exists() or out.is_symlink():
        check_replaceable(out, what, inputs, command=command)
        return True
    return False


def _set_aside(out: Path, what: str) -> Path:
    """Move ``out`` out of the way (:func:`~ctxmt_cli.temps.set_aside`); a busy folder is one line."""
    try:
        return set_aside(out)
    except OSError as err:
        if err.errno != errno.EBUSY:
            raise
        raise CtxmtError(f"{what} {out} is in use (a mount point or busy), so {option('force')} does not "
                         f"replace it; choose another {what}; nothing was deleted") from None


def install_dir(tmp: Path, out: Path, what: str, inputs: Iterable = (), *, command: str) -> None:
    """Swap the finished directory ``tmp`` into place at ``out`` (checked again just before: a replaced ``out``
    must still be ctxmt's); the old ``out`` is removed only once the new one stands."""
    tmp, out = Path(tmp), Path(out)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o777 & ~umask)                                 # mkdtemp makes it private
    replacing = _make_way(out, what, inputs, command=command)
    with held():                                                 # a signal waits until the swap is whole
        aside = _set_aside(out, what) if replacing else None
        try:
            os.rename(tmp, out)
        except BaseException:
            if aside is not None:
                os.rename(aside, out)
            raise
        garbage = renamed_to_temp(aside) if aside is not None else None     # the commit: the old output goes
    if garbage is not None:
        shutil.rmtree(garbage, ignore_errors=True)               # rmtree unlinks symbolic links, never follows them
    fsync_dir(out.parent)


def build_dir(out: Path, command: str, build: Callable[[Path], T], *, what: str = option("out"), force: bool = False,
              inputs: Iterable = ()) -> T:
    """Run ``build(tmp)`` on a new directory beside ``out``, give it a manifest listing every file it wrote and
    swap it into place; any failure removes the new directory and keeps the old ``out``. Returns what ``build``
    returns."""
    out, inputs = Path(out), list(inputs)
    check_new_or_replaceable(out, what, force, inputs, command=command)      # (it cleans up after killed runs)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_name(out)
    tmp.mkdir()
    try:
        result = build(tmp)
        write_manifest(tmp, command)
        install_dir(tmp, out, what, inputs, command=command)
    except BaseException as err:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(err, OSError) and err.errno is not None:   # name the output, not the temp directory
            raise OSError(err.errno, err.strerror, str(out)) from err
        raise
    return result


@contextlib.contextmanager
def rebuilding(out: Path, command: str, *, what: str = option("out")) -> Iterator[Path]:
    """For a command that writes its output directory in place over a long run (``quickstart``): set an existing
    ``out`` (already checked with :func:`check_new_or_replaceable`) aside, give the new one a manifest listing
    nothing yet (the command :func:`record`\\ s its parts as they are done), and on success list everything
    written and delete the old one; on any failure the new directory is removed and the old one put back."""
    out = Path(out)
    remove_stale(out.parent)
    replacing = _make_way(out, what, command=command)
    aside, made = None, False
    try:
        with held():                      # a signal waits until the old output is aside and the new one is ours
            aside = _set_aside(out, what) if replacing else None
            out.mkdir(parents=True)
            made = True
        write_manifest(out, command, listed=False)
        yield out
        write_manifest(out, command)
    except BaseException as err:
        put_back(aside, out, made)       # nothing half-built stays: the old output, or none, as before
        if isinstance(err, Interrupted):
            err.note = ""                 # what it kept (a training run's checkpoint) went with the new output
        if isinstance(err, OSError) and err.errno in _FULL:      # name the output, not a file now removed
            raise OSError(err.errno, err.strerror, str(out)) from err
        raise
    if aside is not None:
        shutil.rmtree(renamed_to_temp(aside), ignore_errors=True)
