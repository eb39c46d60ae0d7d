"""What ctxmt writes: atomic files, output directories it owns, and the litter a killed run leaves.

Atomic files. Every file a command writes is first written to a temp file beside it, named
``.NAME.ctxmt-tmp-PID-RANDOM`` (same file system, so the rename is atomic), flushed to disk and renamed
over ``NAME``; the temp file is removed on every failure, a KeyboardInterrupt included, so a full disk or
a Ctrl-C (SIGTERM and SIGHUP alike, :mod:`ctxmt_cli.signals`) never leaves a 0-byte or half-written output
that blocks a retry. A kill -9 skips every cleanup: :func:`~ctxmt_cli.temps.remove_stale` deletes temps of this
naming whose writing process is gone and puts back the outputs such a run had set aside (:mod:`ctxmt_cli.temps`).

Output directories a command owns, their manifests and ``--force`` are :mod:`ctxmt_cli.ownership`'s.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from ctxmt_cli.temps import (  # noqa: F401 (TEMP_TAG, ASIDE_TAG and remove_stale re-exported for every writer)
    ASIDE_TAG,
    TEMP_TAG,
    remove_stale,
    temp_name,
)
from ctxmt_cli.temps import disk_full as _disk_full
from ctxmt_cli.temps import fsync_dir as _fsync_dir


# ---- atomic files ----------------------------------------------------------------------------------------------
def _named(err: BaseException, target: Path, full: bool) -> OSError | None:
    """The error to raise instead of ``err``, naming ``target`` (the file the user knows, not the temp): an OS
    error, also one that a writer's RuntimeError hides in its context (torch's zip writer, whose
    end-of-file record fails after Python's own ENOSPC), or ENOSPC when the disk was ``full``."""
    seen = err if isinstance(err, (OSError, RuntimeError)) else None
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno is not None:
            return OSError(seen.errno, seen.strerror, str(target))
        seen = seen.__cause__ or seen.__context__
    if isinstance(err, RuntimeError) and full:
        return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(target))
    return None


@contextlib.contextmanager
def atomic_path(target: Path) -> Iterator[Path]:
    """Yield a temp path beside ``target`` to write; on success it is fsynced and renamed over ``target``, on
    any failure removed (an OSError, or a writer's RuntimeError on a full disk, then names ``target``)."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_name(target)
    try:
        yield tmp
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())            # the data on disk before the rename makes it visible
        os.replace(tmp, target)
    except BaseException as err:
        full = isinstance(err, RuntimeError) and _disk_full(target.parent)     # before the temp frees its space
        with contextlib.suppress(OSError):
            tmp.unlink()
        replacement = _named(err, target, full)
        if replacement is not None:
            raise replacement from err
        raise
    _fsync_dir(target.parent)


@contextlib.contextmanager
def atomic_file(target: Path, mode: str = "w", encoding: str | None = "utf-8") -> Iterator:
    """Open a temp file beside ``target`` (``mode`` "w" text or "wb" binary); closed and renamed over
    ``target`` when the block ends without an error, removed otherwise."""
    with atomic_path(target) as tmp:
        kwargs = {"encoding": encoding, "newline": "\n"} if "b" not in mode else {}
        with open(tmp, mode, **kwargs) as handle:
            yield handle


def write_atomic(target: Path, data: str | bytes) -> Path:
    """Write ``data`` (text as UTF-8) to ``target`` atomically; returns ``target``."""
    with atomic_file(target, "wb", None) as handle:
        handle.write(data.encode("utf-8") if isinstance(data, str) else data)
    return Path(target)


def write_json(target: Path, value, indent: int = 2) -> Path:
    """``value`` as indented UTF-8 JSON (one trailing newline) in ``target``, atomically."""
    return write_atomic(target, json.dumps(value, indent=indent, ensure_ascii=False) + "\n")


def copy_atomic(source: Path, target: Path) -> Path:
    """Copy the bytes of ``source`` to ``target`` atomically."""
    with atomic_path(target) as tmp:
        shutil.copyfile(source, tmp)
    return Path(target)


def torch_save(obj, target: Path) -> Path:
    """``torch.save`` to ``target`` atomically, through a Python file object so a full disk surfaces as Python's
    own ``OSError(ENOSPC)`` rather than the zip writer's RuntimeError."""
    import torch

    with atomic_file(target, "wb", None) as handle:
        torch.save(obj, handle)
    return Path(target)




def file_sha256(path: Path) -> str:
    """Streaming sha256 of a file (checkpoints can be large)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
