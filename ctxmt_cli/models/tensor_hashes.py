"""A hash of every tensor a checkpoint holds, written with it and checked when it is read.

The structure checks of :mod:`ctxmt_cli.models.checkpoint_check` see names, types and shapes, never the numbers:
a file whose bytes were flipped on disk, in a copy or by hand (the zip container stores tensors without a
checksum of its own) would load and translate with damaged weights. Every checkpoint ctxmt writes therefore
carries ``tensor_hashes``: ``{"algorithm": "sha256", "tensors": {PATH: HEX}}``, one SHA-256 of the raw bytes of
each tensor, where PATH is where the tensor sits in the checkpoint (``model/encoder.layers.0.fc1.weight``,
``optimizer/state/3/exp_avg``). A ``.safetensors`` export keeps the hashes of the weights it holds in its
metadata. Reading checks every tensor present against its hash and names the first that differs; a checkpoint
written before hashes existed has none and loads as before.

The tensors are hashed on up to 8 threads; SHA-256 costs about as much as one copy of the bytes in memory, a
fraction of what ``torch.save``/``torch.load`` take for the same checkpoint.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import torch

#: the checkpoint field holding the hashes, and the one algorithm this version writes and reads
FIELD = "tensor_hashes"
ALGORITHM = "sha256"


def walk_tensors(value: Any, path: str = "") -> Iterator[tuple[str, torch.Tensor]]:
    """``(path, tensor)`` of every tensor inside ``value`` (dicts, lists and tuples, in their order)."""
    if torch.is_tensor(value):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            if key != FIELD:
                yield from walk_tensors(item, f"{path}/{key}" if path else str(key))
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from walk_tensors(item, f"{path}/{index}" if path else str(index))


def tensor_digest(tensor: torch.Tensor) -> str:
    """SHA-256 of the tensor's raw bytes in memory order (contiguous, on the CPU)."""
    flat = tensor.detach().to("cpu").contiguous().reshape(-1)
    data = flat.view(torch.uint8).numpy() if flat.numel() else b""
    return hashlib.sha256(data).hexdigest()


def _digests(found: list[tuple[str, torch.Tensor]]) -> list[str]:
    """The digests of ``found``'s tensors, in order; hashed on a few threads (hashlib lets go of the GIL on large
    buffers, so the cores share the work)."""
    workers = min(8, os.cpu_count() or 1, max(len(found), 1))
    if workers == 1:
        return [tensor_digest(t) for _, t in found]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(tensor_digest, (t for _, t in found)))


def tensor_hashes(payload: dict) -> dict:
    """The ``tensor_hashes`` record of every tensor of ``payload`` (to store in it)."""
    found = list(walk_tensors(payload))
    return {"algorithm": ALGORITHM, "tensors": dict(zip((path for path, _ in found), _digests(found), strict=True))}


def with_tensor_hashes(payload: dict) -> dict:
    """``payload`` with its ``tensor_hashes`` record (re)computed from the tensors it holds now."""
    return {**payload, FIELD: tensor_hashes(payload)}


def shown(path: str) -> str:
    """How an error line names a tensor: a weight by its parameter name, anything else by its path."""
    return repr(path[len("model/"):]) if path.startswith("model/") else repr(path)


def first_damaged(payload: dict) -> tuple[str, str] | None:
    """``(tensor, what is wrong)`` for the first tensor of ``payload`` whose bytes differ from its recorded hash
    (or that has none recorded), None when every tensor matches or the payload records no hashes (a checkpoint
    written before they existed). A record that is not ``{algorithm, tensors}`` is reported as ``("", why)``."""
    record = payload.get(FIELD)
    if record is None:
        return None
    if not (isinstance(record, dict) and isinstance(record.get("tensors"), dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in record["tensors"].items())):
        return "", f"its '{FIELD}' record is not {{algorithm, tensors: {{name: hex}}}}"
    if record.get("algorithm") != ALGORITHM:
        return "", f"its tensors are hashed with {str(record.get('algorithm'))[:20]!r}, which this ctxmt does not read"
    recorded = record["tensors"]
    found = list(walk_tensors(payload))
    unrecorded = next((path for path, _ in found if path not in recorded), None)
    if unrecorded is not None:
        return unrecorded, f"tensor {shown(unrecorded)} has no recorded hash"
    for (path, _), digest in zip(found, _digests(found), strict=True):
        if digest != recorded[path]:
            return path, f"tensor {shown(path)} does not match the {ALGORITHM} recorded when ctxmt wrote it"
    return None
