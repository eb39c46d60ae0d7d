"""``--device``: the one place a device name becomes a ``torch.device``.

``auto`` (every command's default) is CUDA when present, else the CPU; ``cpu``, ``cuda`` and ``cuda:N``
ask for one. A CUDA device this machine lacks is a one-line :class:`CtxmtError`. torch is imported
inside :func:`resolve_device`, so the command line can check a name's spelling without it.
"""

from __future__ import annotations

import re

from ctxmt_cli.errors import OptionError, option

DEVICE_CHOICES = "auto | cpu | cuda | cuda:N"
_DEVICE = re.compile(r"^(auto|cpu|cuda(:\d+)?)$")


def check_device_name(name: str) -> str:
    """``name`` if it is spelled as a device ctxmt runs on, else a one-line error."""
    if not _DEVICE.match(str(name)):
        raise OptionError("device", name, f"not a device ctxmt runs on; use {DEVICE_CHOICES}")
    return str(name)


def resolve_device(name="auto", local_rank: int | None = None):
    """The ``torch.device`` that ``name`` (a ``--device`` value or a ``torch.device``) means on this machine.

    ``auto``: CUDA when present, else the CPU. ``auto`` and ``cuda`` take CUDA device ``local_rank`` (modulo the
    device count; 0 when None), the device a ``torchrun`` worker drives. A CUDA device the machine lacks is refused.
    """
    import torch

    if isinstance(name, torch.device):
        return name
    name = check_device_name(name)
    if name == "cpu" or (name == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise OptionError("device", name, f"CUDA is not available on this machine; use {option('device')} auto or cpu")
    count = torch.cuda.device_count()
    index = int(name.partition(":")[2]) if ":" in name else (local_rank or 0) % count
    if index >= count:
        raise OptionError("device", name, f"this machine has {count} CUDA device(s), cuda:0 to cuda:{count - 1}; "
                         f"use one of them or {option('device')} auto")
    return torch.device("cuda", index)
