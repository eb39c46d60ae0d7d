"""What ctxmt writes: atomic files, output directories it owns, and the litter a killed run leaves.

Atomic files. Every file a command writes is first written to a temp file beside it, named
``.NAME.ctxmt-tmp-PID-RANDOM`` (same file system, so the rename is atomic), flushed to disk and renamed
over ``NAME``; the temp file is removed on every failure, a KeyboardInterrupt included, so a full disk or
a Ctrl-C (SIGTERM and SIGHUP alike, :mod:`ctxmt_cli.signals`) never leaves a 0-byte or half-written output
that blocks a retry. A kill -9 skips every cleanup: :func:`~ctxmt_cli.temps.remove_stale` deletes temps of this
naming whose writing process is gone and puts back the outputs such a run had set aside (:mod:`ctxmt_cli.temps`).

Owned directories. A directory a command creates as its output gets a manifest, ``.ctxmt-output.json``,
naming the command, the ctxmt version and the entries it wrote (names, or name patterns for what grows
later, like a training run's checkpoints). ``--force`` replaces a directory only when it holds nothing but
what its manifest lists (:func:`check_replaceable`): a user's file, a directory without a manifest, or a
symbolic link (as the target or inside it) is refused in one line, and nothing is deleted. Replacing builds
the new directory beside the old one and swaps them (:func:`build_dir`), so a failure keeps the old one.
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Callable, Iterable, Iterator, Optional, TypeVar

from ctxmt_cli.errors import CtxmtError, option
from ctxmt_cli.paths import check_not_input
from ctxmt_cli.signals import Interrupted, held
from ctxmt_cli.temps import (  # noqa: F401 (the names and remove_stale re-exported: every writer imports them here)
    ASIDE_TAG,
    MANIFEST,
    TEMP_TAG,
    put_back,
    remove_stale,
    renamed_to_temp,
    set_aside,
    temp_name,
)
from ctxmt_cli.temps import OURS as _OURS
from ctxmt_cli.temps import disk_full as _disk_full
from ctxmt_cli.temps import fsync_dir as _fsync_dir

#: the errors of a full disk (or quota): a run that fails with one names the output, not a file it removed
_FULL = (errno.ENOSPC, errno.EDQUOT)
#: the files of a prepared dataset written before manifests existed (``meta.json`` marks one)
#: (only ctxmt's own naming: a user's ``notes.txt`` or ``results.json`` in such a folder keeps --force away)
LEGACY_DATASET = ("meta.json", "*.src.bin", "*.tgt.bin", "*.src.idx", "*.tgt.idx", "*.docs", "*.ref.txt",
                  "spm.model", "spm.vocab", "spm.src.*", "spm.tgt.*", "*.stream.*", "raw", "raw/*")
#: the files of a CTranslate2 model folder exported before manifests existed (``ctxmt.json`` marks one)
LEGACY_EXPORT = ("ctxmt.json", "model.bin", "config.json", "*vocabulary*", "*.model")
T = TypeVar("T")


# ---- atomic files ----------------------------------------------------------------------------------------------
def _named(err: BaseException, target: Path, full: bool) -> Optional[OSError]:
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
def atomic_file(target: Path, mode: str = "w", encoding: Optional[str] = "utf-8") -> Iterator:
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


# ---- owned directories -----------------------------------------------------------------------------------------
def write_manifest(directory: Path, command: str, patterns: Iterable[str] = (), listed: bool = True,
                   record: Optional[dict] = None) -> Path:
    """Record ``directory`` as ``command``'s output: every entry now in it (``listed``; else none), and
    ``patterns`` for the names it writes later; ``record``: more fields to keep (e.g. a run's ``init_from``)."""
    from ctxmt_cli import __version__

    directory = Path(directory)
    entries = sorted(p.relative_to(directory).as_posix() for p in directory.rglob("*")
                     if p.name != MANIFEST) if listed else []
    return write_json(directory / MANIFEST, {"ctxmt_output": 1, "command": command, "version": __version__,
                                             "entries": entries, "patterns": list(patterns), **(record or {})})


def claim(directory: Path, command: str, patterns: Iterable[str], record: Optional[dict] = None) -> None:
    """Give ``directory``, which ``command`` writes into over time (a training run's ``save_dir``), a manifest
    claiming only the names matching ``patterns`` (with ``record``'s fields), unless it has one; whatever else is
    there stays foreign."""
    if not (Path(directory) / MANIFEST).exists():
        write_manifest(directory, command, patterns, listed=False, record=record)


def _rules(directory: Path) -> Optional[tuple[str, set, list]]:
    """(command, entries, patterns) of ``directory``'s manifest; a legacy prepared dataset's known names; None."""
    manifest = directory / MANIFEST
    if manifest.is_file() and not manifest.is_symlink():
        try:
            record = json.loads(manifest.read_text(encoding="utf-8"))
            return (str(record.get("command", "ctxmt")), set(record.get("entries", [])),
                    list(record.get("patterns", [])))
        except (json.JSONDecodeError, UnicodeDecodeError, AttributeError, TypeError, OSError):
            return None
    if (directory / "meta.json").is_file():
        return "prepare", set(), list(LEGACY_DATASET)
    if (directory / "ctxmt.json").is_file() and (directory / "model.bin").is_file():
        return "export ctranslate2", set(), list(LEGACY_EXPORT)
    return None


def _foreign(directory: Path, rules: tuple[str, set, list], prefix: str = "") -> Optional[tuple[Path, str]]:
    """The first entry under ``directory`` its manifest does not account for, and why; None when all are ctxmt's."""
    _command, entries, patterns = rules
    for entry in sorted(os.scandir(directory), key=lambda e: e.name):
        rel, path = prefix + entry.name, Path(entry.path)
        if entry.is_symlink():
            return path, "is a symbolic link"
        if entry.name == MANIFEST or _OURS.match(entry.name):
            continue
        listed = rel in entries or any(fnmatch.fnmatchcase(rel, p) for p in patterns)
        if entry.is_dir(follow_symlinks=False):
            own = _rules(path) if (path / MANIFEST).exists() else None
            if own is not None:
                found = _foreign(path, own)
            elif listed:
                found = _foreign(path, rules, rel + "/")
            else:
                return path, "is a directory ctxmt did not write"
            if found is not None:
                return found
        elif not listed:
            return path, "is not a file ctxmt wrote"
    return None


def _replaces(command: str) -> str:
    """What ``--force`` of ``command`` may replace: the output of the same command (every ``prepare`` format and
    ``prepare reverse|docrepair`` write one kind, a prepared dataset)."""
    return "prepare" if command.startswith("prepare") else command


def check_replaceable(out: Path, what: str, inputs: Iterable = (), kind: str = "a directory ctxmt wrote", *,
                      command: str) -> None:
    """``--force`` of ``command`` may replace the existing ``out`` only if ``command`` wrote it (``kind`` in the
    message: a quickstart never replaces a training run, an export never a prepared dataset) and it holds
    nothing else, no symbolic link and none of the command's ``inputs``; otherwise one line naming what is in
    the way."""
    out = Path(out)
    advice = f"move it away or choose another {what}; nothing was deleted"
    if out.is_symlink():
        raise CtxmtError(f"{what} {out} is a symbolic link, so {option('force')} does not replace it; {advice}")
    if not out.is_dir():
        raise CtxmtError(f"{what} {out} is a file, not {kind}, so {option('force')} does not replace it; {advice}")
    check_not_input(out, inputs, what)
    rules = _rules(out)
    if rules is None:
        raise CtxmtError(f"{what} {out} is not {kind} (no {MANIFEST} nor a prepared dataset's meta.json), so "
                         f"{option('force')} does not replace it; {advice}")
    if _replaces(rules[0]) != _replaces(command):
        raise CtxmtError(f"{what} {out} was written by ctxmt {rules[0]}, not {kind}, so {option('force')} of ctxmt "
                         f"{command} does not replace it; {advice}")
    found = _foreign(out, rules)
    if found is not None:
        raise CtxmtError(f"{what} {out} holds {found[0]}, which {found[1]}, so {option('force')} does not replace it; "
                         f"{advice}")


def check_new_or_replaceable(out: Path, what: str, force: bool, inputs: Iterable = (),
                             kind: str = "a directory ctxmt wrote", *, command: str) -> None:
    """Before any work: ``out`` is new (or an empty directory), or ``force`` and :func:`check_replaceable`. What a
    killed run left beside it is cleaned up first, so ``out`` is seen as it was before that run."""
    out = Path(out)
    remove_stale(out.parent)
    if out.is_dir() and not out.is_symlink() and not any(out.iterdir()):
        return
    if out.exists() or out.is_symlink():
        if not force:
            raise CtxmtError(f"{what} {out} already exists; pass {option('force')} to overwrite it or choose another "
                             f"{what}")
        check_replaceable(out, what, inputs, kind, command=command)


def install_dir(tmp: Path, out: Path, what: str, inputs: Iterable = (), *, command: str) -> None:
    """Swap the finished directory ``tmp`` into place at ``out`` (checked again just before: a replaced ``out``
    must still be ctxmt's); the old ``out`` is removed only once the new one stands."""
    tmp, out = Path(tmp), Path(out)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o777 & ~umask)                                 # mkdtemp makes it private
    aside = None
    if out.is_dir() and not out.is_symlink() and not any(out.iterdir()):
        out.rmdir()
    elif out.exists() or out.is_symlink():
        check_replaceable(out, what, inputs, command=command)
    with held():                                                 # a signal waits until the swap is whole
        if out.exists() or out.is_symlink():
            aside = set_aside(out)
        try:
            os.rename(tmp, out)
        except BaseException:
            if aside is not None:
                os.rename(aside, out)
            raise
        garbage = renamed_to_temp(aside) if aside is not None else None     # the commit: the old output goes
    if garbage is not None:
        shutil.rmtree(garbage, ignore_errors=True)               # rmtree unlinks symbolic links, never follows them
    _fsync_dir(out.parent)


def build_dir(out: Path, command: str, build: Callable[[Path], T], *, what: str = option("out"), force: bool = False,
              inputs: Iterable = (), patterns: Iterable[str] = ()) -> T:
    """Run ``build(tmp)`` on a new directory beside ``out``, give it a manifest and swap it into place; any
    failure removes the new directory and keeps the old ``out``. Returns what ``build`` returns."""
    out, inputs = Path(out), list(inputs)
    check_new_or_replaceable(out, what, force, inputs, command=command)
    out.parent.mkdir(parents=True, exist_ok=True)
    remove_stale(out.parent)
    tmp = temp_name(out)
    tmp.mkdir()
    try:
        result = build(tmp)
        write_manifest(tmp, command, patterns)
        install_dir(tmp, out, what, inputs, command=command)
    except BaseException as err:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(err, OSError) and err.errno is not None:   # name the output, not the temp directory
            raise OSError(err.errno, err.strerror, str(out)) from err
        raise
    return result


@contextlib.contextmanager
def rebuilding(out: Path, command: str, patterns: Iterable[str], *, what: str = option("out")) -> Iterator[Path]:
    """For a command that writes its output directory in place over a long run (``quickstart``): set an existing
    ``out`` (already checked with :func:`check_new_or_replaceable`) aside, give the new one a manifest claiming
    ``patterns``, and on success list what was written and delete the old one; on any failure the new
    directory is removed and the old one put back."""
    out, patterns = Path(out), list(patterns)
    aside, made = None, False
    remove_stale(out.parent)
    if out.is_dir() and not out.is_symlink() and not any(out.iterdir()):
        out.rmdir()
    elif out.exists() or out.is_symlink():
        check_replaceable(out, what, command=command)
    try:
        with held():                      # a signal waits until the old output is aside and the new one is ours
            if out.exists() or out.is_symlink():
                aside = set_aside(out)
            out.mkdir(parents=True)
            made = True
        write_manifest(out, command, patterns, listed=False)
        yield out
        write_manifest(out, command, patterns)
    except BaseException as err:
        put_back(aside, out, made)       # nothing half-built stays: the old output, or none, as before
        if isinstance(err, Interrupted):
            err.note = ""                 # what it kept (a training run's checkpoint) went with the new output
        if isinstance(err, OSError) and err.errno in _FULL:      # name the output, not a file now removed
            raise OSError(err.errno, err.strerror, str(out)) from err
        raise
    if aside is not None:
        shutil.rmtree(renamed_to_temp(aside), ignore_errors=True)


def file_sha256(path: Path) -> str:
    """Streaming sha256 of a file (checkpoints can be large)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
