"""Decoding speed: generated tokens/s for greedy and beam-4 search, ctxmt vs its peers in the same run.

32 source sentences of 25 tokens (random, 16k joint vocabulary), decoded in one batch; every
implementation generates exactly 25 tokens per sentence, i.e. 25 decoder steps: ctxmt's search with
``max_len = min_len = 24`` (24 tokens with ``</s>`` banned, then ``</s>`` forced: 25 steps), HF
``generate(min_new_tokens=25, max_new_tokens=25)``, the torch reference 25 steps with ``</s>`` banned.
Random models would otherwise stop at arbitrary lengths and the figures would not compare.
ctxmt runs :func:`greedy_search` / :func:`beam_search` (key/value caches); the torch peer reruns its
decoder over the prefix at every step (``nn.Transformer`` has no cache: its real cost).
One timed run = the whole batch, put on ``--device`` once. ``--preset tiny`` is the smoke-test path. Peak memory
of greedy and of beam-4: one more, untimed run of each implementation (tensor storage beyond what was live
before; see ``bench_util.peak_memory``; the CTranslate2 peer's own allocator is invisible to it).

    ctxmt benchmark decode [--quick] [--preset small] [--threads 2] [--repeats 5] [--device auto] [--compile]

``--compile``: ctxmt is also timed with its decoder layers compiled (``ctxmt-compiled``: ``translate --compile``,
:mod:`ctxmt_cli.models.compiled`), compiled before the rounds (``compile:`` lines give those seconds), with
``ratio: MODE-PRESET ctxmt-compiled/PEER`` lines.

On the CPU the same searches run again in int8: the ctxmt model through ``--quantize int8``'s path
(:func:`ctxmt_cli.models.quantize.quantize`) against CTranslate2 with int8 weights and compute (``int8`` rows);
``ratio: MODE-int8-PRESET ctxmt/ct2`` compares the two, ``ratio: MODE-int8-PRESET ctxmt-int8/ctxmt`` is what
int8 gains over ctxmt's float32 (timed in the same rounds).

Prints ``memory: MODE-PRESET IMPL = X.X MB`` and ``memory-ratio: MODE-PRESET PEER/ctxmt = X.XX`` (above 1 =
ctxmt uses less), then closes with ``ratio: greedy-PRESET ctxmt/PEER`` and ``ratio: beam4-PRESET ctxmt/PEER``
(ratio of the median tokens/s).
"""

from __future__ import annotations

import copy
import sys
import time
from pathlib import Path

import torch

# the sibling helpers, importable only while this directory is on the path: left there, its train.py /
# score.py / decode.py would shadow any other module of those names in the same process
sys.path.insert(0, str(Path(__file__).resolve().parent))
try:
    import bench_util as bu
    from peer_ct2 import ct2_peer
    from peers import make_peers
finally:
    sys.path.pop(0)

from ctxmt_cli.core.batch import Batch  # noqa: E402
from ctxmt_cli.decode.search import beam_search, greedy_search  # noqa: E402
from ctxmt_cli.models.quantize import quantize  # noqa: E402

Settings = bu.Settings
SENTENCES, LENGTH, NEW = 32, 25, 25
BEAM = 4


def ctxmt_runs(model, batch: Batch) -> dict:
    """ctxmt's greedy and beam-4 calls, forced to NEW decoder steps (NEW - 1 tokens, then ``</s>``)."""
    model.eval()
    n = NEW - 1
    return {"greedy": lambda: greedy_search(model, batch, max_len=n, min_len=n),
            f"beam{BEAM}": lambda: beam_search(model, batch, beam=BEAM, max_len=n, min_len=n)}


def compiled_runs(model, batch: Batch) -> dict:
    """``ctxmt_runs`` of a copy of ``model`` with its decoder layers compiled (``translate --compile``), each
    compiled once here (the seconds printed: the first call of a process pays them, the timed rounds do not)."""
    from ctxmt_cli.models.compiled import compile_decoder

    copy_ = copy.deepcopy(model)
    compile_decoder(copy_, warn=lambda line: print(f"warning: {line}"))
    runs = ctxmt_runs(copy_, batch)
    for mode, run in runs.items():
        start = time.perf_counter()
        with torch.inference_mode():
            run()
        print(f"compile: {mode} ctxmt-compiled {time.perf_counter() - start:.1f} s (its first call, untimed)")
    return runs


def measure(settings: Settings, dims: bu.Dims, batch: Batch) -> tuple[dict, dict]:
    """tokens/s and peak memory (MB, None = not measurable) per search mode and implementation."""
    model = bu.ctxmt_model(dims, settings.seed, settings.device)
    ours = ctxmt_runs(model, batch)
    compiled = compiled_runs(model, batch) if settings.compile else {}
    peers = make_peers(dims, settings.seed, inference_of=model, threads=settings.threads, device=settings.device)
    results, memory = {}, {}
    for mode, k in (("greedy", 1), (f"beam{BEAM}", BEAM)):
        runs = {"ctxmt": ours[mode], **({"ctxmt-compiled": compiled[mode]} if compiled else {})}
        for peer in peers:
            runs[peer.name] = (lambda peer=peer, k=k: peer.beam(batch, k, NEW))
        seconds = bu.time_round_robin(runs, settings.timed_repeats(), device=settings.device)
        results[mode] = bu.rates(seconds, SENTENCES * NEW)
        memory[mode] = bu.peak_memory(runs, settings.device)
    if settings.device == "cpu":
        results |= measure_int8(settings, dims, batch, model)
    return results, memory


def measure_int8(settings: Settings, dims: bu.Dims, batch: Batch, model) -> dict:
    """tokens/s of the int8 searches (``MODE-int8``): ctxmt's model quantized, CTranslate2 in int8 when it is
    installed, and ctxmt's float32 model again in the same rounds (``ctxmt-float32``)."""
    int8 = quantize(copy.deepcopy(model))
    ours, exact = ctxmt_runs(int8, batch), ctxmt_runs(model, batch)
    peer = ct2_peer(model, dims.vocab, dims.max_positions, settings.threads, quantization="int8")
    results = {}
    for mode, k in (("greedy", 1), (f"beam{BEAM}", BEAM)):
        runs = {"ctxmt": ours[mode], "ctxmt-float32": exact[mode]}
        if peer is not None:
            runs["ct2"] = (lambda k=k: peer.beam(batch, k, NEW))
        seconds = bu.time_round_robin(runs, settings.timed_repeats(), device=settings.device)
        results[f"{mode}-int8"] = bu.rates(seconds, SENTENCES * NEW)
    return results


def run(settings: Settings) -> dict[str, dict[str, list[float]]]:
    """Time greedy and beam search, then their peak memory; print the table, the memory lines and the ratio lines;
    tokens/s per mode and implementation."""
    settings = bu.check(settings)
    dims = bu.Dims.of(settings.preset)
    batch = Batch(src=bu.random_pairs(SENTENCES, LENGTH, dims.vocab, settings.seed).src).to(settings.device)
    with bu.torch_threads(settings.threads):
        print(f"decode {settings.preset}: {dims.describe()}; {SENTENCES} sentences x {LENGTH} source tokens, "
              f"{NEW} new tokens each; {settings.threads} torch threads; "
              f"{settings.timed_repeats()} timed runs each after one warm-up{bu.device_note(settings.device)}")
        results, memory = measure(settings, dims, batch)
    table, lines, ratios = bu.new_table("decoding: generated tokens/s", "tok/s"), [], []
    for mode, per_impl in results.items():
        figure = f"{mode}-{settings.preset}"
        bu.add_rows(table, figure, per_impl)
        if mode in memory:
            lines += bu.memory_lines(figure, memory[mode])
        ratios += bu.ratio_lines(figure, {k: v for k, v in per_impl.items() if k != "ctxmt-float32"})
        if "ctxmt-compiled" in per_impl:                                    # the compiled decoder against the peers
            ratios += bu.ratio_lines(figure, {k: v for k, v in per_impl.items() if k not in ("ctxmt", "ctxmt-float32")},
                                     ours="ctxmt-compiled")
        if "ctxmt-float32" in per_impl:                                     # what int8 gains, same rounds
            ratios += bu.ratio_lines(figure, {"ctxmt-int8": per_impl["ctxmt"], "ctxmt": per_impl["ctxmt-float32"]},
                                     ours="ctxmt-int8")
    bu.print_report(table, lines + ratios)
    return results


if __name__ == "__main__":
    bu.main(run, __doc__)
