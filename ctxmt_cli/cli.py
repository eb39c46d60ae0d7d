"""The ``ctxmt`` command line. Each command parses its options, loads, and calls one function.

torch and the heavy modules are imported inside the commands so ``--help`` is instant.
Errors a user can cause print one line on stderr and exit with code 2: a :class:`CtxmtError`, an OS
error the user can fix (a full disk, a permission) and a bad option value (click's usage error, which
would otherwise print a usage box).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import List, Optional

import typer

from ctxmt_cli import cli_analysis, cli_benchmark, cli_docrepair, cli_export, cli_package, cli_serve
from ctxmt_cli.cli_errors import OneLineGroup, refuse_given, user_errors
from ctxmt_cli.cli_options import (
    TESTSET_HELP,
    Device,
    Engine,
    GroupOrder,
    InputFormat,
    LogFormat,
    MaxLengthRatio,
    MaxWords,
    MinWords,
    Normalize,
    PrepareFormat,
    ScatSplit,
    ScoreSpan,
    Significance,
    SpmModel,
    SpmSample,
    SpmType,
    TargetContext,
    Tokenize,
    VocabFrom,
    Workers,
    check_testset,
)
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.paths import check_output_dir

app = typer.Typer(
    cls=OneLineGroup, no_args_is_help=True, pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},      # every command inherits -h
    help="ctxmt: context-aware (document-level) neural machine translation.",
)


def _print_version(value: bool) -> None:
    if value:
        import ctxmt_cli

        typer.echo(f"ctxmt {ctxmt_cli.__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                 help="print ctxmt's version and exit"),
):
    """ctxmt: context-aware (document-level) neural machine translation."""


@app.command()
@user_errors
def prepare(
    ctx: typer.Context,
    fmt: PrepareFormat = typer.Argument(..., metavar="FORMAT", help="a corpus: synthetic, text, jsonl, iwslt-tags, "
                                        "iwslt-xml, voita, maruf (a <d> line before each document, Maruf et al. 2019); "
                                        "from a prepared --data DIR: docrepair (its round-trip corpus), reverse"),
    out: Path = typer.Option(..., "--out", help="prepared dataset directory to write"),
    train: Optional[Path] = typer.Option(None, help="train PATH, a prefix: PATH.L1 and PATH.L2 (iwslt-xml: "
                                         "PATH.L1.xml and PATH.L2.xml; maruf: PATH.L1 and PATH.L2, else Maruf's "
                                         "PATH_L1.txt and PATH_L2.txt; jsonl: the file itself); L1, L2: --src-lang, "
                                         "--tgt-lang; any file may be .gz, .xz or .bz2 (PATH.L1.xz for PATH.L1)"),
    valid: Optional[Path] = typer.Option(None, help="valid PATH"),
    test: Optional[Path] = typer.Option(None, help="test PATH"),
    src_lang: str = typer.Option("src", help="source language code / file suffix"),
    tgt_lang: str = typer.Option("tgt", help="target language code / file suffix"),
    vocab_size: int = typer.Option(8000, min=8, help="SentencePiece vocabulary size"),
    joint: bool = typer.Option(True, "--joint/--separate", help="one SentencePiece model for both sides"),
    moses: bool = typer.Option(False, help="Moses-tokenize (sacremoses) before SentencePiece"),
    spm_type: SpmType = typer.Option("unigram", help="SentencePiece model type"),
    max_sentence_tokens: int = typer.Option(250, min=4, help="longer sentences are truncated with a warning"),
    seed: int = typer.Option(1, help="random seed"),
    spm_sample: SpmSample = 2_000_000,
    spm: SpmModel = None,
    vocab_from: VocabFrom = None,
    workers: Workers = 0,
    min_words: MinWords = 0,
    max_words: MaxWords = 0,
    max_length_ratio: MaxLengthRatio = 0.0,
    docs: int = typer.Option(2000, min=41, help="synthetic: number of documents (>= 41)"),
    force: bool = typer.Option(False, help="overwrite an existing output directory"),
    data: Optional[Path] = typer.Option(None, help="docrepair, reverse: the prepared dataset to read"),
    splits: str = typer.Option("train,valid", help="docrepair: splits to round-trip translate, comma-separated"),
    reverse: Optional[Path] = typer.Option(None, help="docrepair: target → source checkpoint (trained on "
                                           "`ctxmt prepare reverse`)"),
    forward: Optional[Path] = typer.Option(None, help="docrepair: source → target checkpoint"),
    group_size: int = typer.Option(4, min=1, help="docrepair: sentences per group (Voita et al. 2019: 4)"),
    stride: Optional[int] = typer.Option(None, min=1, help="docrepair: a group starts every N sentences "
                                         "(default: the group size, disjoint groups)"),
    beam: Optional[int] = typer.Option(None, min=1, help="docrepair: beam of both translations (default: each "
                                       "checkpoint recipe's)"),
    device: Device = "auto",
    log_format: LogFormat = None,
):
    """Read a corpus (or generate the synthetic benchmark) into the prepared binary layout; or derive one from
    a prepared dataset (docrepair, reverse)."""
    from ctxmt_cli.cli_docrepair import DERIVED_FORMATS, check_options, check_vocabulary_options, prepare_derived
    from ctxmt_cli.data.clean import CleanRules
    from ctxmt_cli.data.pipeline import PrepareScale, prepare_from_cli, summary_lines

    if fmt in DERIVED_FORMATS:
        return typer.echo(prepare_derived(ctx))
    check_options(ctx, fmt)
    check_vocabulary_options(ctx)
    scale = PrepareScale(spm_sample, workers, spm, vocab_from, CleanRules(min_words, max_words, max_length_ratio))
    meta = prepare_from_cli(
        fmt, out, {"train": train, "valid": valid, "test": test}, src_lang=src_lang, tgt_lang=tgt_lang,
        vocab_size=vocab_size, joint=joint, moses=moses, max_sentence_tokens=max_sentence_tokens,
        seed=seed, docs=docs, force=force, spm_type=spm_type, scale=scale)
    typer.echo("\n".join(summary_lines(out, meta, scale.clean)))


@app.command(name="train")
@user_errors
def train_command(
    recipe: str = typer.Argument(..., metavar="RECIPE", help="a recipe YAML file, or the NAME of a packaged recipe "
                                 "(`ctxmt recipes list`; e.g. quickstart/concat); an existing file wins"),
    set_: List[str] = typer.Option([], "--set", help="override KEY.PATH=VALUE (repeatable)"),
    resume: bool = typer.Option(False, help="continue from checkpoint_last.pt in train.save_dir (with the recipe it "
                                "was trained with: see --allow-changed)"),
    allow_changed: List[str] = typer.Option([], "--allow-changed", metavar="KEY[,KEY...]", help="with --resume: "
                                            "recipe keys (or sections) that may differ from the checkpoint's, e.g. "
                                            "train.max_steps,train.lr; each change is printed and recorded in the "
                                            "run (metrics.jsonl, the checkpoints' state.recipe_history)"),
    dry_run: bool = typer.Option(False, help="validate, print the resolved recipe and parameter count, exit"),
    device: Device = "auto",
    log_format: LogFormat = None,
):
    """Train the system a recipe describes (under torchrun: one process per device)."""
    from ctxmt_cli.config import load_recipe

    loaded = load_recipe(recipe, set_)
    if allow_changed and not resume:
        raise CtxmtError("--allow-changed applies to --resume only (a fresh run has nothing to differ from); "
                         "add --resume or drop it")
    from ctxmt_cli.train.resume import parse_allowed

    allowed = parse_allowed(allow_changed, loaded)
    if dry_run:
        from ctxmt_cli.commands import dry_run_report

        typer.echo(dry_run_report(loaded))
        return
    from ctxmt_cli.commands import train_result_lines
    from ctxmt_cli.train.trainer import train

    result = train(loaded, resume=resume, device=device, log_format=log_format, allow_changed=allowed)
    if os.environ.get("RANK", "0") == "0":  # under torchrun only rank 0 reports
        typer.echo(train_result_lines(result, log_format))


CONTEXT_HELP = ("K context sentences per side that has context, instead of the model's own: concatenation windows "
                "of K+1 sentences (--context 3 = s4to4; an sNto1 model grows its source side only), caching: K cached "
                "sentences, a model reading next sentences (hanoit) K next ones too; refused for a sentence-level model")


@app.command()
@user_errors
def translate(
    input: str = typer.Argument(..., metavar="DOCS", help="documents (--input-format): text, one sentence per line "
                                "and a blank line between documents, or JSONL; - = stdin, each document translated "
                                "as soon as it is read"),
    checkpoint: Path = typer.Option(..., "--checkpoint", "-c", help="model checkpoint (--engine ctranslate2: the "
                                    "folder ctxmt export ctranslate2 wrote)"),
    engine: Engine = typer.Option("torch", help="what searches: ctxmt (torch), or CTranslate2 over an exported "
                                  "folder (same windows and target-context forcing)"),
    output: str = typer.Option("-", "--output", "-o", help="output file, in the input's format; - = stdout, each "
                               "document written as soon as it is done"),
    input_format: InputFormat = typer.Option("text", help="text, or jsonl: one document per line "
                                             '{"doc_id": ..., "src": [...], "tgt_context": [...]} (tgt_context: '
                                             "translations of the first sentences, forced as their context); "
                                             'the output is one line {"doc_id", "translations"} per document'),
    scores: bool = typer.Option(False, "--scores", help="jsonl: add each sentence's log-probability (\"scores\")"),
    nbest: Optional[int] = typer.Option(None, min=1, help="jsonl: add each sentence's N best translations "
                                        '("nbest"; N <= --beam)'),
    beam: Optional[int] = typer.Option(None, min=1, help="beam size (default: recipe decode.beam)"),
    lenpen: Optional[float] = typer.Option(None, min=0.0, help="length penalty (default: recipe)"),
    target_context: Optional[TargetContext] = typer.Option(None, help="prefix (own outputs forced), generate "
                                                           "(regenerate the window) [default: recipe]"),
    batch_docs: Optional[int] = typer.Option(None, min=1, help="documents decoded in parallel"),
    context: Optional[int] = typer.Option(None, min=0, help=CONTEXT_HELP),
    device: Device = "auto",
    repair: Optional[Path] = typer.Option(None, help="DocRepair: rewrite the translations with this repair checkpoint "
                                          "(`ctxmt prepare docrepair`), in groups of 4 consecutive sentences"),
    group_sentences: Optional[int] = typer.Option(None, min=1, help="mbe: sentences per group (default: the whole "
                                                  "document is one group)"),
    group_order: GroupOrder = typer.Option("consecutive", help="mbe: consecutive, or length (groups of "
                                           "length-sorted sentences)"),
    first_pass: Optional[Path] = typer.Option(None, help="bilingual hanoit: translate each document first with this "
                                              "sentence-level checkpoint; its translations are the target context"),
):
    """Translate whole documents sentence by sentence, with the model's own context (or --context K)."""
    from ctxmt_cli.commands import translate_file

    count = translate_file(input, output, checkpoint, input_format=input_format, scores=scores, nbest=nbest,
                           beam=beam, lenpen=lenpen, target_context=target_context,
                           batch_docs=batch_docs, device=device, context=context, repair=repair,
                           group_sentences=group_sentences, group_order=group_order, first_pass=first_pass,
                           engine=engine)
    typer.echo(f"translated {count} sentences", err=True)


def contrastive(
    ctx: typer.Context,
    testset: str = typer.Argument(..., metavar="TESTSET", callback=check_testset, help=TESTSET_HELP),
    runs: Optional[List[Path]] = typer.Argument(None, metavar="[RUN_A RUN_B]", help="with 'compare': two --out directories"),
    checkpoint: Optional[Path] = typer.Option(None, "--checkpoint", "-c", help="model checkpoint"),
    data: Optional[Path] = typer.Option(None, help="the test set's files (folder or file) when not given as KIND:PATH"),
    context: Optional[int] = typer.Option(None, min=0, help="context sentences per side (default: the model's)"),
    normalize: Normalize = typer.Option("mean", help="mean (token-averaged log-prob), none (sum)"),
    score_span: ScoreSpan = typer.Option("all", help="all (every sentence of a candidate group), current (the last "
                                         "sentence)"),
    out: Optional[Path] = typer.Option(None, help="directory for results.json, SET.scores, SET.decisions.jsonl"),
    force: bool = typer.Option(False, help="overwrite an existing OUT/results.json"),
    split: Optional[ScatSplit] = typer.Option(None, help="scat: its split [default: test]"),
    dev: bool = typer.Option(False, help="voita: the dev sets instead of the test sets"),
    documents: Optional[Path] = typer.Option(None, help="contrapro: OPUS OpenSubtitles documents/ folder to extract context from"),
    json_file: Optional[str] = typer.Option(None, "--json", metavar="PATH|none", help="lopes: the publisher's test-set json the files were extracted from (default: the one *testset*.json beside the extracted folder or one up, announced); none: the files alone, in file order"),
    max_tokens: int = typer.Option(4096, min=16, help="token budget per scoring batch"),
    device: Device = "auto",
    log_format: LogFormat = None,
):
    """Score contrastive test sets by forced decoding; accuracy per phenomenon/distance and the papers' aggregates.

    Beside each accuracy: the strict accuracy (ties lose) and the ties, items whose correct candidate's score equals
    any other candidate's (results.json: "ties", defined under "definitions").

    `ctxmt contrastive compare RUN_A RUN_B` runs McNemar's test on two runs' per-item decisions.
    """
    from rich.console import Console

    if testset == "compare":
        refuse_given(ctx, [p.name for p in ctx.command.params if p.name not in ("testset", "runs")],
                     "does not apply to `contrastive compare RUN_A RUN_B` (it reads the two runs' decisions)")
        return _compare_contrastive(runs)
    if out is None:
        refuse_given(ctx, ("force",), "is read with --out DIR only (it allows replacing OUT/results.json)")
    if runs:
        raise CtxmtError(f"unexpected arguments {[str(r) for r in runs]}; give one TESTSET (or 'compare RUN_A RUN_B')")
    if checkpoint is None:
        raise CtxmtError("contrastive scoring needs --checkpoint CKPT")
    _check_set_options(testset.partition(":")[0], {"--split": split, "--dev": dev or None, "--documents": documents,
                                                  "--json": json_file})
    if out is not None:
        check_output_dir(out, "--out")
    from ctxmt_cli.evaluate.contrastive_report import render, run_contrastive, warning_lines

    results = run_contrastive(
        testset, checkpoint, data=data, out=out, force=force, device=device, context=context, normalize=normalize,
        span=score_span, max_tokens=max_tokens, split=split, dev=dev or None, documents=documents, json=json_file,
        log_format=log_format,
    )
    Console().print(render(results))
    for line in warning_lines(results):  # ties or unknown tokens decided the accuracy: one line each, on stderr
        typer.echo(f"ctxmt: warning: {line}", err=True)


#: options that one kind of contrastive test set reads (given for another kind, they would be ignored)
SET_OPTIONS = {"--split": "scat", "--dev": "voita", "--documents": "contrapro", "--json": "lopes"}


def _check_set_options(kind: str, given: dict) -> None:
    """Refuse an option of one test set kind given for another (one line naming both)."""
    for option, value in given.items():
        if value is not None and SET_OPTIONS[option] != kind:
            raise CtxmtError(f"{option} is read by the {SET_OPTIONS[option]} test set only, not {kind!r}; drop it")


def _compare_contrastive(runs) -> None:
    """``ctxmt contrastive compare RUN_A RUN_B``: McNemar's test on two runs' decisions."""
    from rich.console import Console

    from ctxmt_cli.evaluate.contrastive_report import render_compare
    from ctxmt_cli.evaluate.mcnemar import compare_runs

    if not runs or len(runs) != 2:
        raise CtxmtError("usage: ctxmt contrastive compare RUN_A RUN_B (two directories written with --out)")
    Console().print(render_compare(compare_runs(*runs), *runs))


app.command()(user_errors(contrastive))
app.command(name="score-contrastive", help="Alias of `contrastive`.")(user_errors(contrastive))


@app.command()
@user_errors
def evaluate(
    ctx: typer.Context,
    checkpoint: Optional[List[Path]] = typer.Option(None, "--checkpoint", "-c", help="translate the split with it; twice to compare two systems"),
    split: str = typer.Option("test", help="prepared split to translate and score"),
    data: Optional[Path] = typer.Option(None, help="prepared dir (default: the first checkpoint's recipe data.path)"),
    hyp: Optional[List[Path]] = typer.Option(None, help="score this hypothesis file instead (repeatable; the first is "
                                             "the baseline); - = stdin, e.g. ctxmt translate ... | ctxmt evaluate "
                                             "--hyp - --ref R"),
    ref: Optional[Path] = typer.Option(None, help="reference file for --hyp (blank lines between documents)"),
    src: Optional[Path] = typer.Option(None, help="source file for --hyp (needed by --comet)"),
    docids: Optional[Path] = typer.Option(None, help="one document id per line of --hyp/--ref, instead of blank lines"),
    lowercase: bool = typer.Option(False, help="lowercased BLEU (as Voita et al. for Russian)"),
    tokenize: Tokenize = typer.Option("13a", help="sacrebleu tokenizer: 13a (detokenized BLEU), none (tokenized "
                                      "BLEU), ... (ja-mecab, ko-mecab need extras; spm, flores* a download)"),
    document_level: bool = typer.Option(False, help="also BLEU/chrF with each document's sentences joined into one segment"),
    significance: Optional[Significance] = typer.Option(None, help="paired tests of each system against the first: "
                                                        "bootstrap resampling, ar (approximate randomisation), both"),
    samples: Optional[int] = typer.Option(None, min=1, help="bootstrap resamples / AR trials (default 1000 / 10000)"),
    seed: int = typer.Option(12345, help="seed of the significance tests (sacrebleu's default)"),
    comet: Optional[Path] = typer.Option(None, help="local COMET model folder or .ckpt; needs the optional unbabel-comet (extra: comet)"),
    out: Optional[Path] = typer.Option(None, help="write every figure to this JSON file"),
    beam: Optional[int] = typer.Option(None, min=1, help="beam size (default: the recipe's decode.beam)"),
    context: Optional[str] = typer.Option(None, metavar="K[,K...]", help="with --checkpoint: translate once per K "
                                          "(comma-separated) and print BLEU/chrF per K. " + CONTEXT_HELP),
    group_sentences: Optional[str] = typer.Option(None, metavar="N[,N...|all]", help="mbe: translate once per number "
                                                  "of sentences per group and print BLEU/chrF per N (Morishita et al. "
                                                  "2021, Figure 4; with --out also a PNG)"),
    device: Device = "auto",
    first_pass: Optional[Path] = typer.Option(None, help="bilingual hanoit: its target context from this sentence-level "
                                              "checkpoint's translations (default: the split's first-pass stream)"),
):
    """BLEU and chrF (sacrebleu, signatures printed) of checkpoints on a prepared split, or of --hyp files against --ref."""
    from ctxmt_cli.evaluate.translation import EvalRequest, run_evaluate

    _check_evaluate_options(ctx, bool(hyp), comet is not None, significance is not None)
    request = EvalRequest(
        checkpoints=list(checkpoint or []), split=split, data=data, hyps=list(hyp or []), ref=ref, src=src,
        docids=docids, lowercase=lowercase, tokenize=tokenize, document_level=document_level,
        significance=significance, samples=samples, seed=seed, comet=comet, out=out, beam=beam, device=device,
        context=context, group_sentences=group_sentences, first_pass=first_pass,
    )
    typer.echo(run_evaluate(request))


def _check_evaluate_options(ctx, scores_files: bool, comet: bool, significance: bool) -> None:
    """Refuse the options of one way of ``evaluate`` given for the other (they would be silently ignored)."""
    if scores_files:
        refuse_given(ctx, ("split", "data", "beam"), "goes with --checkpoint (a prepared split is translated); "
                     "--hyp files are scored as they are")
        if not comet:
            refuse_given(ctx, ("device",), "goes with --checkpoint or --comet (with --hyp alone no model runs)")
    if not significance:
        refuse_given(ctx, ("samples", "seed"), "is read by the significance tests only (--significance)")


@app.command()
@user_errors
def average(
    checkpoints: List[Path] = typer.Argument(..., help="checkpoints to average"),
    output: Path = typer.Option(..., "--output", "-o", help="averaged checkpoint to write (not one of the inputs)"),
    force: bool = typer.Option(False, help="overwrite an existing --output"),
):
    """Average the weights of several checkpoints of one model."""
    from ctxmt_cli.commands import average_files

    typer.echo(f"wrote {average_files(list(checkpoints), output, force=force)}")


@app.command()
@user_errors
def quickstart(
    out: Path = typer.Option(Path("quickstart"), "--out", help="output directory"),
    docs: int = typer.Option(2000, min=41, help="synthetic documents (>= 41)"),
    systems: Optional[str] = typer.Option(
        None, help="comma-separated systems, one packaged recipe each (`ctxmt recipes list quickstart`; "
        "default: concat,sentence)"),
    updates: Optional[int] = typer.Option(None, min=1, help="updates per system (default: each recipe's train.max_steps)"),
    seed: int = typer.Option(1, help="seed of the synthetic data and of every system's training"),
    force: bool = typer.Option(False, help="reuse/overwrite an existing output directory"),
    device: Device = "auto",
    log_format: LogFormat = None,
):
    """Synthetic benchmark end to end: prepare, train each system a fixed number of updates, compare, translate.

    With --log-format json, stdout carries JSON lines only (the training runs' and a closing result); the tables
    go to stderr."""
    from ctxmt_cli.quickstart import run_quickstart

    check_output_dir(out, "--out")
    run_quickstart(out, docs=docs, seed=seed, force=force, systems=systems, updates=updates, device=device,
                   log_format=log_format)


cli_benchmark.register(app)
cli_analysis.register(app)
cli_docrepair.register(app)
cli_package.register(app)
cli_serve.register(app)
cli_export.register(app)


def main() -> None:  # pragma: no cover - console entry point
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
