"""What ctxmt writes: atomic files that leave nothing behind on a failure, stale temps removed, and ``--force``
replacing only a directory ctxmt wrote (its manifest), never a user's file, a foreign folder or a symbolic link."""

from __future__ import annotations

import errno
import json
import os
import subprocess
from pathlib import Path

import pytest

from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.outputs import (
    MANIFEST,
    TEMP_TAG,
    atomic_file,
    build_dir,
    check_replaceable,
    claim,
    rebuilding,
    remove_stale,
    temp_name,
    torch_save,
    write_atomic,
    write_manifest,
)
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


def _owned(tmp_path: Path) -> Path:
    out = tmp_path / "out"
    out.mkdir()
    (out / "a.bin").write_bytes(b"a")
    (out / "sub").mkdir()
    (out / "sub" / "b.txt").write_text("b")
    write_manifest(out, "test", patterns=("*.stream.*",))
    return out


def test_a_directory_holding_only_what_its_manifest_lists_is_replaceable(tmp_path):
    out = _owned(tmp_path)
    (out / "test.fp.stream.bin").write_bytes(b"a stream a later command added")
    check_replaceable(out, "--out", command="test")
    record = json.loads((out / MANIFEST).read_text())
    assert record["command"] == "test" and record["entries"] == ["a.bin", "sub", "sub/b.txt"]


@pytest.mark.parametrize("spoil,needle", [
    (lambda out: (out / "notes.txt").write_text("mine"), "notes.txt, which is not a file ctxmt wrote"),
    (lambda out: (out / "sub" / "notes.txt").write_text("mine"), "notes.txt, which is not a file ctxmt wrote"),
    (lambda out: (out / "photos").mkdir(), "photos, which is a directory ctxmt did not write"),
    (lambda out: (out / "link").symlink_to("/etc"), "link, which is a symbolic link"),
    (lambda out: ((out / "sub" / "b.txt").unlink(), (out / "sub" / "b.txt").symlink_to("/etc/hostname")),
     "b.txt, which is a symbolic link"),
    (lambda out: (out / MANIFEST).unlink(), "is not a directory ctxmt wrote (no .ctxmt-output.json"),
])
def test_anything_ctxmt_did_not_write_stops_force(tmp_path, spoil, needle):
    out = _owned(tmp_path)
    spoil(out)
    before = listing(tmp_path)
    with pytest.raises(CtxmtError, match="nothing was deleted") as caught:
        check_replaceable(out, "--out", command="test")
    assert needle in str(caught.value)
    with pytest.raises(CtxmtError):
        build_dir(out, "test", lambda tmp: (tmp / "new.bin").write_bytes(b"new"), force=True)
    assert listing(tmp_path) == before


def test_a_symbolic_link_as_the_target_is_refused(tmp_path):
    out = _owned(tmp_path)
    (tmp_path / "link").symlink_to(out)
    with pytest.raises(CtxmtError, match="link is a symbolic link, so `force` does not replace it"):
        build_dir(tmp_path / "link", "test", lambda tmp: None, force=True)
    assert (out / "a.bin").read_bytes() == b"a"


def test_a_directory_holding_an_input_is_refused(tmp_path):
    out = _owned(tmp_path)
    with pytest.raises(CtxmtError, match="holds the input .*a.bin"):
        check_replaceable(out, "--out", inputs=[out / "a.bin"], command="test")


def test_build_dir_swaps_and_a_failure_keeps_the_old_directory(tmp_path):
    out = _owned(tmp_path)
    before = listing(tmp_path)

    def broken(tmp: Path):
        (tmp / "half.bin").write_bytes(b"half")
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError) as caught:
        build_dir(out, "test", broken, force=True)
    assert caught.value.filename == str(out) and listing(tmp_path) == before
    with pytest.raises(CtxmtError, match="already exists; pass `force`"):
        build_dir(out, "test", lambda tmp: None)
    build_dir(out, "test", lambda tmp: (tmp / "new.bin").write_bytes(b"new"), force=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST, "new.bin"]


def test_legacy_prepared_dataset_is_recognised_by_its_meta_json(tmp_path):
    out = tmp_path / "prep"
    out.mkdir()
    for name in ("meta.json", "train.src.bin", "train.docs", "spm.model", "valid.ref.txt"):
        (out / name).write_text("x")
    check_replaceable(out, "--out", command="prepare text")
    (out / "notes.txt").write_text("a user's notes: no ctxmt name")
    with pytest.raises(CtxmtError, match="notes.txt"):
        check_replaceable(out, "--out", command="prepare text")


def test_rebuilding_puts_the_old_directory_back_on_failure(tmp_path):
    out = tmp_path / "q"
    with rebuilding(out, "quickstart", ["results.json", "data"]):
        (out / "results.json").write_text("first")
    before = listing(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        with rebuilding(out, "quickstart", ["results.json", "data"]):
            (out / "results.json").write_text("half")
            raise KeyboardInterrupt
    assert listing(tmp_path) == before
    with rebuilding(out, "quickstart", ["results.json", "data"]):
        (out / "results.json").write_text("second")
    assert (out / "results.json").read_text() == "second" and sorted(p.name for p in tmp_path.iterdir()) == ["q"]


def test_claim_covers_only_the_patterns(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "notes.txt").write_text("mine")
    claim(run, "train", ("checkpoint_*.pt",))
    (run / "checkpoint_2.pt").write_bytes(b"c")
    with pytest.raises(CtxmtError, match="notes.txt"):
        check_replaceable(run, "--out", command="train")
    (run / "notes.txt").unlink()
    check_replaceable(run, "--out", command="train")


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


@pytest.mark.parametrize("writer,replacer", [("train", "quickstart"), ("train", "export ctranslate2"),
                                             ("prepare text", "quickstart"), ("quickstart", "prepare text"),
                                             ("export ctranslate2", "prepare synthetic")])
def test_force_replaces_only_the_same_commands_output(tmp_path, writer, replacer):
    """A quickstart --force never deletes a training run or a prepared dataset, an export never a dataset: each
    command replaces only what it wrote itself (every prepare format writes one kind, a prepared dataset)."""
    out = _owned(tmp_path)
    write_manifest(out, writer)
    before = listing(tmp_path)
    with pytest.raises(CtxmtError, match=f"was written by ctxmt {writer}, not .*nothing was deleted"):
        check_replaceable(out, "--out", command=replacer)
    with pytest.raises(CtxmtError):
        build_dir(out, replacer, lambda tmp: None, force=True)
    assert listing(tmp_path) == before


def test_every_prepare_format_replaces_a_prepared_dataset(tmp_path):
    out = _owned(tmp_path)
    write_manifest(out, "prepare synthetic")
    check_replaceable(out, "--out", command="prepare text")
    check_replaceable(out, "--out", command="prepare reverse")
