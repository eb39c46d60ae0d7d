"""What ctxmt writes: atomic files that leave nothing behind on a failure, and stale temps removed (``--force`` and
the manifests: ``test_ownership.py``)."""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import pytest

from ctxmt_cli.outputs import TEMP_TAG, atomic_file, remove_stale, temp_name, torch_save, write_atomic
from tests.tmpfs import mounted_tmpfs


def listing(root: Path) -> dict:
    """Every path under ``root`` with its bytes (None for a directory, the target for a link)."""
    found = {}
    for p in sorted(root.rglob("*")):
        found[str(p.relative_to(root))] = (os.readlink(p) if p.is_symlink() else
                                           None if p.is_dir() else p.read_bytes())
    return found


def test_atomic_write_replaces_and_leaves_no_temp(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old")
    write_atomic(target, "new ü")
    assert target.read_text(encoding="utf-8") == "new ü" and listing(tmp_path) == {"out.txt": "new ü".encode()}


@pytest.mark.parametrize("failure", [OSError(errno.ENOSPC, "No space left on device"), KeyboardInterrupt()])
def test_a_failed_write_keeps_the_old_file_and_no_temp(tmp_path, failure):
    target = tmp_path / "out.txt"
    target.write_text("old")
    with pytest.raises(type(failure)) as caught:
        with atomic_file(target) as handle:
            handle.write("half")
            raise failure
    if isinstance(failure, OSError):                     # the error names the file the user asked for
        assert caught.value.filename == str(target) and caught.value.errno == errno.ENOSPC
    assert listing(tmp_path) == {"out.txt": b"old"}


def test_a_new_file_that_fails_is_not_left_empty(tmp_path):
    with pytest.raises(OSError):
        with atomic_file(tmp_path / "fig.png", "wb", None):
            raise OSError(errno.ENOSPC, "No space left on device")
    assert listing(tmp_path) == {}


def test_stale_temps_of_a_gone_writer_are_removed_and_live_ones_kept(tmp_path):
    gone = _dead_pid()
    dead_file = tmp_path / f".out.txt{TEMP_TAG}{gone}-0123abcd"
    dead_dir = tmp_path / f".prep{TEMP_TAG}{gone}-89abcdef"
    aside = tmp_path / f".kept.ctxmt-old-{gone}-89abcdef"        # set aside, never committed: put back, not deleted
    dead_file.write_text("half")
    for folder in (dead_dir, aside):
        folder.mkdir()
        (folder / "x.bin").write_bytes(b"x")
    mine = temp_name(tmp_path / "out.txt")             # this process is alive: its temp stays
    mine.write_text("being written")
    (tmp_path / ".out.txt.tmp123").write_text("not ctxmt's naming")
    removed = remove_stale(tmp_path)
    assert sorted(removed) == sorted([dead_file, dead_dir])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([mine.name, ".out.txt.tmp123", "kept"])
    assert (tmp_path / "kept" / "x.bin").read_bytes() == b"x"


def _dead_pid() -> int:
    """The id of a process that has exited."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


@pytest.fixture
def full_disk(tmp_path):
    """A 1 MiB tmpfs mounted on ``tmp_path / "disk"`` (unmounted afterwards); skipped where mounting fails."""
    yield from mounted_tmpfs(tmp_path / "disk", "1m")


def test_torch_save_on_a_full_disk_is_an_os_error_and_leaves_no_temp(full_disk):
    torch = pytest.importorskip("torch")
    (full_disk / "old.pt").write_bytes(b"the previous checkpoint")
    with pytest.raises(OSError) as caught:
        torch_save({"w": torch.zeros(400, 1000)}, full_disk / "old.pt")
    assert caught.value.errno == errno.ENOSPC and caught.value.filename == str(full_disk / "old.pt")
    assert listing(full_disk) == {"old.pt": b"the previous checkpoint"}
