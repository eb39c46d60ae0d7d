"""CTranslate2 export: translation tokens/s and BLEU of one checkpoint under ctxmt (float32) and exported to
CTranslate2 (float32 and int8), translating the synthetic benchmark's test split as documents.

The checkpoint is ``--checkpoint`` (a sentence-level quickstart checkpoint, or any exportable model trained on the
quickstart's synthetic data: its prepared data is used when it is still there, else the synthetic benchmark is
prepared again as the quickstart does, seed 1, 2000 documents), or else the quickstart's ``concat`` system (s4to4,
context discount 0.01) without segment-shifted positions, which CTranslate2 cannot represent, trained here for a
fixed number of updates (``UPDATES``; ``--quick`` fewer). Each engine translates the whole split with the recipe's
decoding settings and ``--beam`` (default 1: greedy, where the float32 export must give ctxmt's own translations):
the same windows and target-context forcing (:mod:`ctxmt_cli.export.ct2_engine`). One timed run = the whole split
(tokenization, windows and detokenization included), after a warm-up on its first document; the runs are
round-robin. tokens/s counts the target subword tokens of each engine's own output (re-encoded) plus ``</s>`` per
sentence. torch and CTranslate2 run ``--threads`` threads each; ``--device`` runs both there.

    ctxmt benchmark ctranslate2 [--checkpoint CKPT] [--quick] [--threads 2] [--repeats 3] [--beam 1] [--device cpu]

Prints the table, ``bleu: FIGURE ENGINE = X.XX`` per engine, ``same-output: FIGURE ENGINE = N/M`` (sentences
translated as ctxmt translates them), then ``ratio: FIGURE ENGINE/ctxmt-float32 = X.XX`` (tokens/s; above 1 =
CTranslate2 faster) and ``bleu-change: FIGURE ENGINE-ctxmt-float32 = +X.XX`` lines.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
try:
    import bench_util as bu
finally:
    sys.path.pop(0)

from ctxmt_cli.errors import CtxmtError  # noqa: E402

UPDATES = {False: 600, True: 200}          # training updates of the model trained here (--quick: fewer)
SYNTHETIC = {"seed": 1, "docs": 2000, "vocab_size": 400}                  # the quickstart's data
ENGINES = ("ctxmt-float32", "ct2-float32", "ct2-int8")


@dataclass(frozen=True)
class Settings:
    checkpoint: Optional[Path] = None
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
    from ctxmt_cli.config import recipe_to_dict, validate_recipe
    from ctxmt_cli.data.pipeline import prepare_synthetic
    from ctxmt_cli.quickstart import system_recipe
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


def engines(checkpoint: Path, root: Path, threads: int, device: str) -> dict:
    """The three engines, loaded: ctxmt (torch, float32) and the checkpoint exported to CTranslate2 twice."""
    from ctxmt_cli import api
    from ctxmt_cli.export.ct2_engine import load_exported
    from ctxmt_cli.export.ct2_export import export_ctranslate2

    models = {"ctxmt-float32": api.load(checkpoint, device=device)}
    for quantization in ("float32", "int8"):
        folder = root / f"ct2-{quantization}"
        export_ctranslate2(checkpoint, folder, quantization=quantization)
        model = api.Model(load_exported(folder, device, threads=threads), folder)
        model.engine = model.loaded.model
        models[f"ct2-{quantization}"] = model
    return models


def measure(models: dict, sources: list[list[str]], settings: Settings) -> tuple[dict, dict]:
    """Seconds per timed run of each engine and each engine's translations."""
    outputs = {}

    def run(name: str, docs: list[list[str]]):
        return lambda: outputs.__setitem__(name, [d.translations for d in models[name].translate(docs,
                                                                                                  beam=settings.beam)])

    runs = {name: run(name, sources) for name in models}
    warmups = {name: run(name, sources[:1]) for name in models}
    seconds = bu.time_round_robin(runs, settings.repeats if not settings.quick else 1, warmups)
    return seconds, outputs


def bleu_scores(outputs: dict, references: list[list[str]]) -> dict[str, float]:
    """Corpus BLEU of each engine's translations (sacrebleu's "forgot to detokenize?" hint silenced: the synthetic
    languages write "word ." by design, as the quickstart says)."""
    import logging

    from ctxmt_cli.evaluate.bleu import corpus_scores

    flat = lambda docs: [s for d in docs for s in d]  # noqa: E731
    sacre_log = logging.getLogger("sacrebleu")
    level = sacre_log.level
    sacre_log.setLevel(logging.ERROR)
    try:
        return {name: corpus_scores(flat(docs), flat(references))[0].score for name, docs in outputs.items()}
    finally:
        sacre_log.setLevel(level)


def report_lines(figure: str, rates: dict, bleu: dict, same: dict, sentences: int) -> list[str]:
    """BLEU, same-output and ratio lines (the ratio lines last)."""
    base = statistics.median(rates["ctxmt-float32"])
    lines = [f"bleu: {figure} {name} = {score:.2f}" for name, score in bleu.items()]
    lines += [f"same-output: {figure} {name} = {same[name]}/{sentences} sentences" for name in ENGINES[1:]]
    lines += [f"bleu-change: {figure} {name}-ctxmt-float32 = {bleu[name] - bleu['ctxmt-float32']:+.2f}"
              for name in ENGINES[1:]]
    return lines + [f"ratio: {figure} {name}/ctxmt-float32 = {statistics.median(rates[name]) / base:.2f}"
                    for name in ENGINES[1:]]


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
        models = engines(checkpoint, root, settings.threads, settings.device)
        seconds, outputs = measure(models, sources, settings)
    tok, flat = loaded.tokenizer, lambda docs: [s for d in docs for s in d]  # noqa: E731
    rates = {name: [output_tokens(tok, outputs[name]) / s for s in seconds[name]] for name in models}
    bleu = bleu_scores(outputs, references)
    ours = flat(outputs["ctxmt-float32"])
    same = {name: sum(a == b for a, b in zip(ours, flat(outputs[name]))) for name in models}
    figure = f"translate-{loaded.recipe.model.family}-beam{settings.beam}"
    print(f"ctranslate2: {checkpoint.name} ({loaded.recipe.model.family}, d_model {loaded.recipe.model.d_model}), "
          f"synthetic test split: {len(sources)} documents, {len(ours)} sentences; beam {settings.beam}; "
          f"{settings.threads} threads each on {settings.device}; {len(seconds['ctxmt-float32'])} timed runs each, "
          "round-robin")
    table = bu.new_table("document translation: output tokens/s, ctxmt vs its CTranslate2 export", "tok/s")
    bu.add_rows(table, figure, rates)
    bu.print_report(table, report_lines(figure, rates, bleu, same, len(ours)))
    return rates
