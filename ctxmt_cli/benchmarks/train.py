"""Training speed: target tokens/s of one optimiser update, ctxmt vs its peers in the same run.

Batches of about 4096 target tokens of 25-token sentences (equal lengths: no padding, so the step is
pure matrix work), fp32, random tokens over a 16k joint vocabulary. ctxmt runs its trainer's real
update (:class:`ctxmt_cli.train.step.Updater`: forward, label-smoothed window loss, backward,
gradient normalisation, Adam); the peers (``benchmarks/peers.py``) run forward, the same label-smoothed
cross-entropy, backward and Adam. One timed run = one update on one batch. Presets: small, and base
unless ``--quick``; ``--preset tiny`` is the seconds-long smoke-test path (small vocab and batch).
Peak memory of one equal-length update (not of the real-length passes): one more, untimed update of each
implementation (tensor storage beyond what was live before, so weights and Adam state are not in it; the
CPU allocator under the profiler, or CUDA's peak statistic; see ``bench_util.peak_memory``).

    ctxmt benchmark train [--quick] [--preset small] [--threads 2] [--repeats 5] [--device auto]
    ctxmt benchmark train --count-ops [--preset P]        aten ops per update (``train_ops.py``)
    ctxmt benchmark train --batch-tokens 25000 --preset base|big   tokens/s and MFU (``train_scale.py``)

Prints ``memory: train-PRESET-equal IMPL = X.X MB`` and ``memory-ratio: train-PRESET-equal PEER/ctxmt = X.XX``
(above 1 = ctxmt uses less; with mixed precision, ``train-PRESET-equal-bf16`` / ``-fp16`` lines for ctxmt's
update in it), then closes with ``ratio: train-PRESET-equal ctxmt/PEER = X.XX`` (ratio of the median tokens/s)
and, on a CPU with bf16 instructions or on CUDA, ``ratio: train-PRESET-equal-bf16 ctxmt/PEER`` (ctxmt with
bf16 autocast vs the fp32 peers); on CUDA also ``ratio: train-PRESET-equal-fp16 ctxmt/PEER`` (fp16 autocast
with the trainer's grad scaler).
"""

from __future__ import annotations

import sys
from pathlib import Path

# the sibling helpers, importable only while this directory is on the path: left there, its train.py /
# score.py / decode.py would shadow any other module of those names in the same process
sys.path.insert(0, str(Path(__file__).resolve().parent))
try:
    import bench_util as bu
    import train_ops
    import train_real
    import train_scale
    from peers import make_peers
finally:
    sys.path.pop(0)

import torch  # noqa: E402

from ctxmt_cli.core.batch import VocabInfo  # noqa: E402
from ctxmt_cli.train.distributed import DistEnv  # noqa: E402
from ctxmt_cli.train.step import LossSettings, Updater, make_optimizer, make_scaler  # noqa: E402

Settings = bu.Settings
LENGTH = 25                    # tokens per sentence, </s> included, on both sides
BATCH_TOKENS = {"tiny": 256}   # target tokens per batch; 4096 unless listed (tiny: smoke test)
MIXED = ("bf16", "fp16")       # ctxmt's mixed-precision updates, each its own figure against the fp32 peers
#: fp16 warm-up updates: the grad scaler starts at 2**16, and its first updates overflow, skip the Adam step and
#: halve the scale; after these the timed updates are steady-state ones
FP16_WARMUP = 20


def presets(settings: Settings) -> list[str]:
    """small (+ base unless quick) by default; an explicit other preset runs alone."""
    if settings.preset == "small" and not settings.quick:
        return ["small", "base"]
    return [settings.preset]


def ctxmt_updater(dims: bu.Dims, seed: int, amp: str = "off", device: str = "cpu") -> Updater:
    """The trainer's update path on ``device`` with the recipe defaults (Adam, label smoothing 0.1, no clipping);
    ``amp`` ``bf16`` = the trainer's bf16 autocast (on CPU too), ``fp16`` = fp16 autocast with its grad scaler."""
    recipe = bu.ctxmt_recipe(dims)
    model = bu.ctxmt_model(dims, seed, device)
    vocab = VocabInfo(dims.vocab, dims.vocab)
    where = torch.device(device)
    return Updater(model, make_optimizer(model, recipe.train), make_scaler(amp, where), DistEnv(device=where),
                   LossSettings.from_recipe(recipe, vocab, model), amp, recipe.train.clip_norm)


def cpu_has_bf16() -> bool:
    """bf16 autocast only pays where the CPU has bf16 instructions (avx512_bf16 / amx_bf16)."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def amp_modes(device: str) -> list[str]:
    """ctxmt's mixed-precision updates timed besides fp32: bf16 on a CPU with bf16 instructions, bf16 (where the
    GPU has it) and fp16 on CUDA."""
    if not bu.is_cuda(device):
        return ["bf16"] if cpu_has_bf16() else []
    return (["bf16"] if torch.cuda.is_bf16_supported() else []) + ["fp16"]


def measure(preset: str, settings: Settings) -> tuple[dict[str, list[float]], dict]:
    """Target tokens/s of every implementation on one preset, and the peak memory (MB) of one update."""
    dims = bu.Dims.of(preset)
    rows = max(1, BATCH_TOKENS.get(preset, 4096) // LENGTH)
    batch = bu.random_pairs(rows, LENGTH, dims.vocab, settings.seed).to(settings.device)
    tokens = rows * LENGTH
    updater = ctxmt_updater(dims, settings.seed, device=settings.device)
    runs, warmups = {"ctxmt": lambda: updater.update([batch])}, {}
    for amp in amp_modes(settings.device):
        mixed = ctxmt_updater(dims, settings.seed, amp, settings.device)
        runs[f"ctxmt-{amp}"] = lambda mixed=mixed: mixed.update([batch])
        if amp == "fp16":
            warmups["ctxmt-fp16"] = lambda mixed=mixed: [mixed.update([batch]) for _ in range(FP16_WARMUP)]
    for peer in make_peers(dims, settings.seed, device=settings.device):
        runs[peer.name] = lambda peer=peer: peer.train_step(batch)
    fp16 = f" (ctxmt fp16: {FP16_WARMUP})" if warmups else ""
    print(f"train {preset}: {dims.describe()}; {rows} sentences x {LENGTH} = {tokens} target tokens per batch; "
          f"fp32; {settings.timed_repeats()} timed updates each after one warm-up{fp16}"
          f"{bu.device_note(settings.device)}")
    seconds = bu.time_round_robin(runs, settings.timed_repeats(), warmups, settings.device)
    return bu.rates(seconds, tokens), bu.peak_memory(runs, settings.device)


def equal_figures(preset: str, per_impl: dict) -> dict[str, dict]:
    """One preset's equal-length measurements by figure: ``train-PRESET-equal`` (fp32: ctxmt and the peers) and,
    for each of ctxmt's mixed-precision updates that ran, ``train-PRESET-equal-AMP`` (that update as ``ctxmt``
    against the fp32 peers)."""
    figure = f"train-{preset}-equal"
    fp32 = {k: v for k, v in per_impl.items() if k not in {f"ctxmt-{amp}" for amp in MIXED}}
    peers = {k: v for k, v in fp32.items() if k != "ctxmt"}
    return {figure: fp32, **{f"{figure}-{amp}": {"ctxmt": per_impl[f"ctxmt-{amp}"], **peers}
                             for amp in MIXED if f"ctxmt-{amp}" in per_impl}}


def measure_real(preset: str, settings: Settings, corpus: str, pairs) -> dict[str, list[float]]:
    """Real target tokens/s of one pass over real sentence lengths, each implementation in its own batching."""
    dims = bu.Dims.of(preset)
    src_len, tgt_len = train_real.lengths(pairs, dims.max_positions)
    src = train_real.random_rows(src_len, dims.vocab, settings.seed)
    tgt = train_real.random_rows(tgt_len, dims.vocab, settings.seed + 1)
    ours = train_real.ctxmt_batches(src, tgt, src_len, tgt_len, settings.seed)
    theirs = train_real.shuffled_batches(src, tgt, tgt_len, settings.seed)
    print(f"train {preset} {corpus}: {len(src)} sentences, mean target length {tgt_len.mean():.1f}; target "
          f"(source) padding {train_real.padding_share(ours):.1%} ({train_real.padding_share(ours, 'src'):.1%}) "
          f"in ctxmt's {len(ours)} bucketed batches, {train_real.padding_share(theirs):.1%} "
          f"({train_real.padding_share(theirs, 'src'):.1%}) in the peers' {len(theirs)} shuffled batches")
    tokens = train_real.timed_tokens(preset, settings.quick)
    device = settings.device                                             # the timed batches go there once
    ours = [b.to(device) for b in train_real.leading(ours, tokens)]
    theirs = [b.to(device) for b in train_real.leading(theirs, tokens)]
    updater = ctxmt_updater(dims, settings.seed, device=device)
    runs = {"ctxmt": lambda: train_real.pass_over(lambda b: updater.update([b]), ours)}
    warmups = {"ctxmt": lambda: updater.update(ours[:1])}                  # one batch each: a run is long
    for peer in make_peers(dims, settings.seed, device=device):
        runs[peer.name] = lambda peer=peer: train_real.pass_over(peer.train_step, theirs)
        warmups[peer.name] = lambda peer=peer: peer.train_step(theirs[0])
    repeats = max(1, settings.timed_repeats() // 2)                      # a run is long: fewer repeats
    seconds = bu.time_round_robin(runs, repeats, warmups, device)
    real = {"ctxmt": train_real.real_tokens(ours)}
    return {name: [real.get(name, train_real.real_tokens(theirs)) / t for t in values]
            for name, values in seconds.items()}


def run(settings: Settings) -> dict[str, dict[str, list[float]]]:
    """Measure every preset, print the table, the memory lines and the ratio lines; the tokens/s per preset and
    implementation."""
    settings = bu.check(settings)
    if settings.count_ops:
        return train_ops.run_count(settings)
    if settings.batch_tokens is not None:
        with bu.torch_threads(settings.threads):
            return train_scale.run_scale(settings, ctxmt_updater, amp_modes)
    results, lines, ratios = {}, [], []
    autocast = "/".join(amp_modes(settings.device)) or "bf16"
    table = bu.new_table(f"training: target tokens/s (equal lengths; fp32, and ctxmt with {autocast} autocast)",
                         "tok/s")
    with bu.torch_threads(settings.threads):
        print(f"{settings.threads} torch threads")
        for preset in presets(settings):
            results[preset], memory = measure(preset, settings)
            memory = equal_figures(preset, memory)
            for figure, per_impl in equal_figures(preset, results[preset]).items():
                # a mixed-precision figure is its own: ctxmt in bf16/fp16 against the fp32 peers, never mixed
                amp = figure.rpartition("-")[2] if figure.endswith(MIXED) else None
                bu.add_rows(table, figure, {f"ctxmt ({amp})": per_impl["ctxmt"]} if amp else per_impl)
                lines += bu.memory_lines(figure, memory[figure], {"ctxmt"} if amp else None)
                ratios += bu.ratio_lines(figure, per_impl)
            if "ctxmt-bf16" not in results[preset]:
                where = "GPU has no bf16" if bu.is_cuda(settings.device) else "CPU has no bf16 instructions"
                print(f"train-{preset}-equal-bf16 not timed: this {where}")
            for corpus, pairs in train_real.corpora().items():
                real = measure_real(preset, settings, corpus, pairs)
                bu.add_rows(table, f"train-{preset}-{corpus}", real)
                ratios += bu.ratio_lines(f"train-{preset}-{corpus}", real)
    bu.print_report(table, lines + ratios)
    return results


if __name__ == "__main__":
    bu.main(run, __doc__)
