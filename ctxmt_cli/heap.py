"""The C heap of a ctxmt process: freed tensor memory kept for the next allocation, not handed back to the OS.

A decoding step allocates and frees tensors of a few MB each: the logits of every hypothesis (128 x 16,000 floats
at beam 4 over 32 sentences), each layer's key/value cache as it grows and is reordered. PyTorch takes CPU tensor
memory from the C library's ``malloc``. glibc's serves a block above its mmap threshold (128 KiB at first, raised
as such blocks are freed, to 32 MiB at most) as a fresh mapping, and returns the top of its heap to the OS once
more than its trim threshold (twice the mmap threshold) is free there. So many of those tensors come back as new
pages, and each page's first touch is a page fault. Measured on the decode benchmark's beam-4 search (``small``
model, 32 sentences x 25 steps, 2 threads, glibc 2.36): 15,000-18,000 minor faults and 35-44 ms of system time
per run of about 490 ms; with the thresholds below, 2 faults, and 474 against 489 ms (four interleaved pairs of
processes; greedy search, with logits a quarter as large, gained about 1%).

:func:`keep_freed_memory` sets glibc's ``M_MMAP_THRESHOLD`` to 32 MiB (the largest it accepts, so blocks up to
that size come from the heap and are reused) and ``M_TRIM_THRESHOLD`` to 256 MiB (so freed memory stays for the
next step). The cost: up to 256 MiB of freed memory stays with the process, whose resident size does not fall
back after a peak. The command line calls it when it starts; a Python program calls it itself where it wants
the same (``ctxmt_cli.api.keep_freed_memory``).

Left alone: a C library other than glibc, and a process whose user chose how memory is allocated: a preloaded
allocator (``LD_PRELOAD``: jemalloc, tcmalloc), glibc's ``MALLOC_*`` variables or ``GLIBC_TUNABLES``. Their
choice wins; nothing is changed.
"""

from __future__ import annotations

import ctypes
import os

#: glibc's mallopt parameters (malloc.h)
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
#: blocks up to this size are served from the heap (glibc refuses more than 32 MiB on 64-bit systems)
MMAP_THRESHOLD = 32 << 20
#: freed memory at the top of the heap kept up to this size
TRIM_THRESHOLD = 256 << 20


def user_chose_allocator(environ: dict[str, str] | None = None) -> str | None:
    """The environment variable by which the user chose how this process allocates memory, or None."""
    environ = os.environ if environ is None else environ
    for name in sorted(environ):
        if name == "LD_PRELOAD" and environ[name].strip():
            return name
        if name.startswith("MALLOC_"):
            return name
        if name == "GLIBC_TUNABLES" and "glibc.malloc." in environ[name]:
            return name
    return None


def _glibc():
    """The process's own C library through ctypes where it is glibc, else None (musl, macOS, Windows).

    The symbols already loaded into the process (``dlopen(NULL)``), not a library looked up by name:
    ``ctypes.util.find_library`` runs ``ldconfig`` (or a compiler) in a subprocess, milliseconds at every command's
    start, and could name another libc than the one whose ``malloc`` serves this process."""
    try:
        libc = ctypes.CDLL(None)
    except (OSError, TypeError):                                            # Windows: no dlopen(NULL)
        return None
    return libc if hasattr(libc, "gnu_get_libc_version") else None         # glibc's own symbol


def keep_freed_memory() -> bool:
    """Keep freed tensor memory in the heap for reuse (module docstring); whether the thresholds were set (False:
    not glibc, or the user chose the allocator)."""
    if user_chose_allocator() is not None:
        return False
    libc = _glibc()
    if libc is None:
        return False
    return bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(libc.mallopt(M_TRIM_THRESHOLD,
                                                                                     TRIM_THRESHOLD))
