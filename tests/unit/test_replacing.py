"""Replacing an output folder: the new one is built beside the old and swapped in; a failure or a signal keeps the
old one whole, and ``--force`` never goes through a symbolic link."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.ownership import MANIFEST, read_ledger
from ctxmt_cli.replacing import build_dir, rebuilding
from tests.unit.test_ownership import _owned, listing


def test_a_symbolic_link_as_the_target_is_refused(tmp_path):
    out = _owned(tmp_path)
    (tmp_path / "link").symlink_to(out)
    with pytest.raises(CtxmtError, match="link is a symbolic link, so `force` does not replace it"):
        build_dir(tmp_path / "link", "test", lambda tmp: None, force=True)
    assert (out / "a.bin").read_bytes() == b"a"


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
    assert sorted(read_ledger(out).files) == ["new.bin"]


def test_rebuilding_lists_what_was_written_and_puts_the_old_directory_back_on_failure(tmp_path):
    out = tmp_path / "q"
    with rebuilding(out, "quickstart"):
        assert read_ledger(out).files == {}                  # nothing listed while the run goes
        (out / "results.json").write_text("first")
    assert sorted(read_ledger(out).files) == ["results.json"]
    before = listing(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        with rebuilding(out, "quickstart"):
            (out / "results.json").write_text("half")
            raise KeyboardInterrupt
    assert listing(tmp_path) == before
    with rebuilding(out, "quickstart"):
        (out / "results.json").write_text("second")
    assert (out / "results.json").read_text() == "second" and sorted(p.name for p in tmp_path.iterdir()) == ["q"]
