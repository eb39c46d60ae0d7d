"""The ``translate`` command: whole documents, with the model's own context."""

from __future__ import annotations

from pathlib import Path

import typer

from ctxmt_cli.cli.errors import user_errors
from ctxmt_cli.cli.options import (
    BEAM,
    CONTEXT,
    CONTEXT_HELP,
    SENTENCES,
    BatchDocs,
    Beam,
    Compile,
    Device,
    Engine,
    GroupOrder,
    InputFormat,
    Lenpen,
    LogFormat,
    Quantize,
    TargetModeOption,
    WarmupSentences,
)


@user_errors
def translate(
    input: str = typer.Argument(..., metavar="DOCS", help="documents (--input-format): text, one sentence per line "
                                "and a blank line between documents, or JSONL; - = stdin, each document translated "
                                "as soon as it is read"),
    checkpoint: Path = typer.Option(..., "--checkpoint", "-c", help="model checkpoint (--engine ctranslate2: the "
                                    "folder ctxmt export ctranslate2 wrote)"),
    engine: Engine = typer.Option("torch", help="what searches: ctxmt (torch), or CTranslate2 over an exported "
                                  "folder (same windows and target-context forcing)"),
    out: str = typer.Option("-", "--out", "-o", help="output file, in the input's format; - = stdout, each "
                            "document written as soon as it is done"),
    force: bool = typer.Option(False, help="replace an existing --out file"),
    input_format: InputFormat = typer.Option("text", help="text, or jsonl: one document per line "
                                             '{"doc_id": ..., "src": [...], "tgt_context": [...]} (tgt_context: '
                                             "translations of the first sentences, forced as their context); "
                                             'the output is one line {"doc_id", "translations"} per document'),
    scores: bool = typer.Option(False, "--scores", help="jsonl: add each sentence's log-probability (\"scores\")"),
    nbest: int | None = typer.Option(None, **BEAM, help="jsonl: add each sentence's N best translations "
                                        '("nbest"; N <= --beam)'),
    beam: Beam = None,
    lenpen: Lenpen = None,
    target_mode: TargetModeOption = None,
    batch_docs: BatchDocs = None,
    warmup_sentences: WarmupSentences = None,
    context: int | None = typer.Option(None, **CONTEXT, help=CONTEXT_HELP),
    device: Device = "auto",
    quantize: Quantize = None,
    compile: Compile = False,
    repair: Path | None = typer.Option(None, help="DocRepair: rewrite the translations with this repair checkpoint "
                                          "(`ctxmt prepare docrepair`), in groups of 4 consecutive sentences"),
    group_sentences: int | None = typer.Option(None, **SENTENCES, help="mbe: sentences per group (default: the whole "
                                                  "document is one group)"),
    group_order: GroupOrder = typer.Option("consecutive", help="mbe: consecutive, or length (groups of "
                                           "length-sorted sentences)"),
    first_pass: Path | None = typer.Option(None, help="hanoit reading target context: "
                                              "translate each document first with this "
                                              "sentence-level checkpoint; its translations are the target context"),
    log_format: LogFormat = None,
):
    """Translate whole documents sentence by sentence, with the model's own context (or --context K).

    The sentences translated so far go to stderr (a bar on a terminal, otherwise a line every 30 s once it has run
    that long), then one line with the count, the time and the decoding settings."""
    from ctxmt_cli.cli.commands import translate_file

    loading = {"device": device, "first_pass": first_pass, "repair": repair, "engine": engine, "quantize": quantize,
               "compile": compile}
    translate_file(input, out, checkpoint, loading, input_format=input_format, scores=scores, force=force,
                   log_format=log_format, nbest=nbest, beam=beam, lenpen=lenpen, target_mode=target_mode,
                   batch_docs=batch_docs, context=context, warmup_sentences=warmup_sentences,
                   group_sentences=group_sentences, group_order=group_order)


def register(app: typer.Typer) -> None:
    """Add ``translate`` to the app."""
    app.command(name="translate")(translate)
