"""``ctxmt quickstart``: the synthetic benchmark end to end on a laptop CPU.

Generates the synthetic discourse benchmark, trains the context-aware
concatenation model of ``recipes/quickstart.yaml`` (s4to4 + context discount +
segment-shifted positions) and a sentence-level baseline of the same size,
prints BLEU and contrastive accuracy per phenomenon and distance side by side,
translates a sample document, and writes everything to ``OUT/results.json``.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from pathlib import Path
from typing import Optional

import yaml

from ctxmt_cli.config import Recipe, validate_recipe
from ctxmt_cli.errors import CtxmtError

#: The embedded default; ``recipes/quickstart.yaml`` holds the same recipe (a test keeps them equal).
QUICKSTART_YAML = """\
# Quickstart: s4to4 concatenation + context discount (CD = 0.01, seed 001) + segment-shifted
# positions (shift: auto = mean sentence length) on the synthetic discourse benchmark,
# sized to train on 2 CPU cores in a few minutes.
name: quickstart_s4to4_shift_cd
data:
  path: quickstart/data
  max_tokens: 6000
model:
  family: concat
  preset: null
  d_model: 128
  ffn_dim: 256
  heads: 4
  encoder_layers: 2
  decoder_layers: 2
  dropout: 0.1
  src_context_sentences: 3
  tgt_context_sentences: 3
  cd: 0.01
  shift: auto
train:
  save_dir: quickstart/concat
  lr: 0.002
  warmup_steps: 300
  label_smoothing: 0.1
  max_steps: 4000
  max_minutes: 5.5
  valid_every: 250
  patience: 0
  early_stop_on: current_loss
  average_checkpoints: 0
  log_every: 25
decode:
  beam: 4
  lenpen: 0.6
  batch_sentences: 128
"""

#: What the sentence-level baseline changes (same dims, no context, its own budget).
BASELINE_CHANGES = {"family": "sentence"}
BASELINE_MINUTES = 3.0


def quickstart_recipes(out: Path, minutes: Optional[float] = None) -> dict[str, Recipe]:
    """The two quickstart systems, with paths under ``out``."""
    raw = yaml.safe_load(QUICKSTART_YAML)
    raw["data"]["path"] = str(out / "data")
    concat = dict(raw, train=dict(raw["train"], save_dir=str(out / "concat")))
    model = {k: v for k, v in raw["model"].items() if k in {"preset", "d_model", "ffn_dim", "heads",
                                                             "encoder_layers", "decoder_layers", "dropout"}}
    sentence = dict(raw, name="quickstart_sentence", model={**model, **BASELINE_CHANGES},
                    train=dict(raw["train"], save_dir=str(out / "sentence"), max_minutes=BASELINE_MINUTES,
                               early_stop_on="window_loss"))
    if minutes is not None:
        concat["train"]["max_minutes"] = sentence["train"]["max_minutes"] = minutes
    return {"concat": validate_recipe(concat, "quickstart(concat)"), "sentence": validate_recipe(sentence, "quickstart(sentence)")}


def _prepare(out: Path, docs: int, seed: int, console) -> Path:
    from ctxmt_cli.data.pipeline import prepare_synthetic

    data = out / "data"
    console.rule("[bold]1/4 synthetic benchmark")
    meta = prepare_synthetic(data, seed=seed, docs=docs, force=True, vocab_size=400)
    console.print(f"prepared {data}: " + ", ".join(f"{k} {v['sentences']} sentences" for k, v in meta["splits"].items()))
    return data


def _evaluate(name: str, checkpoint: Path, data: Path, items, console) -> dict:
    from ctxmt_cli.commands import contrastive_accuracy
    from ctxmt_cli.data.store import PreparedData
    from ctxmt_cli.evaluate.bleu import corpus_scores
    from ctxmt_cli.evaluate.translation import translate_split
    from ctxmt_cli.train.checkpoint import load_model

    loaded = load_model(checkpoint)
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
    return {"context_aware": bool(loaded.model.context_aware), "checkpoint": str(checkpoint),
            "bleu": bleu.score, "bleu_signature": bleu.signature, "contrastive": table, "_loaded": loaded}


def _show(results: dict, console) -> None:
    from rich.table import Table

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
    console.print(table)


def _sample(results: dict, data: Path, console) -> dict:
    from ctxmt_cli.data.store import PreparedData
    from ctxmt_cli.decode.translator import translate_documents
    from ctxmt_cli.evaluate.translation import split_documents

    sources, references = split_documents(PreparedData(data), "test")
    doc, ref = sources[0], references[0]
    sample = {"source": doc, "reference": ref}
    for name, res in results.items():
        loaded = res["_loaded"]
        cfg = loaded.recipe.model
        sample[name] = translate_documents(loaded.model, loaded.tokenizer, [doc], src_context=cfg.src_context,
                                           tgt_context=cfg.tgt_context, beam=loaded.recipe.decode.beam)[0]
    console.rule("[bold]sample document (test split, document 1)")
    for i, line in enumerate(doc):
        console.print(f"[dim]{i + 1:>2} src[/dim] {line}\n   [dim]ref[/dim] {ref[i]}")
        for name in results:
            mark = "" if sample[name][i] == ref[i] else " [red]✗[/red]"
            console.print(f"   [dim]{name}[/dim] {sample[name][i]}{mark}")
    return sample


def run_quickstart(out: Path, docs: int = 2000, minutes: Optional[float] = None, seed: int = 1, force: bool = False) -> dict:
    """Run the whole quickstart; returns (and writes) the results dictionary."""
    from rich.console import Console

    from ctxmt_cli.commands import synthetic_items
    from ctxmt_cli.train.trainer import train

    out = Path(out)
    if out.exists() and any(out.iterdir()) and not force:
        raise CtxmtError(f"{out} already exists; pass --force to overwrite it or choose another --out")
    if out.exists() and force:
        shutil.rmtree(out)
    console, start = Console(), time.time()
    data = _prepare(out, docs, seed, console)
    items = synthetic_items(data)
    checkpoints = {}
    for step, (name, recipe) in enumerate(quickstart_recipes(out, minutes).items(), start=2):
        console.rule(f"[bold]{step}/4 training {name} ({recipe.model.family})")
        result = train(recipe)
        checkpoints[name] = result.averaged or result.best
    console.rule("[bold]4/4 evaluation")
    results = {name: _evaluate(name, ckpt, data, items, console) for name, ckpt in checkpoints.items()}
    _show(results, console)
    sample = _sample(results, data, console)
    payload = {
        "seconds": time.time() - start, "data": str(data),
        "models": {n: {k: v for k, v in r.items() if not k.startswith("_")} for n, r in results.items()},
        "sample": sample,
    }
    (out / "results.json").write_text(json.dumps(payload, indent=2, ensure_ascii=False))
    console.print(f"done in {payload['seconds']:.0f} s; results in {out / 'results.json'}")
    return payload
