"""The training benchmark's device and mixed-precision plumbing: which ctxmt updates run where, how their figures
are split, and that the fp16 update takes the trainer's grad scaler."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ctxmt_cli.cli.benchmark import _load_benchmark


@pytest.fixture(scope="module")
def train():
    return _load_benchmark("train")


def test_amp_modes_on_the_cpu(train):
    """bf16 only on a CPU with bf16 instructions; fp16 (grad scaler) never on the CPU: it is a CUDA figure."""
    assert train.amp_modes("cpu") == (["bf16"] if train.cpu_has_bf16() else [])


def test_mixed_precision_updates_are_their_own_figures(train):
    """Each of ctxmt's bf16 / fp16 updates is a figure of its own against the same fp32 peers."""
    per_impl = {"ctxmt": [1.0], "ctxmt-bf16": [2.0], "ctxmt-fp16": [3.0], "torch": [4.0], "hf": [5.0]}
    figures = train.equal_figures("small", per_impl)
    assert figures == {"train-small-equal": {"ctxmt": [1.0], "torch": [4.0], "hf": [5.0]},
                       "train-small-equal-bf16": {"ctxmt": [2.0], "torch": [4.0], "hf": [5.0]},
                       "train-small-equal-fp16": {"ctxmt": [3.0], "torch": [4.0], "hf": [5.0]}}
    assert list(train.equal_figures("small", {"ctxmt": [1.0], "torch": [4.0]})) == ["train-small-equal"]


def test_updater_runs_where_its_batch_is(train):
    """The fp32 update on the meta device: the trainer's loss vector is made on the Updater's device, so a
    DistEnv left on the CPU would fail here as it would on CUDA."""
    dims = train.bu.Dims.of("tiny")
    updater = train.ctxmt_updater(dims, 0, device="meta")
    total, _ = updater.update([train.bu.random_pairs(2, 5, dims.vocab, 0).to("meta")])
    assert total.device.type == "meta" and updater.scaler is None


def test_fp16_update_takes_the_grad_scaler(train):
    """fp16 gets the trainer's grad scaler on the update's device (bf16 and fp32 need none); one fp16 update runs."""
    dims = train.bu.Dims.of("tiny")
    assert train.ctxmt_updater(dims, 0, "bf16").scaler is None
    updater = train.ctxmt_updater(dims, 0, "fp16", "cpu")
    assert isinstance(updater.scaler, torch.amp.GradScaler)
    total, _ = updater.update([train.bu.random_pairs(2, 5, dims.vocab, 0)])
    assert torch.isfinite(total).all() and updater.scaler.get_scale() <= 2.0 ** 16


@pytest.mark.parametrize("s,t", [(7, 5), (3, 11)])
def test_model_flops_formula_counts_every_matrix_product(train, s, t):
    """The MFU numerator (``train_scale.forward_flops``, the formula in its docstring) equals torch's own FLOP
    count of ctxmt's training forward, model and fused loss, on one unpadded pair (attention through the math
    kernel, whose products torch's counter sees)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    from ctxmt_cli.core.batch import Batch

    dims = train.bu.Dims(64, 128, 4, 2, 3, 300)
    updater = train.ctxmt_updater(dims, 0)
    src, tgt = torch.randint(5, dims.vocab, (1, s)), torch.randint(5, dims.vocab, (1, t))
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        updater.forward(Batch(src=src, tgt_in=tgt, tgt_out=tgt))
    assert train.train_scale.forward_flops(dims, np.array([s]), np.array([t])) == counter.get_total_flops()


def test_peak_is_known_only_for_listed_gpus(train):
    """MFU needs the device's peak: none on a CPU (``n/a``)."""
    assert train.train_scale.peak_tflops("cpu", "bf16") is None
    assert set(train.train_scale.PEAK_TFLOPS) >= {"H100", "H200", "A100"}


def test_count_ops_counts_both_implementations(train):
    """``--count-ops`` on the tiny preset: one ``ops:`` figure per precision, each with ctxmt's and the plain
    peer's count of one update (forward, loss, backward, Adam: hundreds of ops each)."""
    settings = train.Settings(preset="tiny", count_ops=True)
    counts = train.run(settings)
    assert list(counts) == ["train-tiny-fp32", "train-tiny-bf16"]
    for ctxmt, plain in counts.values():
        assert ctxmt > 200 and plain > 200
    assert counts["train-tiny-bf16"][0] > counts["train-tiny-fp32"][0]   # autocast's casts are ops too
