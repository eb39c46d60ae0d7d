"""Per-tensor hashes: written with every checkpoint, checked at read, the first damaged tensor named."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
import torch

from ctxmt_cli.models.tensor_hashes import FIELD, first_damaged, tensor_digest, tensor_hashes, walk_tensors
from ctxmt_cli.train.checkpoint import save_checkpoint


def payload() -> dict:
    torch.manual_seed(0)
    return {"model": {"embed.weight": torch.randn(40, 8), "scale": torch.tensor(2.0),
                      "half": torch.randn(16).to(torch.bfloat16), "empty": torch.zeros(0)},
            "optimizer": {"state": {0: {"exp_avg": torch.randn(40, 8), "step": torch.tensor(3.0)}},
                          "param_groups": [{"lr": 0.1, "params": [0]}]},
            "rng": [torch.arange(8, dtype=torch.uint8)], "recipe": {"model": {"family": "x"}}}


def flip_bytes(path: Path, count: int = 16) -> list[str]:
    """Flip ``count`` bytes in the middle of every tensor's storage inside a torch zip checkpoint (what a bad disk or
    a hand edit does; the zip's own CRCs are not checked by torch.load); returns the entries changed."""
    data = bytearray(path.read_bytes())
    changed = []
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            if "/data/" not in info.filename or info.file_size < count:
                continue
            head = info.header_offset
            name_len, extra_len = (int.from_bytes(data[head + k:head + k + 2], "little") for k in (26, 28))
            start = head + 30 + name_len + extra_len + (info.file_size - count) // 2
            data[start:start + count] = bytes(b ^ 0xFF for b in data[start:start + count])
            changed.append(info.filename)
    path.write_bytes(bytes(data))
    return changed


def test_every_tensor_is_found_by_its_path():
    paths = [path for path, _ in walk_tensors(payload())]
    assert paths == ["model/embed.weight", "model/scale", "model/half", "model/empty", "optimizer/state/0/exp_avg",
                     "optimizer/state/0/step", "rng/0"]


def test_a_written_checkpoint_carries_its_hashes_and_passes(tmp_path):
    path = save_checkpoint(payload(), tmp_path / "ck.pt")
    read = torch.load(path, weights_only=True)
    assert read[FIELD]["algorithm"] == "sha256" and len(read[FIELD]["tensors"]) == 7
    assert read[FIELD]["tensors"]["model/scale"] == tensor_digest(torch.tensor(2.0))
    assert first_damaged(read) is None


def test_flipped_bytes_name_the_first_damaged_tensor(tmp_path):
    path = save_checkpoint(payload(), tmp_path / "ck.pt")
    assert flip_bytes(path)
    path_found, why = first_damaged(torch.load(path, weights_only=True))
    assert path_found == "model/embed.weight"
    assert why == "tensor 'embed.weight' does not match the sha256 recorded when ctxmt wrote it"


def test_damage_outside_the_weights_is_named_by_its_path():
    ckpt = payload()
    ckpt[FIELD] = tensor_hashes(ckpt)
    ckpt["optimizer"]["state"][0]["exp_avg"][3, 1] += 1
    assert first_damaged(ckpt) == ("optimizer/state/0/exp_avg", "tensor 'optimizer/state/0/exp_avg' does not match "
                                   "the sha256 recorded when ctxmt wrote it")


def test_a_checkpoint_without_hashes_reads_as_before():
    assert first_damaged(payload()) is None


@pytest.mark.parametrize("record, words", [
    ("sha256", "record is not {algorithm, tensors"),
    ({"algorithm": "sha256", "tensors": ["x"]}, "record is not {algorithm, tensors"),
    ({"algorithm": "md5", "tensors": {}}, "hashed with 'md5'"),
    ({"algorithm": "sha256", "tensors": {}}, "tensor 'embed.weight' has no recorded hash"),
])
def test_a_bad_record_is_named(record, words):
    ckpt = {**payload(), FIELD: record}
    assert words in first_damaged(ckpt)[1]


def test_a_tensor_added_later_has_no_hash():
    ckpt = payload()
    ckpt[FIELD] = tensor_hashes(ckpt)
    ckpt["model"]["extra"] = torch.ones(2)
    assert first_damaged(ckpt) == ("model/extra", "tensor 'extra' has no recorded hash")
