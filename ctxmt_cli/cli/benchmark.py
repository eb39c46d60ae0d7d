"""``ctxmt benchmark NAME``: run one of the packaged benchmarks (``ctxmt_cli/benchmarks/``).

Registered on the app by :func:`register` (:mod:`ctxmt_cli.cli.app` calls it).
Each benchmark reads a subset of the options; any other given on the command line is refused with one line,
never silently dropped.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Literal

import typer

from ctxmt_cli.cli.errors import given_params, user_errors
from ctxmt_cli.cli.options import (
    BATCH_TOKENS,
    BEAM,
    COUNT,
    THREADS,
    BenchCorpus,
    Device,
    LogFormat,
    Preset,
)
from ctxmt_cli.errors import CtxmtError

BENCHMARKS = {"context-scaling": "context_scaling.py", "train": "train.py", "score": "score.py", "decode": "decode.py",
              "document": "document.py", "mbe": "mbe.py", "ctranslate2": "export_ct2.py", "prepare": "prepare_speed.py"}
CONTEXT_SCALING_OUT = Path("out/context_scaling")
PEER_BENCHMARKS = ("train", "score", "decode", "document", "mbe")             # one shared Settings (bench_util)
BenchmarkName = Literal[tuple(BENCHMARKS)]
#: the options each benchmark reads; any other given on the command line is refused, not silently dropped
_PEER_READS = ("preset", "quick", "threads", "repeats")
BENCHMARK_READS = {"context-scaling": ("contexts", "out", "docs", "sentences", "device", "preset", "beam", "repeats",
                                       "threads", "quick", "log_format"),
                   **{name: (*_PEER_READS, "device") for name in PEER_BENCHMARKS}, "mbe": (*_PEER_READS, "corpus"),
                   "train": (*_PEER_READS, "device", "count_ops", "batch_tokens"),
                   "decode": (*_PEER_READS, "device", "compile"),
                   "ctranslate2": ("checkpoint", "quick", "threads", "repeats", "beam", "device"),
                   "prepare": ("quick", "threads", "repeats")}


def _load_benchmark(name: str):
    """Import ``ctxmt_cli/benchmarks/<file>`` as a module (scripts that import their siblings by bare name)."""
    import importlib.util

    import ctxmt_cli

    if name not in BENCHMARKS:
        raise CtxmtError(f"unknown benchmark {name!r}; known: {', '.join(BENCHMARKS)}")
    path = Path(ctxmt_cli.__file__).resolve().parent / "benchmarks" / BENCHMARKS[name]
    if not path.is_file():                               # they ship with the package: a broken installation
        raise CtxmtError(f"benchmark script not found at {path}; reinstall ctxmt (pip install --force-reinstall)")
    spec = importlib.util.spec_from_file_location(f"ctxmt_benchmark_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module                                        # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@user_errors
def benchmark(
    ctx: typer.Context,
    name: BenchmarkName = typer.Argument(..., metavar="NAME", help="the benchmark to run"),
    contexts: str | None = typer.Option(None, help="context sizes K in sentences, comma-separated "
                                           "[default: 1,2,4,8,16; --quick 1,4,8]"),
    out: Path = typer.Option(CONTEXT_SCALING_OUT, "--out", "-o",
                             help="directory for the JSON results and the PNG plot"),
    docs: int | None = typer.Option(None, **COUNT,
                                    help="documents timed (decoded in parallel) [default: 4; --quick 2]"),
    sentences: int | None = typer.Option(None, **COUNT, help="first N sentences of each timed document "
                                            "[default: 32; --quick 16]"),
    device: Device = "auto",
    preset: Preset = typer.Option("small", help="model dims"),
    beam: int = typer.Option(1, **BEAM, help="beam size (1 = greedy)"),
    repeats: int | None = typer.Option(None, **COUNT, help="timed runs per implementation, round-robin "
                                           "(default: context-scaling 2, --quick 1, the fastest kept; "
                                           "train/score/decode 5, --quick 3, median; given, it wins over --quick)"),
    threads: int | None = typer.Option(None, **THREADS, help="torch CPU threads, same for ctxmt and peers "
                                          "(default: context-scaling 1, train/score/decode 2)"),
    quick: bool = typer.Option(False, "--quick", help="fewer repeats (context-scaling: fewer K, documents and "
                                                   "sentences): under 3 minutes"),
    corpus: BenchCorpus | None = typer.Option(None, help="mbe: synthetic (the quickstart's corpus), maruf-iwslt17 "
                                                 "(real TED talks, ../shared/data/maruf2019) [default: synthetic]"),
    log_format: LogFormat = None,
    count_ops: bool = typer.Option(False, "--count-ops", help="train: count the aten ops of one update (ctxmt and "
                                   "plain torch, fp32 and bf16, small/base/big) instead of timing"),
    batch_tokens: int | None = typer.Option(None, **BATCH_TOKENS, help="train: tokens/s and MFU at batches of N target "
                                               "tokens of real sentence lengths (e.g. 25000 with --preset base)"),
    compile: bool = typer.Option(False, "--compile", help="decode: also time ctxmt with `translate --compile`'s "
                                 "decoder (torch.compile; its compile time printed, not timed)"),
    checkpoint: Path | None = typer.Option(None, "--checkpoint", "-c", help="ctranslate2: an exportable checkpoint "
                                              "of the quickstart's synthetic data [default: train one here]"),
):
    """Run a benchmark (code in ctxmt_cli/benchmarks/): context-scaling = time and memory vs context size;
    train / score / decode = tokens/s or pairs/s of ctxmt vs torch.nn.Transformer and HF Marian, with ratio lines;
    document = seconds per sentence of the target-context modes; mbe = training tokens/s of Mini-batch Embedding
    vs the sentence-level model of the same dims; ctranslate2 = translation tokens/s and BLEU of a checkpoint under
    ctxmt vs its CTranslate2 export (float32, int8); prepare = `ctxmt prepare text` pairs/s and peak memory on Europarl
    and a synthetic 6M-pair corpus vs the raw SentencePiece encode rate, time to the first training step, loader vs
    trainer. All but mbe and prepare run on the device chosen (ctxmt and its peers alike).
    Each benchmark refuses the options it does not read."""
    _benchmark(ctx, ctx.params)


def _benchmark(ctx: typer.Context, p: dict) -> None:
    """The body of ``ctxmt benchmark``; ``p``: its options by name."""
    from ctxmt_cli.device import resolve_device

    name, quick, threads, repeats = p["name"], p["quick"], p["threads"], p["repeats"]
    _check_benchmark_options(ctx, name)
    where = str(resolve_device(p["device"])) if "device" in BENCHMARK_READS[name] else None  # a missing GPU: one line
    module = _load_benchmark(name)
    if name == "ctranslate2":
        return _run_ctranslate2(module, p["checkpoint"], quick, threads, repeats, p["beam"], where)
    if name in ("prepare", *PEER_BENCHMARKS):             # their Settings give the thread and repeat defaults
        defaults = module.Settings()
        threads, repeats = threads or defaults.threads, repeats or defaults.repeats
    if name == "prepare":
        module.run(module.Settings(quick, threads, repeats))
        return
    if name in PEER_BENCHMARKS:
        settings = module.Settings(p["preset"], quick, threads, repeats)
        if where is not None:                                  # None: mbe, whose trainers run on the CPU
            settings = replace(settings, device=where)
        if name == "train":
            settings = replace(settings, count_ops=p["count_ops"], batch_tokens=p["batch_tokens"])
        if name == "decode":
            settings = replace(settings, compile=p["compile"])
        module.run(settings if p["corpus"] is None else replace(settings, corpus=p["corpus"]))
        return
    from ctxmt_cli.logs import resolve_log_format

    module.run(module.Settings.make(quick, p["contexts"], out=p["out"], docs=p["docs"], sentences=p["sentences"],
                                    device=where, preset=p["preset"], beam=p["beam"], repeats=repeats,
                                    threads=threads, log_format=resolve_log_format(p["log_format"], sys.stdout)))


def _run_ctranslate2(module, checkpoint, quick, threads, repeats, beam, device: str) -> None:
    """``benchmark ctranslate2``, with its own settings (``export_ct2.Settings``); ``device`` resolved."""
    defaults = module.Settings()
    module.run(module.Settings(checkpoint, quick, threads or defaults.threads, repeats or defaults.repeats, beam,
                               device))


def _check_benchmark_options(ctx, name: str) -> None:
    """Refuse every option given on the command line that benchmark ``name`` does not read (one line)."""
    reads = BENCHMARK_READS[name]
    ignored = [max(p.opts, key=len) for p in given_params(ctx) if p.name not in reads and p.name != "name"]
    if ignored:
        takes = ", ".join(f"--{r.replace('_', '-')}" for r in reads)
        them = "them" if len(ignored) > 1 else "it"
        raise CtxmtError(f"benchmark {name} does not read {', '.join(ignored)} (remove {them}); it takes {takes}")


def register(app: typer.Typer) -> None:
    """Add ``benchmark`` to the app."""
    app.command(name="benchmark")(benchmark)
