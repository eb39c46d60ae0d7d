"""Bodies of the CLI commands that glue loading, decoding and evaluation together.

Kept out of the command modules so the Typer layer stays a thin parser, and importable
from tests and from the quickstart without going through Typer.
"""

from __future__ import annotations

import json
from pathlib import Path

from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.paths import check_output_file


def _dry_run_meta(meta_path: Path) -> dict:
    """The ``meta.json`` fields a dry run reads (the vocabulary sizes); anything else there is one line."""
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        sizes = meta["vocab_size"]
        good = all(type(sizes[s]) is int and sizes[s] > 0 for s in ("src", "tgt"))   # a bool is no size
    except (ValueError, KeyError, TypeError):         # not JSON, not UTF-8, not an object, no sizes
        good = False
    if not good:
        raise CtxmtError(f"{meta_path}: no readable vocab_size {{src: N, tgt: N}}; the file was changed or damaged "
                         "since `ctxmt prepare` wrote it: prepare the dataset again (with --force)")
    return meta


def dry_run_report(recipe) -> str:
    """The resolved recipe and the model's parameter count; needs no prepared data."""
    from ctxmt_cli.config import dump_recipe
    from ctxmt_cli.core.batch import VocabInfo
    from ctxmt_cli.models.families import build_model, resolve_model_config

    notes = ""
    if recipe.train.init_from:                   # the architecture the run will have: the checkpoint's
        from ctxmt_cli.train.init_from import adopt_architecture, describe_changes, read_init_checkpoint

        recipe, changes = adopt_architecture(recipe, read_init_checkpoint(recipe.train.init_from))
        notes = f"\n# {describe_changes(changes)}" if changes else ""
    meta_path = Path(recipe.data.path) / "meta.json"
    if meta_path.is_file():
        meta = _dry_run_meta(meta_path)
        vocab = VocabInfo(meta["vocab_size"]["src"], meta["vocab_size"]["tgt"], joint=meta.get("joint", True))
        where = f"vocabulary of {meta_path.parent}"
    else:  # no data yet: count with a nominal vocabulary and say so
        meta = {"mean_sentence_length": {"src": 20.0, "tgt": 20.0}}
        vocab = VocabInfo(8000, 8000)
        where = f"nominal joint vocabulary of 8000; {meta_path.parent} not prepared yet"
    model_cfg = resolve_model_config(recipe.model, meta)
    model = build_model(model_cfg, vocab)
    resolved = recipe.model_copy(update={"model": model_cfg})
    return (f"{dump_recipe(resolved)}\n# family: {model_cfg.family}\n# parameters: {model.num_parameters():,} "
            f"({where}){notes}")


def train_result_lines(result, log_format=None) -> str:
    """The closing report of ``ctxmt train``: the best (and averaged) checkpoint; one JSON object with
    ``--log-format json``, so that stdout stays JSON lines."""
    if log_format == "json":
        from ctxmt_cli.logs import json_line

        return json_line({"kind": "result", "best": str(result.best), "last": str(result.last),
                          "averaged": None if result.averaged is None else str(result.averaged),
                          "seconds": round(result.seconds, 3)})
    return f"best checkpoint: {result.best}" + (f"\naveraged: {result.averaged}" if result.averaged else "")



def translate_file(input: str, out: str, checkpoint: Path, loading: dict | None = None, *,
                   input_format: str = "text", scores: bool = False, force: bool = False,
                   log_format: str | None = None, **options) -> int:
    """``ctxmt translate``: translate a document file (or stdin, as it arrives) with the Python API
    (:meth:`ctxmt_cli.api.Model.translate_stream`) and write each document as soon as it is done; returns the
    number of sentences translated.

    ``input_format``: ``text`` (one sentence per line, blank lines between documents; the output likewise) or
    ``jsonl`` (:mod:`ctxmt_cli.decode.jsonl`; the output is JSONL, with ``scores`` the sentence
    log-probabilities and with ``nbest`` N the N best translations of each sentence). ``loading``: the keyword
    arguments of :func:`ctxmt_cli.api.load` (``device``, ``first_pass``, ``repair``, ``engine``: ``ctranslate2``
    translates the folder ``checkpoint`` that ``ctxmt export ctranslate2`` wrote); ``options``: those of
    :meth:`~ctxmt_cli.api.Model.translate`. An existing ``out`` file is replaced only with ``force``. The sentences
    translated so far go to stderr in ``log_format`` (:meth:`ctxmt_cli.logs.CountLog.periodic`: a bar on a
    terminal, otherwise a line every :data:`~ctxmt_cli.logs.REPORT_EVERY` seconds once it has run that long), then
    the closing ``translated N sentences`` line.
    """
    import sys

    from ctxmt_cli import api
    from ctxmt_cli.decode.settings import TranslationStats
    from ctxmt_cli.decode.streaming import read_input
    from ctxmt_cli.logs import CountLog

    loading, nbest = dict(loading or {}), options.get("nbest")
    if input_format == "text" and (scores or nbest is not None):
        raise CtxmtError("--scores and --nbest add JSON fields to each document: give --input-format jsonl "
                         "(text output holds one translation per line)")
    extra = tuple(Path(p) for p in (loading.get("repair"), loading.get("first_pass")) if p is not None)
    if out != "-":                     # before any work: a bad -o must not cost a whole translation
        check_output_file(out, "--out", force=force,
                          inputs=(checkpoint,) + (() if input == "-" else (input,)) + extra)
    documents = read_input(input, input_format)   # a file is read and checked first: a bad input costs no model load
    model = api.load(checkpoint, **loading)
    model.warn = lambda line: print(f"ctxmt: warning: {line}", file=sys.stderr)
    if loading.get("compile"):
        from ctxmt_cli.models.compiled import COMPILING

        print(f"ctxmt: {COMPILING}", file=sys.stderr)
    stats = options.pop("stats", None) or TranslationStats()
    log = CountLog.periodic(log_format, "sentences")
    try:
        count = _write_translations(model, documents, out, log, input_format=input_format, scores=scores,
                                    stats=stats, **options)
        # json: the counters a user checks a translation by (fallbacks, lead-in sentences dropped) as fields
        log.message(f"translated {count} sentences {stats.summary()}", **{**stats.decoding(), "sentences": count})
    finally:
        log.close()
    return count


def _to_translate(documents) -> int | None:
    """The sentences of ``documents`` that will be translated (non-blank, after any given target context); None
    for documents still arriving (stdin)."""
    if not isinstance(documents, list):
        return None
    return sum(1 for doc in documents for line in doc.src[len(doc.tgt_context):] if line.strip())


def _write_translations(model, documents, out: str, log, *, input_format: str, scores: bool, stats,
                        **options) -> int:
    """Translate ``documents`` and write each as it is done; the progress (sentences) on ``log``."""
    from ctxmt_cli.decode.documents import DocumentWriter, format_documents
    from ctxmt_cli.decode.jsonl import format_translation

    total, count, nbest = _to_translate(documents), 0, options.get("nbest")

    def report(done: int) -> None:
        # the decoder's count may pass the planned total (lead-in sentences translated, then dropped): capped
        log.update("translate", done if total is None else min(done, total), total)

    report(0)
    with DocumentWriter(out) as writer:
        results = model.translate_stream(documents, scores=scores, stats=stats,
                                         progress=lambda counted: report(counted.sentences), **options)
        for n, result in enumerate(results):
            if input_format == "jsonl":
                writer.write(format_translation(result, scores, nbest is not None))
            else:                                      # a blank line before every document but the first
                writer.write(("\n" if n else "") + format_documents([result.translations]))
            count += len(result.sentences)
    report(stats.sentences if total is None else total)     # the end (a blank line is no step of the decoder)
    return count


def average_files(paths: list[Path], out: str | Path, *, force: bool = False) -> Path:
    """``ctxmt average``: refuse an --out that is an input or exists (without ``force``), then average."""
    from ctxmt_cli.train.checkpoint import average_checkpoints

    check_output_file(out, "--out", force=force, inputs=tuple(paths))
    return average_checkpoints(paths, Path(out))


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
    context = [o for item, o in zip(testset.items, ok, strict=True) if str(item.tags.get("distance")) != "0"]
    table["all"] = {"all": sum(ok) / max(len(ok), 1), "d>=1": sum(context) / max(len(context), 1)}
    return table
