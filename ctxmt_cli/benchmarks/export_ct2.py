"""CTranslate2 export: translation tokens/s and BLEU of one checkpoint under ctxmt (float32, and int8 through
``--quantize int8``) and exported to CTranslate2 (float32 and int8), translating the synthetic benchmark's test split
as documents.

The checkpoint is ``--checkpoint`` (a sentence-level quickstart checkpoint, or any exportable model trained on the
quickstart's synthetic data: its prepared data is used when it is still there, else the synthetic benchmark is
prepared again as the quickstart does, seed 1, 2000 documents), or else the quickstart's ``concat`` system (s4to4,
context discount 0.01) without segment-shifted positions, which CTranslate2 cannot represent, trained here for a
fixed number of updates (``UPDATES``; ``--quick`` fewer). Each engine translates the whole split with the recipe's
decoding settings and ``--beam`` (default 1: greedy, where the float32 export must give ctxmt's own translations):
the same windows and target-context forcing (:mod:`ctxmt_cli.export.ct2_engine`). Each engine runs in a process of
its own, as under ``ctxmt translate`` (see :func:`measure`), with ``--threads`` threads, on ``--device``. One timed
run = the whole split (tokenization, windows and detokenization included), clocked in that process, after a warm-up
on its first document; the runs are round-robin. tokens/s counts the target subword tokens of each engine's own
output (re-encoded) plus ``</s>`` per sentence.

    ctxmt benchmark ctranslate2 [--checkpoint CKPT] [--quick] [--threads 2] [--repeats 3] [--beam 1] [--device cpu]

Prints the table, ``bleu: FIGURE ENGINE = X.XX`` per engine, ``same-output: FIGURE ENGINE = N/M`` (sentences
translated as ctxmt translates them), ``bleu-change: FIGURE ENGINE-ctxmt-float32 = +X.XX`` and last
``ratio: FIGURE ENGINE/ctxmt-float32 = X.XX`` (tokens/s; above 1 = CTranslate2 faster).
"""

from __future__ import annotations

import multiprocessing
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
try:
    import bench_util as bu
finally:
    sys.path.pop(0)

from ctxmt_cli.errors import CtxmtError  # noqa: E402

UPDATES = {False: 600, True: 200}          # training updates of the model trained here (--quick: fewer)
SYNTHETIC = {"seed": 1, "docs": 2000, "vocab_size": 400}                  # the quickstart's data
ENGINES = ("ctxmt-float32", "ctxmt-int8", "ct2-float32", "ct2-int8")


@dataclass(frozen=True)
class Settings:
    checkpoint: Path | None = None
    quick: bool = False
    threads: int = 2
    repeats: int = 3
    beam: int = 1
    device: str = "cpu"


def prepared_data(root: Path, loaded) -> Path:
    """The prepared synthetic data of the checkpoint (its recipe's data path when it still holds a test split),
    else the quickstart's prepared again under ``root``; refused when the vocabularies differ."""
    from ctxmt_cli.data.pipeline import prepare_synthetic
    from ctxmt_cli.data.store import PreparedData

    own = Path(loaded.recipe.data.path)
    if (own / "meta.json").is_file() and "test" in PreparedData(own).splits:
        data = own
    else:
        data = root / "data"
        prepare_synthetic(data, **SYNTHETIC)
    if PreparedData(data).tokenizer.fingerprint() != loaded.tokenizer.fingerprint():
        raise CtxmtError(f"--checkpoint was trained with another vocabulary than the synthetic benchmark's ({data}); "
                         "give a checkpoint trained on the quickstart's data (ctxmt quickstart)")
    return data


def train_concat(root: Path, quick: bool, threads: int, device: str) -> Path:
    """The quickstart's concat system without shifted positions, trained for ``UPDATES`` updates; its checkpoint."""
    from ctxmt_cli.cli.quickstart import system_recipe
    from ctxmt_cli.config import recipe_to_dict, validate_recipe
    from ctxmt_cli.data.pipeline import prepare_synthetic
    from ctxmt_cli.train.trainer import train

    prepare_synthetic(root / "data", **SYNTHETIC)
    raw = recipe_to_dict(system_recipe("concat", root, seed=1, updates=UPDATES[quick]))
    raw["model"]["shift"] = None
    raw["train"].update(valid_every=UPDATES[quick], log_every=UPDATES[quick] // 4, threads=threads)
    result = train(validate_recipe(raw, "benchmark ctranslate2"), device=device, log_format="plain")
    return Path(result.averaged or result.best)


def output_tokens(tokenizer, documents: list[list[str]]) -> int:
    """Target subword tokens of the translations, plus ``</s>`` per sentence."""
    return sum(len(tokenizer.encode_tgt(s)) + 1 for doc in documents for s in doc)


#: the engine a worker process holds (:func:`start_engine`)
_WORKER: dict = {}


def start_engine(name: str, checkpoint: Path, folder: Path | None, threads: int, device: str) -> None:
    """Worker initializer: load engine ``name`` (ctxmt on ``checkpoint``, or CTranslate2 on the exported ``folder``)
    with ``threads`` threads."""
    import torch

    from ctxmt_cli import api
    from ctxmt_cli.export.ct2_engine import load_exported

    torch.set_num_threads(threads)
    if folder is None:                                                  # ctxmt, in float32 or through --quantize int8
        quantize = "int8" if name == "ctxmt-int8" else None
        _WORKER["model"] = api.load(checkpoint, device=device, quantize=quantize)
        return
    model = api.Model(load_exported(folder, device, threads=threads), folder)
    model.engine = model.loaded.model
    _WORKER["model"] = model


def translate_timed(documents: list[list[str]], beam: int) -> tuple[float, list[list[str]]]:
    """Worker task: seconds to translate ``documents`` (clocked in the worker) and the translations."""
    start = time.perf_counter()
    found = _WORKER["model"].translate(documents, beam=beam)
    return time.perf_counter() - start, [d.translations for d in found]


def measure(checkpoint: Path, root: Path, sources: list[list[str]], settings: Settings) -> tuple[dict, dict]:
    """Export twice, then time each engine in a process of its own, round-robin after a warm-up: seconds per timed
    run of each engine, and its translations.

    A process per engine, as each runs under ``ctxmt translate``: two OpenMP runtimes in one process (torch's and
    CTranslate2's) slowed CTranslate2 on 2 threads 4x here once torch's thread team existed.
    """
    from concurrent.futures import ProcessPoolExecutor

    from ctxmt_cli.benchmarks import export_ct2 as worker  # importable by name in a spawned process
    from ctxmt_cli.export.ct2_export import export_ctranslate2

    engines = ENGINES if settings.device == "cpu" else tuple(n for n in ENGINES if n != "ctxmt-int8")   # CPU only
    folders = {name: None if name.startswith("ctxmt") else root / name for name in engines}
    for name, folder in folders.items():
        if folder is not None:
            export_ctranslate2(checkpoint, folder, quantization=name.removeprefix("ct2-"))
    context = multiprocessing.get_context("spawn")
    pools = {name: ProcessPoolExecutor(1, context, worker.start_engine,
                                       (name, checkpoint, folder, settings.threads, settings.device))
             for name, folder in folders.items()}
    seconds: dict[str, list[float]] = {name: [] for name in pools}
    outputs: dict[str, list[list[str]]] = {}
    try:
        for pool in pools.values():                                     # warm-up: its first document
            pool.submit(worker.translate_timed, sources[:1], settings.beam).result()
        for _ in range(settings.repeats if not settings.quick else 1):
            for name, pool in pools.items():
                took, outputs[name] = pool.submit(worker.translate_timed, sources, settings.beam).result()
                seconds[name].append(took)
    finally:
        for pool in pools.values():
            pool.shutdown()
    return seconds, outputs


def _flat(documents: list[list[str]]) -> list[str]:
    """The sentences of every document, in order."""
    return [s for d in documents for s in d]


def bleu_scores(outputs: dict, references: list[list[str]]) -> dict[str, float]:
    """Corpus BLEU of each engine's translations (sacrebleu's "forgot to detokenize?" hint silenced: the synthetic
    languages write "word ." by design, as the quickstart says)."""
    import logging

    from ctxmt_cli.evaluate.bleu import corpus_scores

    sacre_log = logging.getLogger("sacrebleu")
    level = sacre_log.level
    sacre_log.setLevel(logging.ERROR)
    try:
        return {name: corpus_scores(_flat(docs), _flat(references))[0].score for name, docs in outputs.items()}
    finally:
        sacre_log.setLevel(level)


def report_lines(figure: str, rates: dict, bleu: dict, same: dict, sentences: int) -> list[str]:
    """BLEU, same-output and ratio lines (the ratio lines last)."""
    base = statistics.median(rates["ctxmt-float32"])
    others = [name for name in ENGINES[1:] if name in rates]
    lines = [f"bleu: {figure} {name} = {score:.2f}" for name, score in bleu.items()]
    lines += [f"same-output: {figure} {name} = {same[name]}/{sentences} sentences" for name in others]
    lines += [f"bleu-change: {figure} {name}-ctxmt-float32 = {bleu[name] - bleu['ctxmt-float32']:+.2f}"
              for name in others]
    return lines + [f"ratio: {figure} {name}/ctxmt-float32 = {statistics.median(rates[name]) / base:.2f}"
                    for name in others]


def run(settings: Settings) -> dict:
    """Train or load, export, translate the test split with each engine; print the report; tokens/s per engine."""
    from ctxmt_cli.data.store import PreparedData
    from ctxmt_cli.evaluate.translation import split_documents
    from ctxmt_cli.export.ct2_export import require_ctranslate2
    from ctxmt_cli.models.loading import load_model

    require_ctranslate2("benchmark ctranslate2")
    with tempfile.TemporaryDirectory(prefix="ctxmt-bench-ct2-") as tmp, bu.torch_threads(settings.threads):
        root = Path(tmp)
        checkpoint = settings.checkpoint or train_concat(root, settings.quick, settings.threads, settings.device)
        loaded = load_model(checkpoint)
        sources, references = split_documents(PreparedData(prepared_data(root, loaded)), "test")
        seconds, outputs = measure(checkpoint, root, sources, settings)
    tok = loaded.tokenizer
    rates = {name: [output_tokens(tok, outputs[name]) / s for s in seconds[name]] for name in seconds}
    bleu = bleu_scores(outputs, references)
    ours = _flat(outputs["ctxmt-float32"])
    same = {name: sum(a == b for a, b in zip(ours, _flat(outputs[name]), strict=True)) for name in outputs}
    figure = f"translate-{loaded.recipe.model.family}-beam{settings.beam}"
    print(f"ctranslate2: {checkpoint.name} ({loaded.recipe.model.family}, d_model {loaded.recipe.model.d_model}), "
          f"synthetic test split: {len(sources)} documents, {len(ours)} sentences; beam {settings.beam}; "
          f"{settings.threads} threads each on {settings.device}; {len(seconds['ctxmt-float32'])} timed runs each, "
          "round-robin")
    table = bu.new_table("document translation: output tokens/s, ctxmt vs its CTranslate2 export", "tok/s")
    bu.add_rows(table, figure, rates)
    bu.print_report(table, report_lines(figure, rates, bleu, same, len(ours)))
    return rates
