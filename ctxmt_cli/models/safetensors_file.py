"""Checkpoints as safetensors files: weights in a format whose loading cannot execute code.

A ``.safetensors`` checkpoint holds what inference needs and nothing a pickle could hide: the model's tensors
(a tensor tied to another, such as shared embeddings, is stored once and named as an alias), the SentencePiece
model(s) as ``uint8`` tensors under :data:`TOKENIZER_PREFIX`, and in the header's metadata (a str → str map)
one JSON object under the key ``ctxmt``: format, version, family, resolved recipe, vocabulary record,
fingerprint, the kept ``meta.json`` subset, the rest of the tokenizer state, the training counters ``ctxmt
inspect`` shows, the alias map and the SHA-256 of every weight (:mod:`ctxmt_cli.models.tensor_hashes`). No
optimiser state: such a file is for translating and sharing, not for ``--resume``. Reading one gives the same dict
a ``.pt`` checkpoint gives, checked by the same function.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.models.tensor_hashes import tensor_hashes

#: tensor names of the SentencePiece models (never a parameter name: those have no leading underscore)
TOKENIZER_PREFIX = "__ctxmt__.tokenizer."
#: the metadata key holding ctxmt's JSON fields
METADATA_KEY = "ctxmt"
#: the checkpoint fields a safetensors file keeps beside the weights
KEPT = ("format", "version", "family", "recipe", "vocab", "vocab_fingerprint", "meta", "state", "averaged_from",
        "world_size", "init_from", "imported_from")
_PROTOS = ("src_model", "tgt_model")


def is_safetensors(path: Path) -> bool:
    """Whether ``path`` starts like a safetensors file (an 8-byte header length, then the JSON header), whatever
    its name: a torch checkpoint starts with a zip (``PK``) or pickle (``\\x80``) signature instead."""
    with open(path, "rb") as fh:
        head = fh.read(9)
    return len(head) == 9 and head[8:9] == b"{" and 2 <= int.from_bytes(head[:8], "little") <= 100_000_000


def _weights(state: dict) -> tuple[dict, dict]:
    """(tensors to store, {alias: stored name}): a tensor sharing its storage, offset and shape with an earlier
    one (tied weights) is stored once; every stored tensor is a contiguous CPU copy, as safetensors requires."""
    stored, aliases, seen = {}, {}, {}
    for name, tensor in state.items():
        key = (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape),
               tuple(tensor.stride()), tensor.dtype)
        if tensor.numel() and key in seen:
            aliases[name] = seen[key]
            continue
        seen[key] = name
        stored[name] = tensor.detach().cpu().contiguous().clone()
    return stored, aliases


def safetensors_bytes(ckpt: dict) -> bytes:
    """A checkpoint dict (as :func:`~ctxmt_cli.models.loading.read_checkpoint` returns) as safetensors bytes."""
    from safetensors.torch import save

    tensors, aliases = _weights(ckpt["model"])
    tokenizer = dict(ckpt["tokenizer"])
    for name in _PROTOS:
        proto = tokenizer.pop(name, None)
        if proto is not None:
            tensors[TOKENIZER_PREFIX + name] = torch.frombuffer(bytearray(proto), dtype=torch.uint8).clone()
    fields = {k: ckpt[k] for k in KEPT if ckpt.get(k) is not None}
    # the hashes of the weights this file holds (what a reader finds under "model", aliases included)
    fields.update(tokenizer=tokenizer, aliases=aliases, tensor_hashes=tensor_hashes({"model": ckpt["model"]}))
    return save(tensors, metadata={"format": "pt", METADATA_KEY: json.dumps(fields)})


def _unreadable(path: Path, why: str) -> CtxmtError:
    return CtxmtError(f"{path} is not a usable ctxmt safetensors checkpoint: {why}; write it again from its .pt "
                      "checkpoint with ctxmt export safetensors")


def _fields(path: Path, metadata: dict) -> dict:
    """ctxmt's JSON object from the header's metadata."""
    text = (metadata or {}).get(METADATA_KEY)
    if text is None:
        raise _unreadable(path, f"no '{METADATA_KEY}' metadata (a safetensors file from another tool?)")
    try:
        fields = json.loads(text)
    except (ValueError, RecursionError) as err:
        raise _unreadable(path, f"its '{METADATA_KEY}' metadata is not JSON ({type(err).__name__})") from None
    if not isinstance(fields, dict):
        raise _unreadable(path, f"its '{METADATA_KEY}' metadata is not a JSON object")
    return fields


def read_safetensors(path: Path, device: str | torch.device = "cpu") -> dict:
    """A safetensors checkpoint as the checkpoint dict a ``.pt`` gives (to be checked by the caller)."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt", device=str(device)) as fh:
            metadata = fh.metadata()
            tensors = {name: fh.get_tensor(name) for name in fh.keys()}
    except PermissionError:             # unreadable is not damaged: the CLI words it as a permission problem
        raise
    except Exception as err:  # noqa: BLE001 - SafetensorError, OSError: a damaged or foreign file
        raise _unreadable(path, f"it cannot be read ({type(err).__name__}); it may be truncated") from None
    fields = _fields(path, metadata)
    aliases = fields.pop("aliases", None) or {}
    tokenizer = fields.get("tokenizer")
    if isinstance(tokenizer, dict):
        for name in _PROTOS:
            proto = tensors.pop(TOKENIZER_PREFIX + name, None)
            tokenizer[name] = None if proto is None else proto.cpu().numpy().tobytes()   # None: joint, as in a .pt
    if not isinstance(aliases, dict) or not all(isinstance(v, str) and v in tensors for v in aliases.values()):
        raise _unreadable(path, "its alias map names tensors the file does not hold")
    model = {name: t for name, t in tensors.items() if not name.startswith(TOKENIZER_PREFIX)}
    model.update({alias: model[target] for alias, target in aliases.items() if target in model})
    return {**fields, "model": model}
