"""Shared helpers for the trainer tests: a tiny prepared synthetic corpus and tiny recipes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from ctxmt_cli.config import validate_recipe
from ctxmt_cli.data.prepare import PrepareSpec, SplitInput, prepare_corpus
from ctxmt_cli.synthetic import generate_benchmark

TINY = {"preset": "tiny", "d_model": 32, "ffn_dim": 64, "heads": 4, "encoder_layers": 1, "decoder_layers": 1}


def prepare_tiny(root: Path, vocab_size: int = 200, docs: int = 60) -> Path:
    """Synthetic benchmark (seed 1) prepared as text with a small joint vocabulary."""
    raw, out = root / "raw", root / f"prepared-{vocab_size}"
    if not (raw / "train.src").is_file():
        generate_benchmark(raw, seed=1, docs=docs)
    splits = {s: SplitInput(raw / f"{s}.src", raw / f"{s}.tgt") for s in ("train", "valid")}
    prepare_corpus(PrepareSpec(fmt="text", splits=splits, src_lang="src", tgt_lang="tgt", out=out,
                               vocab_size=vocab_size))
    return out


@pytest.fixture(scope="session")
def prepared(tmp_path_factory) -> Path:
    """A prepared directory shared by the tests (read-only: copy it before deleting anything)."""
    return prepare_tiny(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(autouse=True)
def _restore_threads():
    """train.threads calls torch.set_num_threads; keep the test process' setting."""
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def recipe(data: Path, save_dir: Path, model: dict | None = None, **train) -> object:
    """A tiny concat (s2to2 by default) recipe; ``train`` keys override the training section."""
    model = {"family": "concat", **TINY, "dropout": 0.0, **(model or {})}
    if model["family"] == "concat":
        model = {"src_context_sentences": 1, "tgt_context_sentences": 1, **model}
    settings = {"save_dir": str(save_dir), "lr": 3e-3, "warmup_steps": 4, "max_steps": 6, "valid_every": 3,
                "log_every": 2, "threads": 1, "patience": 0, **train}
    return validate_recipe({"data": {"path": str(data), "max_tokens": 384}, "model": model, "train": settings})


def copy_prepared(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def weights(path: Path) -> dict:
    """The model state of a checkpoint file."""
    return torch.load(path, map_location="cpu", weights_only=True)["model"]


def assert_same_weights(a: dict, b: dict, atol: float = 0.0) -> None:
    assert a.keys() == b.keys()
    for key in a:
        if atol == 0.0:
            assert torch.equal(a[key], b[key]), key
        else:
            torch.testing.assert_close(a[key], b[key], atol=atol, rtol=0, msg=key)
