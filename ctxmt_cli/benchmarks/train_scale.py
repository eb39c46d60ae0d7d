"""``ctxmt benchmark train --batch-tokens N``: tokens/s and model FLOPs utilisation at a real batch size.

Batches of about ``N`` target tokens (padded size, ctxmt's length-bucketed batching) of real sentence lengths:
Europarl En-Fr validation (``../shared/data/europarl_enfr/valid.*``, tokenised by a SentencePiece model trained
on it) where present, else the synthetic benchmark's. Token ids are random (only lengths matter). ctxmt's
trainer update (fp32, and bf16 / fp16 autocast where the device has them) and the plain ``nn.Transformer`` peer
(fp32; bf16 under autocast) train on the *same* batches, so the ratio is the step's speed alone. One timed run =
one update on the next batch; tokens/s counts real (non-padding) target tokens.

Model FLOPs per update (a multiply-add = 2 FLOPs; training = forward + backward = 3 x forward; embedding
lookups, norms, softmax and the optimiser are not counted; every matrix product is, as if dense). With d =
d_model, f = ffn, V = vocabulary, L_e / L_d encoder / decoder layers, and a sentence pair of s source and t
target tokens (real tokens, no padding):

    forward(s, t) = s · L_e · (8d² + 4df)              encoder projections (Q, K, V, O) and FFN
                  + s² · L_e · 4d                       encoder self-attention (scores and weighted sum)
                  + s · L_d · 4d²                       cross-attention K and V, from the source tokens
                  + t · L_d · (8d² + 4d² + 4df)         decoder self-attention Q, K, V, O; cross Q, O; FFN
                  + t² · L_d · 4d + s·t · L_d · 4d      decoder self-attention (causal mask not discounted) and
                                                        cross-attention
                  + t · 2dV                             output projection
    FLOPs(update) = 3 · Σ_pairs forward(s, t);   per target token: FLOPs(update) / Σ t.

MFU = FLOPs(update) / seconds / peak, the peak being the device's dense bf16 or fp32 figure (:data:`PEAK_TFLOPS`,
by GPU name; fp32 is the non-tensor-core figure, PyTorch's default for float32 matmuls); ``n/a`` on a CPU or an
unlisted GPU. Prints ``speed: train-PRESET-bN-PRECISION ctxmt = X tok/s, MFU = Y%`` lines, a
``flops: train-PRESET-bN = X per target token`` line and ``ratio:`` lines against the peer.
"""

from __future__ import annotations

from contextlib import nullcontext

import bench_util as bu  # a sibling: train.py puts this folder on the path
import numpy as np
import torch
import train_real
from peers import TorchPeer

#: dense peak TFLOPS by GPU name part: (bf16, fp32); SXM figures from NVIDIA's data sheets
PEAK_TFLOPS = {"H200": (989.0, 67.0), "H100": (989.0, 67.0), "A100": (312.0, 19.5)}
EUROPARL = bu.shared_data("europarl_enfr")
POOL = 4000                                              # sentence pairs whose lengths are used


def peak_tflops(device: str, precision: str) -> float | None:
    """The device's dense peak for ``precision`` (``fp32``; ``bf16``/``fp16`` share the tensor-core figure), or
    None on a CPU or a GPU not in :data:`PEAK_TFLOPS`."""
    if not bu.is_cuda(device):
        return None
    name = torch.cuda.get_device_name(torch.device(device))
    for part, (low, full) in PEAK_TFLOPS.items():
        if part in name:
            return full if precision == "fp32" else low
    return None


def forward_flops(dims: bu.Dims, s: np.ndarray, t: np.ndarray) -> float:
    """Forward FLOPs of sentence pairs of ``s`` source and ``t`` target tokens (see the module docstring)."""
    d, f, v, le, ld = dims.d_model, dims.ffn, dims.vocab, dims.enc_layers, dims.dec_layers
    s, t = s.astype(np.float64), t.astype(np.float64)
    return float((s * le * (8 * d * d + 4 * d * f) + s * s * le * 4 * d + s * ld * 4 * d * d
                  + t * ld * (12 * d * d + 4 * d * f) + (t * t + s * t) * ld * 4 * d + t * 2 * d * v).sum())


def update_flops(dims: bu.Dims, batch) -> float:
    """Training FLOPs of one update on ``batch`` (3 x forward over its real tokens)."""
    s = (batch.src != bu.PAD).sum(1).cpu().numpy()
    t = (batch.tgt_out != bu.PAD).sum(1).cpu().numpy()
    return 3.0 * forward_flops(dims, s, t)


def real_pairs() -> tuple[str, list[tuple[str, str]]]:
    """(corpus name, sentence pairs): Europarl's validation set where present, else the synthetic corpus."""
    en, fr = EUROPARL / "valid.en", EUROPARL / "valid.fr"
    if en.is_file() and fr.is_file():
        src, tgt = (path.read_text(encoding="utf-8").splitlines() for path in (en, fr))
        return "europarl", list(zip(src, tgt, strict=False))[:POOL]
    print(f"note: {EUROPARL} not found (set {bu.SHARED_DATA_ENV}); synthetic sentence lengths")
    return "synthetic", train_real.synthetic_pairs(POOL)


def batches(dims: bu.Dims, pairs, budget: int, seed: int) -> list:
    """ctxmt's length-bucketed batches of about ``budget`` padded target tokens, random ids of real lengths."""
    src_len, tgt_len = train_real.lengths(pairs, dims.max_positions)
    src = train_real.random_rows(src_len, dims.vocab, seed)
    tgt = train_real.random_rows(tgt_len, dims.vocab, seed + 1)
    from ctxmt_cli.data.batching import BatchBudget, collate, token_batches

    ids = token_batches(src_len, tgt_len + 1, np.arange(len(src)), budget=BatchBudget(max_tokens=budget), seed=seed)
    out = [collate([src[j] for j in b], [tgt[j] for j in b], bu.PAD, bu.BOS) for b in ids]
    return sorted(out, key=lambda b: -int((b.tgt_out != bu.PAD).sum()))  # the fullest batches first


def cycling(step, group: list):
    """A run that trains on the next batch of ``group`` at every call."""
    position = [0]

    def run():
        step(group[position[0] % len(group)])
        position[0] += 1
    return run


def run_scale(settings, ctxmt_updater, amp_modes) -> dict[str, list[float]]:
    """Time ctxmt (every precision) and the peer at ``settings.batch_tokens``; print speed, MFU and ratio lines."""
    preset, device = settings.preset, settings.device
    dims = bu.Dims.of(preset)
    corpus, pairs = real_pairs()
    group = [b.to(device) for b in batches(dims, pairs, settings.batch_tokens, settings.seed)[:4]]
    real = [int((b.tgt_out != bu.PAD).sum()) for b in group]
    flops = [update_flops(dims, b) for b in group]
    figure = f"train-{preset}-b{settings.batch_tokens}"
    print(f"{figure}: {dims.describe()}; {corpus} sentence lengths, {len(group)} batches of "
          f"{min(real)}-{max(real)} real target tokens{bu.device_note(device)}")
    print(f"flops: {figure} = {sum(flops) / sum(real):.3g} per target token")
    runs = {}
    for amp in ["off"] + amp_modes(device):
        updater = ctxmt_updater(dims, settings.seed, amp, device)
        runs[f"ctxmt-{'fp32' if amp == 'off' else amp}"] = cycling(lambda b, u=updater: u.update([b]), group)
    peer = TorchPeer(dims, settings.seed, device)
    runs["torch-fp32"] = cycling(peer.train_step, group)
    if any(name.startswith("ctxmt-bf16") for name in runs):
        runs["torch-bf16"] = cycling(lambda b: _autocast_step(peer, b, device), group)
    # every run advances to the next batch per call, all in step: a round of len(group) calls covers each batch once
    seconds = bu.time_round_robin(runs, settings.timed_repeats() * len(group), None, device)
    return report(figure, seconds, real, flops, device)


def _autocast_step(peer, batch, device: str) -> None:
    kind = torch.device(device).type
    with torch.autocast(kind, dtype=torch.bfloat16) if kind in ("cpu", "cuda") else nullcontext():
        peer.train_step(batch)


def report(figure: str, seconds: dict[str, list[float]], real: list[int], flops: list[float],
           device: str) -> dict[str, list[float]]:
    """Per implementation: tokens/s per round of ``len(real)`` updates (one per batch), MFU for ctxmt."""
    n = len(real)
    per_round = {name: [sum(real) / sum(values[i:i + n]) for i in range(0, len(values) - n + 1, n)]
                 for name, values in seconds.items()}
    for name, values in per_round.items():
        impl, _, precision = name.partition("-")
        peak = peak_tflops(device, precision)
        rate = float(np.median(values))
        mfu = "n/a" if peak is None else f"{100 * rate * sum(flops) / sum(real) / (peak * 1e12):.1f}%"
        print(f"speed: {figure}-{precision} {impl} = {rate:.1f} tok/s, MFU = {mfu} (rounds {min(values):.1f}-"
              f"{max(values):.1f})")
    for precision in ("fp32", "bf16"):
        mine = {k: v for k, v in per_round.items() if k.endswith(precision)}
        if f"ctxmt-{precision}" in mine and f"torch-{precision}" in mine:
            for line in bu.ratio_lines(f"{figure}-{precision}", {"ctxmt": mine[f"ctxmt-{precision}"],
                                                                 "torch": mine[f"torch-{precision}"]}):
                print(line)
    return per_round
