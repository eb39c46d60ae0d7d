"""How much memory a computation may use, so that one that cannot fit is refused before it starts.

A beam of 1,024 over 64 documents, or 10^6 bootstrap resamples of a long test set, asks for more memory than a
machine has: the allocation then fails deep inside torch or numpy (a traceback), or the kernel's OOM killer ends
the process, or the whole machine swaps. The callers estimate what they need (a lower bound: what they will surely
allocate) and :func:`check_fits` refuses, as one line naming the options to lower, what exceeds
:func:`available_bytes`. No torch at import: the host's figure comes from ``/proc/meminfo``, the cgroup's limit
and ``sysconf``; a CUDA device's from ``torch.cuda.mem_get_info``.

``CTXMT_MEMORY_LIMIT`` (bytes, or with a K, M, G or T suffix: ``8G``) caps what ctxmt plans with, below what the
machine has free: a share of a machine others use too.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ctxmt_cli.errors import CtxmtError

LIMIT_VARIABLE = "CTXMT_MEMORY_LIMIT"
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def _limit_from_environment() -> int | None:
    """``CTXMT_MEMORY_LIMIT`` in bytes (None when unset); a value that is no size is one line."""
    text = os.environ.get(LIMIT_VARIABLE)
    if text is None or not text.strip():
        return None
    match = _SIZE.match(text)
    if match is None:
        raise CtxmtError(f"{LIMIT_VARIABLE}={text!r}: not a memory size; give bytes or a number with K, M, G or T "
                         f"(e.g. {LIMIT_VARIABLE}=8G), or unset it")
    return int(float(match.group(1)) * _UNITS[match.group(2).upper()])


def _cgroup_free() -> int | None:
    """What the process's cgroup (v2) still allows, where it has a limit (a container, a Slurm job)."""
    try:
        top = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        used = Path("/sys/fs/cgroup/memory.current").read_text().strip()
        return None if top == "max" else max(int(top) - int(used), 0)
    except (OSError, ValueError):
        return None


def _host_free() -> int | None:
    """The host's available memory: ``MemAvailable`` (free plus reclaimable caches), else the free pages."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def available_bytes(device=None) -> int | None:
    """Bytes a new computation may allocate on ``device`` (a ``torch.device``; None or the CPU: host memory), at
    most ``CTXMT_MEMORY_LIMIT``; None when nothing says (then nothing is refused)."""
    if getattr(device, "type", "cpu") == "cuda":
        import torch

        free, _ = torch.cuda.mem_get_info(device)
        found = [free + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)]
    else:
        found = [_host_free(), _cgroup_free()]
    found.append(_limit_from_environment())
    known = [n for n in found if n is not None]
    return min(known) if known else None


def size_text(n: float) -> str:
    """``n`` bytes for a message: ``3.2 GiB``, ``540 MiB``."""
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n / 2**10:.0f} KiB"


def check_fits(needed: int, what: str, lower: str, device=None) -> None:
    """Refuse ``what`` (a phrase: "a beam search of 64 rows x beam 1024") that needs about ``needed`` bytes when
    ``device`` has less available; ``lower`` names what to lower (options marked by
    :func:`ctxmt_cli.errors.option`)."""
    free = available_bytes(device)
    if free is not None and needed > free:
        where = "host memory" if getattr(device, "type", "cpu") == "cpu" else str(device)
        limit = f" ({LIMIT_VARIABLE})" if _limit_from_environment() == free else ""
        raise CtxmtError(f"{what} needs about {size_text(needed)}, more than the {size_text(free)} free in "
                         f"{where}{limit}; lower {lower}")
