"""Shared pieces of the peer benchmarks (train, score, decode, document): settings, data, timing, report.

Every figure is timed round-robin (one run of each implementation per repeat, after a warm-up run
of each) so a slow spell of a shared CPU hits every implementation alike; the report gives the
median rate and its spread (min-max) and closes with ``ratio: FIGURE ctxmt/PEER = X.XX`` lines,
each the ratio of the medians (above 1 = ctxmt faster).

``Settings.device`` (``--device``): ctxmt and every peer run there, their inputs put there once, before
any clock is read. On CUDA, kernels run asynchronously, so each timed call is bracketed by
:func:`synchronize` (a no-op on the CPU): the clock reads the finished work, not the launches.

Peak memory (:func:`peak_memory`): after the timed rounds, one more, untimed call of each implementation.
On the CPU under ``torch.profiler`` (:func:`cpu_operation_memory`): the peak of tensor storage torch's CPU
allocator handed out during the call beyond what was live before (weights, optimiser state, caches kept
between calls are not in it); on CUDA ``torch.cuda.max_memory_allocated`` after ``reset_peak_memory_stats``,
minus what was allocated before (:func:`cuda_operation_memory`). Reported as ``memory: FIGURE IMPL = X.X MB``
and ``memory-ratio: FIGURE PEER/ctxmt = X.XX`` lines (above 1 = ctxmt uses less), before the ratio lines.
An implementation with its own allocator (CTranslate2) is invisible there and gets no figure.
"""

from __future__ import annotations

import gc
import os
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from ctxmt_cli.config import PRESETS, validate_recipe
from ctxmt_cli.core.batch import Batch, VocabInfo
from ctxmt_cli.device import resolve_device
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.heap import keep_freed_memory
from ctxmt_cli.models.families import build_model

#: where the third-party corpora some benchmarks read (SCAT, IWSLT 2017, Maruf et al.'s documents) live: this
#: variable, else ``shared/data`` beside the source checkout the package sits in (the repository's ../shared/data)
SHARED_DATA_ENV = "CTXMT_SHARED_DATA"


def shared_data(*parts: str) -> Path:
    """A path under the third-party data folder (see :data:`SHARED_DATA_ENV`); an installed ctxmt sets the variable."""
    root = os.environ.get(SHARED_DATA_ENV)
    base = Path(root) if root else Path(__file__).resolve().parents[3] / "shared" / "data"
    return base.joinpath(*parts)

PAD, UNK, BOS, EOS, BRK = 0, 1, 2, 3, 4          # ctxmt's special ids (VocabInfo defaults), used by every peer
FIRST_WORD = 5                                   # random tokens never hit a special id
#: the issue's vocabulary; ``tiny`` is the smoke-test path, so it also gets a small vocabulary
VOCAB = {"tiny": 1000}
DEFAULT_VOCAB = 16000
MB = 1024 * 1024
#: implementations whose memory torch's allocator cannot see (CTranslate2's C++ allocator): no memory figure
OWN_ALLOCATOR = {"ct2"}


@dataclass
class Settings:
    """One peer-benchmark run's options (the CLI fills it; ``quick`` trims repeats and presets)."""

    preset: str = "small"
    quick: bool = False
    threads: int = 2
    repeats: int | None = None     # timed rounds, round-robin; None: 5 (quick: 3); given, it wins over quick
    seed: int = 0
    device: str = "cpu"               # a --device value; :func:`check` resolves it (auto -> cpu or cuda:N)
    count_ops: bool = False           # train: count aten ops per update instead of timing (``train_ops.py``)
    batch_tokens: int | None = None  # train: time this batch size on real lengths, with MFU (``train_scale.py``)
    compile: bool = False             # decode: also time ctxmt with its decoder layers compiled (``--compile``)

    def timed_repeats(self) -> int:
        """Rounds to time: ``--repeats`` when given (also with ``--quick``: a between-commit comparison needs
        more rounds than quick's 3, whose ratios vary by about 15% from run to run on a shared CPU), else 5, or
        3 with ``--quick``."""
        if self.repeats is not None:
            return self.repeats
        return 3 if self.quick else 5


@dataclass(frozen=True)
class Dims:
    """Model dimensions shared by ctxmt and every peer (identical by construction)."""

    d_model: int
    ffn: int
    heads: int
    enc_layers: int
    dec_layers: int
    vocab: int
    max_positions: int = 1024

    @classmethod
    def of(cls, preset: str) -> Dims:
        d, f, h, e, dl = PRESETS[preset]
        return cls(d, f, h, e, dl, VOCAB.get(preset, DEFAULT_VOCAB))

    def describe(self) -> str:
        return (f"d={self.d_model} ffn={self.ffn} heads={self.heads} layers={self.enc_layers}+{self.dec_layers} "
                f"vocab={self.vocab}")


def check(settings: Settings) -> Settings:
    """One-line errors for options the run cannot use; ``settings`` with its device resolved (``cpu`` or
    ``cuda:N``; a CUDA device this machine lacks is refused)."""
    if settings.preset not in PRESETS:
        raise CtxmtError(f"--preset {settings.preset!r}: choose one of {', '.join(PRESETS)}")
    if min(settings.timed_repeats(), settings.threads) < 1:
        raise CtxmtError("--repeats and --threads must be >= 1")
    if settings.count_ops and settings.batch_tokens is not None:
        raise CtxmtError("--count-ops and --batch-tokens are two different runs of benchmark train: give one")
    if settings.batch_tokens is not None and settings.batch_tokens < 1:
        raise CtxmtError(f"--batch-tokens {settings.batch_tokens}: give a positive number of target tokens")
    return replace(settings, device=str(resolve_device(settings.device)))


def is_cuda(device: str) -> bool:
    """Whether a resolved device name (``cpu``, ``cuda:N``) is a CUDA device."""
    return str(device).startswith("cuda")


def synchronize(device: str) -> None:
    """Wait until ``device`` has run every queued kernel (CUDA is asynchronous); a no-op on the CPU."""
    if is_cuda(device):
        torch.cuda.synchronize(device)


def device_note(device: str) -> str:
    """The header lines' device part: empty on the CPU (the lines read as they always did), else
    ``; on cuda:0 (NVIDIA H200)``."""
    return f"; on {device} ({torch.cuda.get_device_name(torch.device(device))})" if is_cuda(device) else ""


@contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """``torch.set_num_threads(n)`` for ctxmt and the peers alike, restored afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def ctxmt_recipe(dims: Dims):
    """A sentence-level recipe with ``dims``; dropout off as in every peer (the figure is the matrix work)."""
    return validate_recipe({"model": {
        "family": "sentence", "preset": None, "d_model": dims.d_model, "ffn_dim": dims.ffn, "heads": dims.heads,
        "encoder_layers": dims.enc_layers, "decoder_layers": dims.dec_layers, "dropout": 0.0,
        "max_positions": dims.max_positions}}, "peer benchmark")


def ctxmt_model(dims: Dims, seed: int, device: str = "cpu"):
    """ctxmt's sentence Transformer with a joint vocabulary (embeddings and output tied, as in the peers), on
    ``device``."""
    torch.manual_seed(seed)
    return build_model(ctxmt_recipe(dims).model, VocabInfo(dims.vocab, dims.vocab)).to(device)


def random_pairs(rows: int, length: int, vocab: int, seed: int) -> Batch:
    """``rows`` source/target pairs of exactly ``length`` tokens each (the last one ``</s>``), no padding."""
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(FIRST_WORD, vocab, (rows, length), generator=gen)
    tgt = torch.randint(FIRST_WORD, vocab, (rows, length), generator=gen)
    src[:, -1] = EOS
    tgt[:, -1] = EOS
    tgt_in = torch.cat([torch.full((rows, 1), BOS), tgt[:, :-1]], dim=1)  # teacher forcing: <s> + labels[:-1]
    return Batch(src=src, tgt_in=tgt_in, tgt_out=tgt)


def time_round_robin(runs: dict[str, Callable[[], object]], repeats: int,
                     warmups: dict[str, Callable[[], object]] | None = None,
                     device: str = "cpu") -> dict[str, list[float]]:
    """Seconds of each run per repeat: one warm-up call each (``warmups[name]`` instead where given: a
    shorter call of the same code), then ``repeats`` rounds over all runs; ``device`` is synchronised
    before each clock reading (:func:`synchronize`)."""
    for name, fn in runs.items():
        (warmups or {}).get(name, fn)()               # warm-up: allocator, oneDNN/cuBLAS kernels, lazy init
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, fn in runs.items():
            synchronize(device)                       # the previous call's kernels are not this call's time
            start = time.perf_counter()
            fn()
            synchronize(device)
            seconds[name].append(time.perf_counter() - start)
    return seconds


def rates(seconds: dict[str, list[float]], work: float) -> dict[str, list[float]]:
    """Work units per second of every timed run."""
    return {name: [work / s for s in values] for name, values in seconds.items()}


#: the profiler's own start/stop notes on stderr (kineto writes them from C++ and no setting silences them)
PROFILER_NOTE = b"USDT:"


@contextmanager
def without_profiler_notes() -> Iterator[None]:
    """Keep kineto's ``USDT: ... profiler_start`` / ``profiler_stop`` lines out of a benchmark's output: stderr (the
    file descriptor, which C++ writes to) goes to a temporary file meanwhile, and every other line is written back."""
    import sys
    import tempfile

    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            kept = b"".join(line for line in held if not line.startswith(PROFILER_NOTE))
            if kept:
                os.write(2, kept)


def cpu_operation_memory(fn: Callable[[], object], device: str = "cpu") -> int:
    """Peak bytes the CPU allocator had handed out during ``fn()`` beyond what was live before.

    PyTorch keeps no CPU peak statistic, but under ``torch.profiler.profile(profile_memory=True)`` its
    CPU allocator reports each allocation/free with its running total of allocated bytes (c10's
    ProfiledCPUMemoryReporter); the total at the start is the first event's total minus its own size.
    Tensor storage only: not RSS, not oneDNN scratch or other allocators. ``device`` is unused (the
    signature matches :func:`cuda_operation_memory`).
    """
    from torch._C._profiler import _EventType
    from torch.profiler import ProfilerActivity, profile

    with without_profiler_notes(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    stack, events = list(prof.profiler.kineto_results.experimental_event_tree()), []
    while stack:                                   # allocations hang under the ops that made them
        node = stack.pop()
        stack.extend(node.children)
        if node.tag == _EventType.Allocation:
            events.append((node.start_time_ns, node.extra_fields))
    if not events:
        return 0
    first = min(events, key=lambda e: e[0])[1]
    start = first.total_allocated - first.alloc_size
    return max(0, max(e.total_allocated for _, e in events) - start)


def cuda_operation_memory(fn: Callable[[], object], device: str) -> int:
    """``max_memory_allocated`` during ``fn()`` minus what was allocated before (the weights)."""
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    fn()
    torch.cuda.synchronize(device)
    return torch.cuda.max_memory_allocated(device) - before


def operation_memory(fn: Callable[[], object], device: str = "cpu") -> float:
    """Operation memory (MB) of ``fn()`` on ``device`` (garbage collected first)."""
    gc.collect()
    measure = cuda_operation_memory if device.startswith("cuda") else cpu_operation_memory
    return measure(fn, device) / MB


def peak_memory(runs: dict[str, Callable[[], object]], device: str = "cpu") -> dict[str, float | None]:
    """MB of one extra, untimed call of each run on ``device`` (call it after the timed rounds: warm-up done);
    None where the implementation has its own allocator (:data:`OWN_ALLOCATOR`)."""
    return {name: None if name in OWN_ALLOCATOR else operation_memory(fn, device) for name, fn in runs.items()}


def memory_lines(figure: str, per_impl: dict[str, float | None], shown: set[str] | None = None) -> list[str]:
    """``memory: FIGURE IMPL = X.X MB`` per implementation (only those in ``shown`` if given), then
    ``memory-ratio: FIGURE PEER/ctxmt = X.XX`` per peer with a figure (peer MB over ctxmt MB: above 1 = ctxmt
    uses less)."""
    lines = [f"memory: {figure} {name} = " + ("n/a (own allocator)" if mb is None else f"{mb:.1f} MB")
             for name, mb in per_impl.items() if shown is None or name in shown]
    ours = per_impl["ctxmt"]
    return lines + [f"memory-ratio: {figure} {name}/ctxmt = {mb / ours if ours else float('inf'):.2f}"
                    for name, mb in per_impl.items() if name != "ctxmt" and mb is not None]


def add_rows(table, figure: str, per_impl: dict[str, list[float]]) -> None:
    """One table row per implementation: figure, median, min-max, runs."""
    for name, values in per_impl.items():
        table.add_row(figure, name, f"{statistics.median(values):.1f}", f"{min(values):.1f}-{max(values):.1f}",
                      str(len(values)))


def new_table(title: str, unit: str):
    """A rich table of rates: figure, implementation, median ``unit``, min-max, runs (rows: :func:`add_rows`)."""
    from rich.table import Column, Table

    return Table("figure", "implementation", Column(f"median {unit}", justify="right"),
                 Column("min-max", justify="right"), Column("runs", justify="right"), title=title)


def ratio_lines(figure: str, per_impl: dict[str, list[float]], ours: str = "ctxmt") -> list[str]:
    """``ratio: FIGURE OURS/PEER = X.XX`` for every other implementation that was timed, ratio of medians; with two
    or more rounds, `` (rounds LO-HI)`` follows: the lowest and highest ratio of one round's pair of runs, so a
    single run shows how far its ratio can be trusted. ``ours``: the implementation compared (ctxmt)."""
    median = statistics.median(per_impl[ours])
    lines = []
    for name, values in per_impl.items():
        if name == ours:
            continue
        line = f"ratio: {figure} {ours}/{name} = {median / statistics.median(values):.2f}"
        # one round's pair of runs: the machine's same moment
        rounds = [a / b for a, b in zip(per_impl[ours], values, strict=False)]
        if len(rounds) > 1:
            line += f" (rounds {min(rounds):.2f}-{max(rounds):.2f})"
        lines.append(line)
    return lines


def print_report(table, lines: list[str]) -> None:
    """The table, then ``lines`` (memory lines, then the ratio lines last: scripts and tests read them from the end)."""
    from ctxmt_cli.tables import print_table

    print_table(table)
    for line in lines:
        print(line)


def main(run: Callable[[Settings], object], doc: str) -> None:
    """The scripts' own entry point: ``python -m ctxmt_cli.benchmarks.NAME [--quick] [--preset P] [--threads N]
    [--repeats N] [--device auto|cpu|cuda|cuda:N]``."""
    import argparse

    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    for flag, kind in (("preset", str), ("threads", int), ("repeats", int)):
        parser.add_argument(f"--{flag}", type=kind, default=getattr(Settings, flag))
    parser.add_argument("--device", default="auto")
    args = parser.parse_args()
    keep_freed_memory()                  # the heap setting every ctxmt command starts with (ctxmt_cli.heap)
    run(Settings(args.preset, args.quick, args.threads, args.repeats, device=args.device))
