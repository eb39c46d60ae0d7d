"""A real small tmpfs for disk-full tests: mounted on a test's directory, unmounted afterwards, the test skipped
with the reason where this user cannot mount one."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


def mounted_tmpfs(path: Path, size: str) -> Iterator[Path]:
    """Create ``path``, mount a tmpfs of ``size`` (``1m``, ``4m``) on it, yield it, unmount it (a fixture body)."""
    path.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.decode().strip() or 'not permitted'})")
    yield path
    if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
        subprocess.run(["umount", "-l", str(path)], check=False)    # still busy (a memory map not yet freed)
