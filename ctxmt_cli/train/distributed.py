"""Data-parallel training with ``torch.distributed`` (DDP), launched by ``torchrun``.

``torchrun`` (single- or multi-node, via its rendezvous) sets ``WORLD_SIZE``,
``RANK``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT``; without them the
trainer runs as one process and every helper here is a no-op. Each process
drives one device: CUDA device ``LOCAL_RANK`` when CUDA is available (backend
``nccl``), else the CPU (backend ``gloo``). Only rank 0 writes files.
"""

from __future__ import annotations

import os
from contextlib import nullcontext
from dataclasses import dataclass

import torch
import torch.distributed as tdist
from torch import nn

from ctxmt_cli.device import resolve_device
from ctxmt_cli.errors import CtxmtError, OptionError, option


@dataclass(frozen=True)
class DistEnv:
    """Where this process sits in the job."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")
    initialized_here: bool = False       # we created the process group, so we destroy it

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world > 1


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise CtxmtError(f"environment variable {name}={value!r} is not an integer; launch with torchrun") from None


def setup_distributed(device_name: str = "auto") -> DistEnv:
    """Read the torchrun environment, pick the device (``--device``: ``auto`` = CUDA device ``LOCAL_RANK`` when
    CUDA is present, else the CPU) and (if WORLD_SIZE > 1) join the process group."""
    world, rank, local = _env_int("WORLD_SIZE", 1), _env_int("RANK", 0), _env_int("LOCAL_RANK", 0)
    if world > 1 and ":" in str(device_name):
        raise OptionError("device", device_name, f"under torchrun each worker drives CUDA device LOCAL_RANK; "
                         f"use {option('device')} auto or cuda")
    device = resolve_device(device_name, local_rank=local)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    if world <= 1:
        return DistEnv(device=device)
    if not (0 <= rank < world):
        raise CtxmtError(f"RANK={rank} is outside WORLD_SIZE={world}; launch with torchrun")
    created = False
    if not tdist.is_initialized():
        backend = "nccl" if device.type == "cuda" else "gloo"
        # env:// reads MASTER_ADDR/MASTER_PORT (set by torchrun's rendezvous on every node)
        tdist.init_process_group(backend=backend, init_method="env://", world_size=world, rank=rank,
                                 device_id=device if device.type == "cuda" else None)
        created = True
    return DistEnv(rank, world, local, device, created)


def teardown_distributed(env: DistEnv) -> None:
    """Leave the process group if :func:`setup_distributed` created it."""
    if env.initialized_here and tdist.is_initialized():
        tdist.destroy_process_group()


def wrap_model(model: nn.Module, env: DistEnv) -> nn.Module:
    """DDP wrapper in a multi-process job (broadcasts rank 0's weights), the model itself otherwise."""
    if not env.distributed:
        return model
    from torch.nn.parallel import DistributedDataParallel as DDP

    ids = [env.device.index] if env.device.type == "cuda" else None
    return DDP(model, device_ids=ids, output_device=ids[0] if ids else None)


def unwrap(model: nn.Module) -> nn.Module:
    """The plain module inside a DDP wrapper."""
    return model.module if hasattr(model, "module") and hasattr(model, "no_sync") else model


def maybe_no_sync(model: nn.Module, skip_sync: bool):
    """``model.no_sync()`` for accumulation micro-batches (no gradient all-reduce), else a no-op context."""
    if skip_sync and hasattr(model, "no_sync"):
        return model.no_sync()
    return nullcontext()


def all_reduce_sum(tensor: torch.Tensor, env: DistEnv) -> torch.Tensor:
    """In-place sum over ranks (device-side: no host synchronisation on CUDA)."""
    if env.distributed:
        tdist.all_reduce(tensor, op=tdist.ReduceOp.SUM)
    return tensor


def any_rank(flag: bool, env: DistEnv) -> bool:
    """True on every rank when ``flag`` is true on at least one (e.g. rank 0's wall-clock limit)."""
    if not env.distributed:
        return flag
    t = torch.tensor([1.0 if flag else 0.0], device=env.device)
    tdist.all_reduce(t, op=tdist.ReduceOp.MAX)
    return bool(t.item() > 0)


def gather_objects(obj, env: DistEnv) -> list:
    """Every rank's ``obj`` (picklable), in rank order, on every rank."""
    if not env.distributed:
        return [obj]
    out = [None] * env.world
    tdist.all_gather_object(out, obj)
    return out


def broadcast_object(obj, env: DistEnv):
    """Rank 0's ``obj`` on every rank."""
    if not env.distributed:
        return obj
    box = [obj]
    tdist.broadcast_object_list(box, src=0)
    return box[0]


def barrier(env: DistEnv) -> None:
    """Wait for every rank (e.g. until rank 0 has written a checkpoint)."""
    if env.distributed:
        tdist.barrier()
