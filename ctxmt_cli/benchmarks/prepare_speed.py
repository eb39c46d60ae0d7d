"""Preparing at scale: ``ctxmt prepare text`` pairs/s and peak memory against the raw SentencePiece encode rate.

Sets: the Europarl En→Fr training set (``../shared/data/europarl_enfr/train.*.xz``, 565,456 pairs, read
compressed) and a synthetic 6M-pair corpus made from it (every Europarl pair repeated, copy ``r`` with its
words rotated by ``r`` places and its documents renamed: the same lengths and vocabulary, not the same lines;
plain text in a temporary directory). ``--quick``: a 5,000-pair slice of Europarl (written back as .xz) and a
20,000-pair synthetic corpus, with a 2,000-piece vocabulary: small enough for a test.

Each ``prepare text`` runs as its own process, ``--workers`` = ``--threads`` (default 2: the issue's 2
cores); its peak memory is the largest sum over the process tree (main process and workers) of the
proportional set size (``Pss`` in ``/proc/PID/smaps_rollup``: shared pages counted once; ``VmRSS`` where
the kernel lacks it), sampled every 0.1 s. Figures:

* ``prepare-europarl-trained``: the whole command, SentencePiece training (joint BPE, 32,000 pieces; quick
  2,000) on its seeded sample included;
* ``prepare-europarl`` and ``prepare-synthetic6M``: the same with that model reused (``--spm``): reading,
  checking, encoding in the workers and writing, the part that scales with the corpus;
* ``raw-encode``: SentencePiece alone (``encode(list, num_threads=--threads)``, both sides, ids as Python
  lists as ``prepare`` gets them) on the first 200,000 pairs (quick: all) of the same text held in memory,
  timed ``--repeats`` times (median) before and after each ``prepare`` run, on the same cores: the tokenizer
  is the physical limit of preparation;
* ``first-step``: seconds from starting ``ctxmt train europarl_enfr/sentence_small`` on the synthetic
  prepared set to its first logged update (the process is then stopped);
* ``loader``: windows batches/s of the trainer's own loader (the family's ``plan_batches`` once, then its ``collate``
  per batch) over the synthetic set at the base recipe's 25,000-token budget, against updates/s of the
  trainer's update at transformer-base dims (``Updater.update``, fp32, the prepared vocabulary) on those
  batches (quick: the small preset, 4,096 tokens).

    ctxmt benchmark prepare [--quick] [--threads 2] [--repeats 3]

Closes with ``ratio: prepare-SET prepare/raw-encode = X.XX`` (goal ≥ 0.6) and ``ratio: loader-PRESET
loader/trainer = X.XX`` (batches delivered per batch consumed; goal ≥ 5).
"""

from __future__ import annotations

import json
import lzma
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

# the sibling helpers, importable only while this directory is on the path (see score.py)
sys.path.insert(0, str(Path(__file__).resolve().parent))
try:
    import bench_util as bu
    from train import ctxmt_updater
finally:
    sys.path.pop(0)

EUROPARL = bu.shared_data("europarl_enfr")
RAW_PAIRS = 200_000
MB = 1024 * 1024


@dataclass
class Settings:
    """``benchmark prepare`` options: ``threads`` = encoding workers and SentencePiece threads."""

    quick: bool = False
    threads: int = 2
    repeats: int = 3

    @property
    def sizes(self) -> dict:
        """Pairs of the Europarl set (None: all of it), of the synthetic set, and the vocabulary."""
        if self.quick:
            return {"europarl": 5_000, "synthetic": 20_000, "vocab": 2_000}
        return {"europarl": None, "synthetic": 6_000_000, "vocab": 32_000}


def read_europarl(limit: int | None) -> dict[str, list[bytes]]:
    """The training set's lines (en, fr, docids), all or the first ``limit``, as bytes (newline kept)."""
    out = {}
    for part in ("en", "fr", "docids"):
        with lzma.open(EUROPARL / f"train.{part}.xz", "rb") as f:
            out[part] = list(islice(f, limit))
    return out


def write_set(lines: dict[str, list[bytes]], prefix: Path, pairs: int, compress: bool) -> None:
    """``pairs`` pairs into ``prefix.{en,fr,docids}``: the lines, then copies with words rotated and documents
    renamed (copy 0 is the text itself)."""
    n = len(lines["en"])
    opener = lzma.open if compress else open
    suffix = ".xz" if compress else ""
    handles = {p: opener(f"{prefix}.{p}{suffix}", "wb") for p in lines}
    try:
        for start in range(0, pairs, n):
            r, count = start // n, min(n, pairs - start)
            for part, rows in lines.items():
                rows = rows[:count]
                if part == "docids":
                    rows = [row.rstrip(b"\n") + b"-%d\n" % r for row in rows] if r else rows
                elif r:
                    rows = [_rotated(row, r) for row in rows]
                handles[part].writelines(rows)
    finally:
        for h in handles.values():
            h.close()


def _rotated(row: bytes, r: int) -> bytes:
    words = row.split()
    k = r % max(len(words), 1)
    return b" ".join(words[k:] + words[:k]) + b"\n"


def tree_memory(root: int) -> int:
    """Proportional set size (bytes) of ``root`` and all its descendants (0 for processes already gone)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry.name}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        total += _process_memory(pid)
    return total


def _process_memory(pid: int) -> int:
    for path, key in ((f"/proc/{pid}/smaps_rollup", "Pss:"), (f"/proc/{pid}/status", "VmRSS:")):
        try:
            for line in Path(path).read_text().splitlines():
                if line.startswith(key):
                    return int(line.split()[1]) * 1024
        except OSError:
            continue
    return 0


def run_watched(args: list[str], until: str | None = None) -> tuple[float, int, str]:
    """Run ``python -m ctxmt_cli ARGS``; its wall seconds (to the first output line containing ``until``, the
    process then stopped), peak tree memory (bytes) and output."""
    with tempfile.TemporaryFile("w+", encoding="utf-8") as log:
        proc = subprocess.Popen([sys.executable, "-m", "ctxmt_cli", *args], stdout=log, stderr=subprocess.STDOUT)
        start, peak, reached = time.perf_counter(), 0, False
        while proc.poll() is None:
            peak = max(peak, tree_memory(proc.pid))
            if until is not None and until in _read(log):
                reached = True
                break
            time.sleep(0.1)
        elapsed = time.perf_counter() - start
        if reached:
            proc.terminate()
        proc.wait()
        out = _read(log)
    if not reached and proc.returncode != 0:
        raise RuntimeError(f"ctxmt {' '.join(args[:2])} failed ({proc.returncode}):\n{out[-2000:]}")
    return elapsed, peak, out


def _read(log) -> str:
    log.seek(0)
    return log.read()


def raw_encode_rate(model: Path, lines: dict[str, list[bytes]], threads: int, repeats: int) -> list[float]:
    """Pairs/s of SentencePiece alone on ``lines`` (``en`` and ``fr``, both encoded), ``repeats`` timings."""
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(model))
    sides = [[row.decode("utf-8").rstrip("\n") for row in lines[p]] for p in ("en", "fr")]
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        for texts in sides:
            sp.encode(texts, num_threads=threads)
        rates.append(len(sides[0]) / (time.perf_counter() - start))
    return rates


def prepare_args(prefix: Path, out: Path, threads: int, vocab: int, model: Path | None, valid: Path | None) -> list:
    args = ["prepare", "text", "--train", str(prefix), "--src-lang", "en", "--tgt-lang", "fr", "--workers",
            str(threads), "--out", str(out), "--force"]
    args += ["--valid", str(valid)] if valid is not None else []
    return args + (["--spm", str(model)] if model else ["--vocab-size", str(vocab), "--spm-type", "bpe"])


def measure_set(name: str, args: list, pairs: int, raw: Callable[[], list[float]]) -> dict:
    """One ``prepare`` run between two raw-encode timings; its figures."""
    before = raw()
    seconds, peak, _ = run_watched(args)
    after = raw()
    raw_rate = statistics.median(before + after)
    rate = pairs / seconds
    print(f"prepare-{name}: {pairs} pairs in {seconds:.1f} s = {rate:,.0f} pairs/s; peak memory {peak / MB:,.0f} MB; "
          f"raw encode {raw_rate:,.0f} pairs/s (min {min(before + after):,.0f}, max {max(before + after):,.0f})",
          flush=True)
    return {"seconds": seconds, "rate": rate, "peak_mb": peak / MB, "raw": raw_rate}


def loader_vs_trainer(data: Path, quick: bool, threads: int, repeats: int) -> tuple[str, float, float]:
    """Batches/s of the trainer's loader and updates/s of its update at base (quick: small) dims."""
    import numpy as np

    from ctxmt_cli.config import load_recipe
    from ctxmt_cli.core.batch import VocabInfo
    from ctxmt_cli.data.batching import BatchBudget
    from ctxmt_cli.data.store import PreparedData
    from ctxmt_cli.models.families import inputs_of
    from ctxmt_cli.recipe_catalog import resolve_recipe
    from ctxmt_cli.train.setup import window_dataset

    preset = "small" if quick else "base"
    recipe = load_recipe(resolve_recipe(f"europarl_enfr/sentence_{preset}"))
    prepared = PreparedData(data)
    vocab = VocabInfo(prepared.meta["vocab_size"]["src"], prepared.meta["vocab_size"]["tgt"])
    dataset = window_dataset(prepared, "train", recipe, vocab, "train")
    start = time.perf_counter()
    inputs = inputs_of(recipe.model)                         # the sentence family's: length-bucketed rows
    plans = inputs.plan_batches(dataset, dataset.indices, budget=BatchBudget.of(recipe.data))
    planned = time.perf_counter() - start
    chosen = [plans[int(k)] for k in np.random.default_rng(0).choice(len(plans), 50, replace=False)]
    start = time.perf_counter()
    batches = [inputs.collate(dataset, p, vocab, chunked=True) for p in chosen]
    loader = len(batches) / (time.perf_counter() - start)
    print(f"loader-{preset}: {len(plans)} batches planned in {planned:.1f} s; {loader:,.1f} batches/s", flush=True)
    trainer = _update_rate(preset, vocab.src_size, batches, threads, max(1, repeats - 1))
    return preset, loader, trainer


def _update_rate(preset: str, vocab: int, batches: list, threads: int, repeats: int) -> float:
    """Updates/s of ctxmt's trainer update (fp32) at ``preset`` dims on the loader's ``batches``."""
    d, f, h, e, dl = bu.PRESETS[preset]
    with bu.torch_threads(threads):
        updater = ctxmt_updater(bu.Dims(d, f, h, e, dl, vocab), seed=0)
        updater.update([batches[0]])                                   # warm-up
        start = time.perf_counter()
        for batch in batches[1:1 + repeats]:
            updater.update([batch])
        rate = repeats / (time.perf_counter() - start)
    print(f"trainer-{preset}: {rate:.3f} updates/s ({threads} threads, fp32)", flush=True)
    return rate


def run(settings: Settings) -> dict:
    """Every figure of the docstring; the ratio lines close the output."""
    if not (EUROPARL / "train.en.xz").is_file():
        print(f"prepare not measured: {EUROPARL} not found (no ../shared/data; set {bu.SHARED_DATA_ENV})")
        return {}
    sizes, threads = settings.sizes, settings.threads
    with tempfile.TemporaryDirectory(prefix="ctxmt-bench-prepare-") as tmp:
        tmp = Path(tmp)
        lines = read_europarl(sizes["europarl"])
        europarl = EUROPARL / "train"
        if settings.quick:
            europarl = tmp / "europarl"
            write_set(lines, europarl, len(lines["en"]), compress=True)
        n_europarl = len(lines["en"])
        print(f"prepare: {threads} workers; Europarl {n_europarl} pairs (.xz), synthetic {sizes['synthetic']} pairs; "
              f"joint BPE {sizes['vocab']}", flush=True)
        seconds, peak, _ = run_watched(prepare_args(europarl, tmp / "trained", threads, sizes["vocab"], None, None))
        print(f"prepare-europarl-trained: {n_europarl / seconds:,.0f} pairs/s ({seconds:.1f} s with SentencePiece "
              f"training); peak memory {peak / MB:,.0f} MB", flush=True)
        model = tmp / "trained" / "spm.model"
        sample = {part: lines[part][:RAW_PAIRS] for part in ("en", "fr")}

        def raw():
            return raw_encode_rate(model, sample, threads, settings.repeats)

        figures = {"europarl": measure_set("europarl", prepare_args(europarl, tmp / "eu", threads, 0, model, None),
                                           n_europarl, raw)}
        synthetic = tmp / "synthetic"
        write_set(lines, synthetic, sizes["synthetic"], compress=False)
        name = "synthetic6M" if not settings.quick else "synthetic"
        valid = EUROPARL / "valid"
        figures[name] = measure_set(name, prepare_args(synthetic, tmp / "syn", threads, 0, model, valid),
                                    sizes["synthetic"], raw)
        del lines
        for part in ("en", "fr", "docids"):
            (tmp / f"synthetic.{part}").unlink()
        first, _, _ = run_watched(["train", "europarl_enfr/sentence_small", "--set", f"data.path={tmp / 'syn'}",
                                   "--set", f"train.save_dir={tmp / 'run'}", "--set", "train.log_every=1"],
                                  until="step 1/")
        print(f"first-step: {first:.1f} s from `ctxmt train` starting to its first update on {name}", flush=True)
        preset, loader, trainer = loader_vs_trainer(tmp / "syn", settings.quick, threads, settings.repeats)
    lines_out = [f"ratio: prepare-{k} prepare/raw-encode = {v['rate'] / v['raw']:.2f}" for k, v in figures.items()]
    lines_out.append(f"ratio: loader-{preset} loader/trainer = {loader / trainer:.2f}")
    print("\n".join(lines_out))
    return {"sets": figures, "first_step_s": first, "loader": loader, "trainer": trainer}


if __name__ == "__main__":
    quick = "--quick" in sys.argv
    print(json.dumps(run(Settings(quick=quick)), indent=1))
