"""CUDA checks (marked ``gpu``, deselected by default; run with ``python -m pytest -m gpu``).

Every contract variant gives on the GPU what it gives on the CPU (float32, TF32 off) and keeps incremental
decoding equal to the full pass there; the CLI trains with ``amp: off|bf16|fp16`` on ``--device cuda``, resumes,
translates and scores on the GPU, and a checkpoint written on the GPU translates the same on the CPU.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from ctxmt_cli.train.checkpoint import step_checkpoints
from tests.integration.conftest import prepare_recipe_corpus, run_cli, tiny_sets
from tests.unit.test_contract import IDS, make_model, n_target_sentences, real_positions, sample

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")]


@pytest.fixture(autouse=True)
def _no_tf32():
    """Full float32 matmuls, so CPU and GPU logits agree to 1e-4."""
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def to_cuda(batch):
    fields = {k: (v.cuda() if isinstance(v, torch.Tensor) else v) for k, v in vars(batch).items()}
    return type(batch)(**fields)


@pytest.mark.parametrize("variant", IDS)
def test_cuda_forward_equals_cpu_and_incremental(variant):
    cpu = make_model(variant, scale=0.2)
    batch = sample(cpu)
    with torch.no_grad():
        expected = cpu(batch).logits                                        # (B, T, V)
        gpu = make_model(variant, scale=0.2).cuda()
        got = gpu(to_cuda(batch)).logits
        state = gpu.init_state(gpu.encode(to_cuda(batch)),
                               to_cuda(type(batch)(src=batch.src, tgt_sentences=n_target_sentences(batch))))
        token, steps = state.pending, []
        for t in range(got.size(1)):
            logits, state = gpu.decode_step(token, state)
            steps.append(logits)
            token = batch.tgt_in[:, t + 1].cuda() if t + 1 < batch.tgt_in.size(1) else token
    stepped = torch.stack(steps, 1).cpu()
    for r, t in real_positions(batch):
        torch.testing.assert_close(got[r, t].cpu(), expected[r, t], atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(stepped[r, t], expected[r, t], atol=1e-4, rtol=1e-4)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return prepare_recipe_corpus(tmp_path_factory.mktemp("cuda"), lines_per_document=4)


@pytest.mark.parametrize("amp", ["off", "bf16", "fp16"])
def test_train_translate_score_on_cuda(amp, corpus, tmp_path):
    data, docs = corpus
    save = tmp_path / "model"
    result = run_cli("train", "quickstart/concat", *tiny_sets(data, save), "--set", f"train.amp={amp}",
                     "--set", "train.max_steps=6", "--device", "cuda", "--log-format", "json")
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (save / "metrics.jsonl").read_text().splitlines() if line.strip()]
    losses = [r["loss"] for r in rows if r.get("kind") == "train" and "loss" in r]
    assert losses and all(v == v and abs(v) < 1e4 for v in losses), rows
    # resume continues on the GPU to a larger budget
    result = run_cli("train", "quickstart/concat", *tiny_sets(data, save), "--set", f"train.amp={amp}",
                     "--set", "train.max_steps=8", "--device", "cuda", "--resume", "--allow-changed", "train.max_steps",
                     "--log-format", "json")
    assert result.exit_code == 0, result.output
    assert max(step_checkpoints(save)) == 8
    ckpt = save / "checkpoint_last.pt"
    outs = {}
    for device in ("cuda", "cpu"):
        out = tmp_path / f"{device}.jsonl"
        result = run_cli("translate", docs, "-c", ckpt, "-o", out, "--beam", 1, "--device", device)
        assert result.exit_code == 0, result.output
        outs[device] = out.read_text().splitlines()
    assert len(outs["cuda"]) == len(docs.read_text().splitlines())
    same = sum(a == b for a, b in zip(outs["cuda"], outs["cpu"])) / len(outs["cpu"])
    assert same >= 0.9, (outs["cuda"], outs["cpu"])          # float32 on both: only near-ties may differ
    result = run_cli("contrastive", "synthetic", "--data", data, "-c", ckpt, "--device", "cuda",
                     "--out", tmp_path / "scores")
    assert result.exit_code == 0, result.output


def test_cuda_device_index_and_memory(corpus, tmp_path):
    """--device cuda:0 names the first GPU; training a tiny model keeps its peak memory small."""
    data, _ = corpus
    torch.cuda.reset_peak_memory_stats()
    result = run_cli("train", "quickstart/sentence", *tiny_sets(data, Path(tmp_path) / "m"), "--device", "cuda:0")
    assert result.exit_code == 0, result.output
    assert 0 < torch.cuda.max_memory_allocated() < 2 ** 30
