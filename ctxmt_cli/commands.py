"""Bodies of the CLI commands that glue loading, decoding and evaluation together.

Kept out of ``cli.py`` so the Typer layer stays a thin parser, and importable
from tests and from the quickstart without going through Typer.
"""

from __future__ import annotations

import json
from pathlib import Path

from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.paths import check_output_file


def dry_run_report(recipe) -> str:
    """The resolved recipe and the model's parameter count; needs no prepared data."""
    from ctxmt_cli.config import dump_recipe
    from ctxmt_cli.core.model import VocabInfo
    from ctxmt_cli.models import build_model, resolve_model_config

    meta_path = Path(recipe.data.path) / "meta.json"
    if meta_path.is_file():
        meta = json.loads(meta_path.read_text())
        vocab = VocabInfo(meta["vocab_size"]["src"], meta["vocab_size"]["tgt"], joint=meta.get("joint", True))
        where = f"vocabulary of {meta_path.parent}"
    else:  # no data yet: count with a nominal vocabulary and say so
        meta = {"mean_sentence_length": {"src": 20.0, "tgt": 20.0}}
        vocab = VocabInfo(8000, 8000)
        where = f"nominal joint vocabulary of 8000; {meta_path.parent} not prepared yet"
    model_cfg = resolve_model_config(recipe.model, meta)
    model = build_model(model_cfg, vocab)
    resolved = recipe.model_copy(update={"model": model_cfg})
    return f"{dump_recipe(resolved)}\n# family: {model_cfg.family}\n# parameters: {model.num_parameters():,} ({where})"


def train_result_lines(result, log_format=None) -> str:
    """The closing report of ``ctxmt train``: the best (and averaged) checkpoint; one JSON object with
    ``--log-format json``, so that stdout stays JSON lines."""
    if log_format == "json":
        from ctxmt_cli.logs import json_line

        return json_line({"kind": "result", "best": str(result.best), "last": str(result.last),
                          "averaged": None if result.averaged is None else str(result.averaged),
                          "seconds": round(result.seconds, 3)})
    return f"best checkpoint: {result.best}" + (f"\naveraged: {result.averaged}" if result.averaged else "")



def translate_file(input: str, output: str, checkpoint: Path, *, beam=None, lenpen=None, target_context=None,
                   batch_docs=None, device: str = "cpu", context=None, repair=None, group_sentences=None,
                   group_order: str = "consecutive", first_pass=None) -> int:
    """Translate a document file with a checkpoint; returns the number of sentences.

    ``context`` K: decode with K context sentences per side instead of the model's own, K next sentences too
    for a model that reads them (see :func:`~ctxmt_cli.models.context_sentences` and
    :func:`~ctxmt_cli.models.next_sentences`). ``repair``: a DocRepair checkpoint that rewrites
    the translations in groups (:mod:`ctxmt_cli.decode.repair`). ``group_sentences`` / ``group_order``: how a
    model that reads its sentence group (mbe) groups a document (:mod:`ctxmt_cli.decode.groups`). ``first_pass``:
    the checkpoint whose translations a bilingual hanoit model reads as target context (:func:`_first_pass`).
    """
    from ctxmt_cli.decode.documents import read_documents, write_documents
    from ctxmt_cli.decode.translator import translate_documents
    from ctxmt_cli.models import context_sentences, next_sentences
    from ctxmt_cli.models.loading import load_model, torch_device

    if target_context not in (None, "prefix", "generate"):
        raise CtxmtError(f"--target-context {target_context!r}: choose prefix or generate")
    if group_order not in ("consecutive", "length"):
        raise CtxmtError(f"--group-order {group_order!r}: choose consecutive or length")
    if output != "-":                  # before any work: a bad -o must not cost a whole translation
        check_output_file(Path(output), "--output", inputs=(checkpoint,) + (() if input == "-" else (input,))
                          + (() if repair is None else (repair,)) + (() if first_pass is None else (first_pass,)))
    documents = read_documents(input)  # read first: a bad input must not cost a model load
    loaded = load_model(checkpoint, device=torch_device(device))
    repairer = None if repair is None else _repair_model(loaded, checkpoint, Path(repair), device)
    targets = _first_pass(loaded, checkpoint, first_pass, documents, device, batch_docs)
    dec = loaded.recipe.decode
    src_context, tgt_context = context_sentences(loaded.recipe.model, context)
    outputs = translate_documents(
        loaded.model, loaded.tokenizer, documents, src_context_sentences=src_context, tgt_context_sentences=tgt_context,
        beam=beam or dec.beam, lenpen=dec.lenpen if lenpen is None else lenpen, max_len_a=dec.max_len_a,
        max_len_b=dec.max_len_b, target_context=target_context or dec.target_context,
        batch_docs=batch_docs or dec.batch_docs, max_window_tokens=loaded.recipe.data.max_window_tokens,
        group_sentences=group_sentences, group_order=group_order,
        src_next_sentences=next_sentences(loaded.recipe.model, context), first_pass=targets,
    )
    if repairer is not None:
        outputs = _repair(repairer, outputs)
    write_documents(outputs, output)
    return sum(len(doc) for doc in documents)


def _first_pass(loaded, checkpoint: Path, first_pass, documents, device: str, batch_docs):
    """The first pass a bilingual model reads (``documents`` translated by the ``first_pass`` checkpoint with its
    own recipe's settings), or None; a bilingual model without one and ``first_pass`` for another model are refused
    before any translation."""
    from ctxmt_cli.decode.bilingual import check_first_pass, check_first_pass_model, first_pass_translations
    from ctxmt_cli.models.loading import load_model, torch_device

    check_first_pass(loaded.model, documents, None if first_pass is None else documents)
    if first_pass is None:
        return None
    first = load_model(Path(first_pass), device=torch_device(device))
    check_first_pass_model(first, loaded, first_pass, checkpoint)
    return first_pass_translations(first, documents, batch_docs=batch_docs)


def _repair_model(first, checkpoint: Path, repair: Path, device: str):
    """Load and check a DocRepair checkpoint before any translation; returns (model, group size)."""
    from ctxmt_cli.decode.repair import check_repair_pair, repair_group_size
    from ctxmt_cli.models.loading import load_model, torch_device

    loaded = load_model(repair, device=torch_device(device))
    size = repair_group_size(loaded, repair)
    check_repair_pair(first, loaded, checkpoint, repair)
    return loaded, size


def _repair(repairer, outputs):
    """DocRepair's second pass over first-pass ``outputs``; one line on stderr when groups kept their first pass."""
    import sys

    from ctxmt_cli.decode.repair import RepairStats, repair_documents

    loaded, size = repairer
    stats = RepairStats()
    repaired = repair_documents(loaded, outputs, group_size=size, stats=stats)
    kept = stats.fallbacks + stats.too_long
    if kept:
        print(f"ctxmt: warning: --repair: {kept} of {stats.groups + stats.too_long} groups kept their first-pass "
              f"translation ({stats.fallbacks} rewritten with a wrong or empty sentence, {stats.too_long} too "
              "long for the repair model)", file=sys.stderr)
    return repaired


def average_files(paths: list[Path], output: Path, *, force: bool = False) -> Path:
    """``ctxmt average``: refuse an --output that is an input or exists (without ``force``), then average."""
    from ctxmt_cli.train.checkpoint import average_checkpoints

    check_output_file(output, "--output", force=force, inputs=tuple(paths))
    return average_checkpoints(paths, output)


def synthetic_items(prepared: Path):
    """The synthetic benchmark's contrastive set (a :class:`TestSet`) of a prepared synthetic directory."""
    from ctxmt_cli.evaluate.testsets.generic import read_synthetic

    return read_synthetic(Path(prepared))[0]


def contrastive_accuracy(model, tokenizer, testset, *, context=None, normalize="mean") -> dict:
    """{phenomenon: {distance: accuracy}} plus the overall accuracy under key 'all'."""
    from ctxmt_cli.evaluate.contrastive import accuracy_by, decisions, score_testset

    scores = score_testset(model, tokenizer, testset, context=context, normalize=normalize)
    ok = decisions(testset, scores)
    table = accuracy_by(testset.items, ok, "phenomenon", "distance")
    context = [o for item, o in zip(testset.items, ok) if str(item.tags.get("distance")) != "0"]
    table["all"] = {"all": sum(ok) / max(len(ok), 1), "d>=1": sum(context) / max(len(context), 1)}
    return table
