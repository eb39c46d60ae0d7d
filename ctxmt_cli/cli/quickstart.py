"""``ctxmt quickstart``: the synthetic benchmark end to end on a laptop CPU.

Generates the synthetic discourse benchmark, trains each chosen system of the packaged
recipe ``quickstart/<system>`` (``recipes/quickstart/<system>.yaml``; default: the
context-aware concatenation model ``concat`` and the sentence-level baseline ``sentence``) for the
fixed number of updates its recipe gives, prints BLEU and contrastive accuracy per
phenomenon and distance side by side, translates a sample document, and writes
everything to ``OUT/results.json``.

The budget is a number of updates, never wall time, and each recipe pins its
thread count: the same seed gives the same figures on a fast or a busy machine.
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

import typer

from ctxmt_cli.cli.completion import complete_systems
from ctxmt_cli.cli.errors import user_errors
from ctxmt_cli.cli.options import (
    SEED,
    SYNTHETIC_DOCS,
    UPDATES,
    Device,
    LogFormat,
)
from ctxmt_cli.config import Recipe, load_recipe, recipe_to_dict, validate_recipe
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.outputs import write_json
from ctxmt_cli.ownership import record
from ctxmt_cli.paths import check_output_dir
from ctxmt_cli.recipe_catalog import RECIPES_DIR
from ctxmt_cli.replacing import check_new_or_replaceable, rebuilding

#: One recipe per system the quickstart can run, packaged with ctxmt (``ctxmt recipes list quickstart``).
RECIPE_DIR = RECIPES_DIR / "quickstart"
DEFAULT_SYSTEMS = ("concat", "sentence")


def available_systems() -> list[str]:
    """Names of the systems with a quickstart recipe."""
    return sorted(p.stem for p in RECIPE_DIR.glob("*.yaml")) if RECIPE_DIR.is_dir() else []


def parse_systems(text: str | None) -> list[str]:
    """``--systems a,b`` -> ``["a", "b"]``: known names, each once, in the order given."""
    if text is None:
        return list(DEFAULT_SYSTEMS)
    names = [n.strip() for n in text.split(",") if n.strip()]
    known = available_systems()
    if not names:
        raise CtxmtError(f"--systems is empty; give one or more of: {', '.join(known)}")
    for name in names:
        if name not in known:
            raise CtxmtError(f"--systems: unknown system {name!r}; available: {', '.join(known)} "
                             f"(one recipe each in {RECIPE_DIR})")
        if names.count(name) > 1:
            raise CtxmtError(f"--systems names {name!r} twice; give each system once")
    return names


def system_recipe(name: str, out: Path, seed: int = 1, updates: int | None = None) -> Recipe:
    """The recipe of quickstart system ``name`` with its data and checkpoints under ``out``.

    ``seed`` becomes ``train.seed``; ``updates`` replaces the recipe's update budget (``train.max_steps``).
    """
    path = RECIPE_DIR / f"{name}.yaml"
    if not path.is_file():
        raise CtxmtError(f"quickstart system {name!r}: no recipe at {path}; available: "
                         f"{', '.join(available_systems())}")
    source, raw = str(path), recipe_to_dict(load_recipe(path))
    if raw["train"].get("max_minutes") is not None:
        raise CtxmtError(f"{source}: train.max_minutes is set; a quickstart system trains a fixed number of "
                         "updates (train.max_steps) so its figures do not depend on the machine's speed: remove it")
    raw["data"]["path"] = str(out / "data")
    raw["train"].update(save_dir=str(out / name), seed=seed)
    if updates is not None:
        raw["train"]["max_steps"] = updates
    return validate_recipe(raw, source)


def _prepare(out: Path, docs: int, seed: int, console, stages: int) -> Path:
    from ctxmt_cli.data.pipeline import prepare_synthetic

    data = out / "data"
    console.rule(f"[bold]1/{stages} synthetic benchmark")
    meta = prepare_synthetic(data, seed=seed, docs=docs, force=True, vocab_size=400)
    record(out, [data])                              # a part done: --force may replace it even if a later one fails
    splits = ", ".join(f"{k} {v['sentences']} sentences" for k, v in meta["splits"].items())
    console.print(f"prepared {data}: {splits}")
    return data


def _evaluate(name: str, checkpoint: Path, data: Path, items, console, device: str = "auto") -> dict:
    import torch

    from ctxmt_cli.cli.commands import contrastive_accuracy
    from ctxmt_cli.data.store import PreparedData
    from ctxmt_cli.evaluate.bleu import corpus_scores
    from ctxmt_cli.evaluate.translation import translate_split
    from ctxmt_cli.models.loading import load_model

    loaded, start = load_model(checkpoint, device=device), time.time()
    if loaded.recipe.train.threads:             # the thread count it trained with: the same figures every run
        torch.set_num_threads(loaded.recipe.train.threads)
    with console.status(f"{name}: translating the test split and scoring contrastive sets"):
        hyps, refs = translate_split(loaded, PreparedData(data), "test")
        # the synthetic languages write "word ." by design: sacrebleu's "forgot to detokenize?" hint is noise here
        sacre_log = logging.getLogger("sacrebleu")
        level = sacre_log.level
        sacre_log.setLevel(logging.ERROR)
        try:
            bleu = corpus_scores(hyps, refs)[0]
        finally:
            sacre_log.setLevel(level)
        table = contrastive_accuracy(loaded.model, loaded.tokenizer, items)
    return {"context_aware": bool(loaded.model.context_aware), "checkpoint": str(checkpoint), "bleu": bleu.score,
            "bleu_signature": bleu.signature, "contrastive": table, "eval_seconds": time.time() - start,
            "_loaded": loaded}


def _show(results: dict, console) -> None:
    from rich.table import Table

    from ctxmt_cli.tables import print_table

    names = list(results)
    table = Table(title="synthetic benchmark: BLEU and contrastive accuracy (%)")
    table.add_column("metric")
    for name in names:
        table.add_column(name, justify="right")
    table.add_row("BLEU (test)", *(f"{results[n]['bleu']:.1f}" for n in names))
    for phenomenon, row in results[names[0]]["contrastive"].items():
        for distance in row:
            cells = (f"{100 * results[n]['contrastive'][phenomenon][distance]:.1f}" for n in names)
            table.add_row(f"{phenomenon} d={distance}", *cells)
    print_table(table, console)


def _sample(results: dict, data: Path, console) -> dict:
    from ctxmt_cli.data.store import PreparedData
    from ctxmt_cli.decode.settings import DecodeSettings
    from ctxmt_cli.decode.translator import translate_documents
    from ctxmt_cli.evaluate.translation import split_documents

    sources, references = split_documents(PreparedData(data), "test")
    doc, ref = sources[0], references[0]
    sample = {"source": doc, "reference": ref}
    for name, res in results.items():
        loaded = res["_loaded"]
        settings = DecodeSettings.from_recipe(loaded.recipe)
        sample[name] = translate_documents(loaded.model, loaded.tokenizer, [doc], settings)[0]
    console.rule("[bold]sample document (test split, document 1)")
    for i, line in enumerate(doc):
        console.print(f"[dim]{i + 1:>2} src[/dim] {line}\n   [dim]ref[/dim] {ref[i]}")
        for name in results:
            mark = "" if sample[name][i] == ref[i] else " [red]✗[/red]"
            console.print(f"   [dim]{name}[/dim] {sample[name][i]}{mark}")
    return sample


def run_quickstart(out: Path, docs: int = 2000, seed: int = 1, force: bool = False,
                   systems: str | None = None, updates: int | None = None, device: str = "auto",
                   log_format: str | None = None) -> dict:
    """Run the whole quickstart for ``systems`` (``"a,b"``; default concat,sentence); returns (and writes) the results.

    ``seed`` seeds the synthetic data and every system's training; ``updates`` overrides each recipe's budget;
    ``device``: where the systems train and translate (auto: CUDA when present). ``log_format`` (None: rich on a
    terminal, else plain) applies to every training run; with json, stdout carries JSON lines only (the runs'
    and a closing ``result``) and the stage headers and tables go to stderr. An existing ``out`` is replaced
    (``force``) only when it is a quickstart folder holding nothing but what ctxmt wrote; a failure keeps it.
    """
    from ctxmt_cli.device import resolve_device
    from ctxmt_cli.logs import resolve_log_format

    out, log_format, device = Path(out), resolve_log_format(log_format, sys.stdout), str(resolve_device(device))
    if updates is not None and updates < 1:
        raise CtxmtError(f"--updates {updates}: the update budget must be at least 1")
    names = parse_systems(systems)
    recipes = {name: system_recipe(name, out, seed, updates) for name in names}   # every recipe checked first
    check_new_or_replaceable(out, "--out", force, kind="a quickstart folder", command="quickstart")
    with rebuilding(out, "quickstart"):
        payload = _run(out, names, recipes, docs, seed, device, log_format)
    return payload


def _run(out: Path, names: list, recipes: dict, docs: int, seed: int, device: str, log_format: str) -> dict:
    """Every stage of :func:`run_quickstart` inside ``out``; the payload of ``results.json``."""
    from rich.console import Console

    from ctxmt_cli.cli.commands import synthetic_items
    from ctxmt_cli.logs import json_line

    console, start, stages = Console(stderr=log_format == "json"), time.time(), len(recipes) + 2
    data = _prepare(out, docs, seed, console, stages)
    items = synthetic_items(data)
    trained = {name: _train(name, recipe, console, f"{k}/{stages}", device, log_format)
               for k, (name, recipe) in enumerate(recipes.items(), start=2)}
    console.rule(f"[bold]{stages}/{stages} evaluation")
    results = {name: {**run, **_evaluate(name, Path(run["checkpoint"]), data, items, console, device)}
               for name, run in trained.items()}
    _show(results, console)
    sample = _sample(results, data, console)
    payload = {
        "seconds": time.time() - start, "data": str(data), "docs": docs, "seed": seed, "systems": names,
        "models": {n: {k: v for k, v in r.items() if not k.startswith("_")} for n, r in results.items()},
        "sample": sample,
    }
    write_json(out / "results.json", payload)
    console.print(f"done in {payload['seconds']:.0f} s; results in {out / 'results.json'}")
    if log_format == "json":
        bleu = {n: r["bleu"] for n, r in payload["models"].items()}
        print(json_line({"kind": "result", "results": str(out / "results.json"),
                         "seconds": round(payload["seconds"], 3), "bleu": bleu}), flush=True)
    return payload


def _train(name: str, recipe: Recipe, console, stage: str, device: str = "auto", log_format: str | None = None) -> dict:
    """Train one system (on ``device``, progress in ``log_format``); what results.json records about the run."""
    import torch

    from ctxmt_cli.train.trainer import train

    console.rule(f"[bold]{stage} training {name} ({recipe.model.family}, {recipe.train.max_steps} updates)")
    result = train(recipe, device=device, log_format=log_format)
    save_dir = Path(recipe.train.save_dir)
    record(save_dir.parent, [save_dir])
    return {"family": recipe.model.family, "updates": result.history[-1]["step"], "seconds": result.seconds,
            "threads": torch.get_num_threads(), "checkpoint": str(result.averaged or result.best)}


@user_errors
def quickstart_command(
    out: Path = typer.Option(Path("quickstart"), "--out", "-o", help="output directory"),
    docs: int = typer.Option(2000, **SYNTHETIC_DOCS, help="synthetic documents"),
    systems: str | None = typer.Option(
        None, autocompletion=complete_systems, help="comma-separated systems, one packaged recipe each "
        "(`ctxmt recipes list quickstart`; default: concat,sentence)"),
    updates: int | None = typer.Option(None, **UPDATES,
                                       help="updates per system (default: each recipe's train.max_steps)"),
    seed: int = typer.Option(1, **SEED, help="seed of the synthetic data and of every system's training"),
    force: bool = typer.Option(False, help="reuse/overwrite an existing output directory"),
    device: Device = "auto",
    log_format: LogFormat = None,
):
    """Synthetic benchmark end to end: prepare, train each system a fixed number of updates, compare, translate.

    With --log-format json, stdout carries JSON lines only (the training runs' and a closing result); the tables
    go to stderr."""

    check_output_dir(out, "--out")
    run_quickstart(out, docs=docs, seed=seed, force=force, systems=systems, updates=updates, device=device,
                   log_format=log_format)


def register(app: typer.Typer) -> None:
    """Add ``quickstart`` to the app."""
    app.command(name="quickstart")(quickstart_command)
