"""What ctxmt owns: the exact files it wrote into a folder, and ``--force`` replacing nothing else.

The manifest. A folder a command writes as its output holds ``.ctxmt-output.json``: the command, the ctxmt
version and, for every file it wrote, the path inside the folder with its size and sha256, plus the folders it
made (``dirs``). A folder with a manifest of its own inside another (a quickstart's prepared data and training
runs) is listed among ``dirs`` and accounts for its own contents. Files that grow or come later (a training
run's checkpoints, ``metrics.jsonl``, TensorBoard events, plots; a first-pass stream added to a prepared
dataset) are recorded as they are written (:func:`record`), by exact path, never by a name pattern.

``--force``. :func:`check_replaceable` allows replacing a folder only when every entry in it is accounted for:
listed, the same size and hash as recorded (a file edited since is not ctxmt's any more), not a symbolic link,
not a mount point, not the lock of a run still going (:mod:`ctxmt_cli.run_lock`). Otherwise one line names the
first entry in the way and nothing is deleted. A folder without a manifest is never replaced; an older
manifest (names only, ``entries``, and name patterns) accounts for exactly those names, none by a pattern.
Replacing builds the new folder beside the old one and swaps them (:func:`ctxmt_cli.replacing.build_dir`), so a
failure keeps the old one.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ctxmt_cli.errors import CtxmtError, option
from ctxmt_cli.outputs import file_sha256, write_json
from ctxmt_cli.paths import check_not_input
from ctxmt_cli.run_lock import LOCK_NAME, holder
from ctxmt_cli.temps import MANIFEST, alive
from ctxmt_cli.temps import OURS as _OURS

FORMAT = 2


# ---- the manifest --------------------------------------------------------------------------------------------
@dataclass
class Ledger:
    """A folder's manifest: who wrote it, ``files`` (path -> {size, sha256}; None: a name an older manifest
    listed without a hash, kept as it was) and ``dirs``; ``extra``: other fields kept as they are (a run's
    ``init_from``)."""

    command: str
    files: dict = field(default_factory=dict)
    dirs: set = field(default_factory=set)
    extra: dict = field(default_factory=dict)


def _fingerprint(path: Path) -> dict:
    return {"size": path.stat().st_size, "sha256": file_sha256(path)}


def _bookkeeping(name: str) -> bool:
    """ctxmt's own files in an output folder that no manifest lists: the manifest, a run's lock, temps."""
    return name in (MANIFEST, LOCK_NAME) or _OURS.match(name) is not None


def read_ledger(directory: Path) -> Ledger | None:
    """The manifest of ``directory``, or None (none, unreadable, or a symbolic link)."""
    path = Path(directory) / MANIFEST
    if not path.is_file() or path.is_symlink():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        command = str(record.pop("command", "ctxmt"))
        record.pop("version", None)
        if record.pop("ctxmt_output", None) == FORMAT:       # (not kept among the extra fields: saved anew)
            files = {str(k): None if v is None else {"size": int(v["size"]), "sha256": str(v["sha256"])}
                     for k, v in record.pop("files").items()}
            return Ledger(command, files, {str(d) for d in record.pop("dirs")}, record)
        names = [str(n) for n in record.pop("entries", [])]       # an older manifest: its exact names only
        record.pop("patterns", None)
        dirs = {n for n in names if (Path(directory) / n).is_dir()}
        return Ledger(command, {n: None for n in names if n not in dirs}, dirs, record)
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError, TypeError, KeyError, ValueError, OSError):
        return None


def save_ledger(directory: Path, ledger: Ledger) -> Path:
    """Write ``ledger`` as ``directory``'s manifest (atomically)."""
    from ctxmt_cli import __version__

    files = {k: ledger.files[k] for k in sorted(ledger.files)}
    value = {"ctxmt_output": FORMAT, "command": ledger.command, "version": __version__, **ledger.extra,
             "files": files, "dirs": sorted(ledger.dirs)}
    path = Path(directory) / MANIFEST
    with contextlib.suppress(OSError, ValueError):
        if json.loads(path.read_text(encoding="utf-8")) == value:      # unchanged: nothing to write
            return path
    return write_json(path, value)


def _scan(directory: Path, ledger: Ledger, prefix: str = "") -> None:
    """Record every file and folder under ``directory`` in ``ledger`` (a folder with its own manifest as a folder
    only; links and ctxmt's bookkeeping files never)."""
    for entry in os.scandir(directory):
        rel = prefix + entry.name
        if entry.is_symlink() or _bookkeeping(entry.name):
            continue
        if entry.is_dir(follow_symlinks=False):
            ledger.dirs.add(rel)
            if not (Path(entry.path) / MANIFEST).exists():
                _scan(Path(entry.path), ledger, rel + "/")
        elif entry.is_file(follow_symlinks=False):
            ledger.files[rel] = _fingerprint(Path(entry.path))


def write_manifest(directory: Path, command: str, *, listed: bool = True, record: dict | None = None) -> Path:
    """Record ``directory`` as ``command``'s output: every file now in it with its size and hash (``listed``;
    else none yet), and ``record``'s fields (e.g. a run's ``init_from``)."""
    ledger = Ledger(command, extra=dict(record or {}))
    if listed:
        _scan(Path(directory), ledger)
    return save_ledger(directory, ledger)


def claim(directory: Path, command: str, record: dict | None = None) -> None:
    """Give ``directory``, which ``command`` fills over time (a training run's ``save_dir``), a manifest listing
    nothing yet unless it has one: what is there already stays foreign until :func:`record` lists it."""
    if read_ledger(directory) is None:
        write_manifest(directory, command, listed=False, record=record)


def record(directory: Path, paths: Iterable[Path], *, command: str | None = None,
           copies: dict | None = None) -> None:
    """List ``paths`` (inside ``directory``) in its manifest as they are now: a file with its size and hash, a
    folder (and the folders above it) as ctxmt's, a path that is gone dropped. Without a manifest, one is
    started for ``command`` (None: nothing is recorded). ``copies`` maps a path to one it is a fresh copy of
    (same bytes: hashed once)."""
    directory = Path(directory)
    ledger = read_ledger(directory)
    if ledger is None:
        if command is None or not directory.is_dir():
            return
        ledger = Ledger(command)
    known: dict = {}
    for path in sorted({Path(p) for p in paths}, key=lambda p: p in (copies or {})):
        rel = path.relative_to(directory).as_posix()
        parents = [p.as_posix() for p in Path(rel).parents if p != Path(".")]
        if path.is_file() and not path.is_symlink():
            source = (copies or {}).get(path)
            entry = known.get(source) if source is not None else None
            known[path] = ledger.files[rel] = entry if entry and entry["size"] == path.stat().st_size \
                else _fingerprint(path)
            ledger.dirs.update(parents)
        elif path.is_dir() and not path.is_symlink():
            ledger.dirs.update([rel, *parents])
        else:
            ledger.files.pop(rel, None)
            ledger.dirs.discard(rel)
    save_ledger(directory, ledger)


def record_in_folder(folder: Path, paths: Iterable[Path], *, command: str) -> None:
    """Record files a command wrote into ``folder`` in the manifest that owns it: ``folder``'s own, else the one
    above it (a training run's ``plots/``), else a new one in ``folder`` for ``command``."""
    folder = Path(folder)
    owner = folder if read_ledger(folder) is not None or read_ledger(folder.parent) is None else folder.parent
    record(owner, paths, command=command)


def _owner(path: Path) -> tuple[Ledger | None, str]:
    """The nearest manifest above ``path`` and ``path`` relative to its folder (None, "" when there is none)."""
    for folder in Path(os.path.abspath(path)).parents:
        ledger = read_ledger(folder)
        if ledger is not None:
            return ledger, Path(os.path.abspath(path)).relative_to(folder).as_posix()
    return None, ""


# ---- what is in the way of --force ------------------------------------------------------------------------------
def _changed(path: Path, listed: dict | None) -> bool:
    if listed is None:                                   # an older manifest's name: no size or hash to compare
        return False
    return path.stat().st_size != listed["size"] or file_sha256(path) != listed["sha256"]


def _in_the_way(entry: os.DirEntry, rel: str, ledger: Ledger, device: int) -> str | None:
    """Why ``entry`` (``rel`` inside the folder ``ledger`` describes) stops ``--force``, or None."""
    path = Path(entry.path)
    if entry.is_symlink():
        return "is a symbolic link"
    if entry.name == LOCK_NAME:
        pid = holder(path)
        return None if pid is None else f"is the lock of a ctxmt train run still going (PID {pid})"
    match = _OURS.match(entry.name)
    if match is not None:                                # ctxmt's temp: litter once its writer is gone
        return None if not alive(int(match.group(1))) else f"is being written by ctxmt (PID {match.group(1)})"
    if entry.name == MANIFEST:
        return None
    if entry.is_dir(follow_symlinks=False):
        if entry.stat(follow_symlinks=False).st_dev != device:
            return "is a mount point"
        return None if rel in ledger.dirs else "is a directory ctxmt did not write"
    if not entry.is_file(follow_symlinks=False) or rel not in ledger.files:
        return "is not a file ctxmt wrote"
    return "has changed since ctxmt wrote it" if _changed(path, ledger.files[rel]) else None


def first_foreign(directory: Path, ledger: Ledger, prefix: str = "") -> tuple[Path, str] | None:
    """The first entry under ``directory`` that ``ledger`` does not account for, and why; None when all are
    ctxmt's, unchanged."""
    device = os.stat(directory).st_dev
    for entry in sorted(os.scandir(directory), key=lambda e: e.name):
        rel = prefix + entry.name
        why = _in_the_way(entry, rel, ledger, device)
        if why is not None:
            return Path(entry.path), why
        if entry.is_dir(follow_symlinks=False) and not entry.is_symlink():
            own = read_ledger(Path(entry.path))
            if own is None and (Path(entry.path) / MANIFEST).exists():
                return Path(entry.path) / MANIFEST, "is a manifest ctxmt cannot read"
            found = first_foreign(Path(entry.path), own) if own is not None else \
                first_foreign(Path(entry.path), ledger, rel + "/")
            if found is not None:
                return found
    return None


def _mount_in(out: Path) -> Path | None:
    """A mount point at or under ``out`` (renaming or deleting it fails half-way with EBUSY, or reaches into
    another file system), from /proc/self/mountinfo; where that cannot be read, ``out`` itself when it is one."""
    real = os.path.realpath(out)
    try:
        lines = Path("/proc/self/mountinfo").read_text(encoding="utf-8").splitlines()
    except OSError:
        return Path(real) if os.path.ismount(out) else None
    for line in lines:
        fields = line.split(" ")
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4]) if len(fields) > 4 else ""
        if point == real or point.startswith(real.rstrip("/") + "/"):
            return Path(point)
    return None


def _replaces(command: str) -> str:
    """What ``--force`` of ``command`` may replace: the output of the same command (every ``prepare`` format and
    ``prepare reverse|docrepair`` write one kind, a prepared dataset)."""
    return "prepare" if command.startswith("prepare") else command


def check_replaceable(out: Path, what: str, inputs: Iterable = (), kind: str = "a directory ctxmt wrote", *,
                      command: str) -> None:
    """``--force`` of ``command`` may replace the existing ``out`` only if ``command`` wrote it (``kind`` in the
    message: a quickstart never replaces a training run, an export never a prepared dataset) and every entry in
    it is a file or folder its manifest lists, unchanged (no link, no mount point, none of ``inputs``);
    otherwise one line naming the first entry in the way."""
    out = Path(out)
    advice = f"move it away or choose another {what}; nothing was deleted"
    if out.is_symlink():
        raise CtxmtError(f"{what} {out} is a symbolic link, so {option('force')} does not replace it; {advice}")
    if not out.is_dir():
        raise CtxmtError(f"{what} {out} is a file, not {kind}, so {option('force')} does not replace it; {advice}")
    mount = _mount_in(out)
    if mount is not None:
        where = "is a mount point" if mount == Path(os.path.realpath(out)) else f"holds {mount}, which is a mount point"
        raise CtxmtError(f"{what} {out} {where}, so {option('force')} does not replace it (it cannot be moved or "
                         f"removed); {advice}")
    check_not_input(out, inputs, what)
    ledger = read_ledger(out)
    if ledger is None:
        raise CtxmtError(f"{what} {out} is not {kind} (no {MANIFEST} listing the files ctxmt wrote), so "
                         f"{option('force')} does not replace it; {advice}")
    if _replaces(ledger.command) != _replaces(command):
        raise CtxmtError(f"{what} {out} was written by ctxmt {ledger.command}, not {kind}, so {option('force')} of "
                         f"ctxmt {command} does not replace it; {advice}")
    found = first_foreign(out, ledger)
    if found is not None:
        raise CtxmtError(f"{what} {out} holds {found[0]}, which {found[1]}, so {option('force')} does not replace it; "
                         f"{advice}")


def check_files_replaceable(paths: Iterable[Path], what: str, force: bool) -> None:
    """Files a command writes into a folder it shares (``contrastive --out DIR``): an existing one is replaced only
    with ``force``, and only when the folder's manifest lists it unchanged (a user's file of the same name, or
    ctxmt's edited since, stays)."""
    for path in (Path(p) for p in paths):
        if not (path.exists() or path.is_symlink()):
            continue
        if not force:
            raise CtxmtError(f"{what} {path} already exists; pass {option('force')} to overwrite it or choose another "
                             f"{option('out')}")
        ledger, rel = _owner(path)
        listed = ledger is not None and rel in ledger.files and not path.is_symlink() and path.is_file()
        why = "is not a file ctxmt wrote" if not listed else \
            "has changed since ctxmt wrote it" if _changed(path, ledger.files[rel]) else None
        if why is not None:
            raise CtxmtError(f"{what} {path} {why}, so {option('force')} does not replace it; move it away or choose "
                             f"another {option('out')}; nothing was replaced")
