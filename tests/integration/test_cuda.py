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
from tests.unit.test_contract import IDS, make_model, n_target_sentences, plugins, real_positions, sample  # noqa: F401 (plugins: autouse, joins the toy family)

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
    same = sum(a == b for a, b in zip(outs["cuda"], outs["cpu"], strict=True)) / len(outs["cpu"])
    assert same >= 0.9, (outs["cuda"], outs["cpu"])          # float32 on both: only near-ties may differ
    result = run_cli("contrastive", "synthetic", "--data", data, "-c", ckpt, "--device", "cuda",
                     "--out", tmp_path / "scores")
    assert result.exit_code == 0, result.output


def test_int8_on_cuda_is_refused_in_one_line(corpus, tmp_path):
    """int8 layers have no CUDA kernels: --quantize int8 with --device cuda is one line naming the fix."""
    data, docs = corpus
    save = tmp_path / "model"
    result = run_cli("train", "quickstart/sentence", *tiny_sets(data, save), "--set", "train.max_steps=2")
    assert result.exit_code == 0, result.output
    result = run_cli("translate", docs, "-c", save / "checkpoint_last.pt", "--quantize", "int8", "--device", "cuda",
                     "-o", tmp_path / "out.txt")
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1, result.output
    assert "CPU only" in result.stderr and "--device cpu" in result.stderr
    assert not (tmp_path / "out.txt").exists()


def test_cuda_device_index_and_memory(corpus, tmp_path):
    """--device cuda:0 names the first GPU; training a tiny model keeps its peak memory small."""
    data, _ = corpus
    torch.cuda.reset_peak_memory_stats()
    result = run_cli("train", "quickstart/sentence", *tiny_sets(data, Path(tmp_path) / "m"), "--device", "cuda:0")
    assert result.exit_code == 0, result.output
    assert 0 < torch.cuda.max_memory_allocated() < 2 ** 30


@pytest.mark.parametrize("amp", [None, torch.bfloat16])
def test_fused_loss_on_cuda_is_one_block_and_matches_the_plain_loss(amp):
    """On a GPU the fused loss of 4096 tokens x 16k vocabulary runs as one block (the same ops as 64 tokens), its
    matrix multiplies in the autocast dtype, and equals ``F.cross_entropy(F.linear(...))`` under the same autocast."""
    import torch.nn.functional as F

    from ctxmt_cli.train.op_count import OpCounter
    from ctxmt_cli.train.projected_loss import projected_token_losses

    def run(rows, fn):
        gen = torch.Generator().manual_seed(rows)
        h = torch.randn(rows, 256, generator=gen).cuda().requires_grad_()
        w = (torch.randn(16000, 256, generator=gen) * 0.05).cuda().requires_grad_()
        y = torch.randint(5, 16000, (rows,), generator=gen).cuda()
        with torch.autocast("cuda", dtype=amp or torch.bfloat16, enabled=amp is not None), OpCounter() as ops:
            fn(h, w, y).float().sum().backward()
        return ops, (h.grad, w.grad)

    def fused(h, w, y):
        return projected_token_losses(h, w, y, 0, 0.1)

    def plain(h, w, y):
        return F.cross_entropy(F.linear(h, w), y, ignore_index=0, label_smoothing=0.1, reduction="none")

    big, got = run(4096, fused)
    assert big.total == run(64, fused)[0].total
    assert all(set(dtypes) == {amp or torch.float32} for _, dtypes in big.matmuls)
    want = run(4096, plain)[1]
    for mine, ref in zip(got, want, strict=True):
        torch.testing.assert_close(mine, ref, atol=2e-2 if amp else 1e-4, rtol=2e-2 if amp else 1e-4)


@pytest.mark.parametrize("amp", ["off", "bf16", "fp16"])
def test_an_update_on_cuda_never_syncs(amp):
    """What the CPU test (``tests/unit/test_step.py``) cannot see: CUDA's own sync detector raises on any
    synchronising call (``.item()``, a device-to-host copy, ``nonzero``...) inside one update (not the first:
    Adam creates its state there)."""
    from ctxmt_cli.config import validate_recipe
    from ctxmt_cli.core.batch import VocabInfo
    from ctxmt_cli.models.families import build_model
    from ctxmt_cli.train.distributed import DistEnv
    from ctxmt_cli.train.step import LossSettings, Updater, make_optimizer, make_scaler
    from tests.unit.test_trainer import two_batches
    from tests.unit.train_fixtures import TINY

    cfg = validate_recipe({"model": {"family": "concat", **TINY, "cd": 0.3, "src_context_sentences": 1,
                                     "tgt_context_sentences": 1}, "train": {"clip_norm": 1.0, "amp": amp}})
    vocab, device = VocabInfo(src_size=50, tgt_size=50), torch.device("cuda")
    model = build_model(cfg.model, vocab).to(device)
    updater = Updater(model, make_optimizer(model, cfg.train), make_scaler(amp, device), DistEnv(device=device),
                      LossSettings.from_recipe(cfg, vocab, model), amp, cfg.train.clip_norm)
    batches = [to_cuda(b) for b in two_batches()[:2]]
    updater.update(batches)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        updater.update(batches)
    finally:
        torch.cuda.set_sync_debug_mode("default")
