"""The scoring commands: ``contrastive`` (alias ``score-contrastive``) and ``evaluate``."""

from __future__ import annotations

from pathlib import Path

import typer

from ctxmt_cli.cli.errors import refuse_given, user_errors
from ctxmt_cli.cli.options import (
    CONTEXT,
    CONTEXT_HELP,
    MAX_TOKENS,
    SAMPLES,
    SEED,
    TESTSET_HELP,
    Beam,
    Device,
    Lenpen,
    LogFormat,
    Normalize,
    ScatSplit,
    ScoreSpan,
    Significance,
    TargetModeOption,
    Tokenize,
    WarmupSentences,
    check_testset,
)
from ctxmt_cli.config_base import DEFAULT_MAX_TOKENS
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.paths import check_output_dir


def contrastive(
    ctx: typer.Context,
    testset: str = typer.Argument(..., metavar="TESTSET", callback=check_testset, help=TESTSET_HELP),
    runs: list[Path] | None = typer.Argument(None, metavar="[RUN_A RUN_B]",
                                             help="with 'compare': two --out directories"),
    checkpoint: Path | None = typer.Option(None, "--checkpoint", "-c", help="model checkpoint"),
    data: Path | None = typer.Option(None, help="the test set's files (folder or file) when not given as KIND:PATH"),
    context: int | None = typer.Option(None, **CONTEXT, help="context sentences per side (default: the model's)"),
    normalize: Normalize = typer.Option("mean", help="mean (token-averaged log-prob), none (sum)"),
    score_span: ScoreSpan = typer.Option("all", help="all (every sentence of a candidate group), current (the last "
                                         "sentence)"),
    out: Path | None = typer.Option(None, "--out", "-o",
                                    help="directory for results.json, SET.scores, SET.decisions.jsonl"),
    force: bool = typer.Option(False, help="overwrite an existing OUT/results.json"),
    split: ScatSplit | None = typer.Option(None, help="scat: its split [default: test]"),
    dev: bool = typer.Option(False, help="voita: the dev sets instead of the test sets"),
    documents: Path | None = typer.Option(
        None, help="contrapro: OPUS OpenSubtitles documents/ folder to extract context from"),
    testset_json: str | None = typer.Option(
        None, "--testset-json", metavar="PATH|none",
        help="lopes: the publisher's test-set json the files were extracted from (default: the one *testset*.json "
        "beside the extracted folder or one up, announced); none: the files alone, in file order"),
    context_gain: bool = typer.Option(True, "--context-gain/--no-context-gain", help="also score every item with "
                                      "its context dropped, in the same pass, and report the gain in accuracy and "
                                      "balanced accuracy with McNemar's exact p (costs the rows context changes: "
                                      "none for a sentence-level model)"),
    max_tokens: int = typer.Option(DEFAULT_MAX_TOKENS, **MAX_TOKENS, help="token budget per scoring batch"),
    device: Device = "auto",
    log_format: LogFormat = None,
):
    """Score contrastive test sets by forced decoding; accuracy per phenomenon/distance and the papers' aggregates.

    Beside each accuracy: the balanced accuracy (the mean of the accuracies per class, e.g. per correct pronoun: what
    priors alone cannot raise), the context gain (the same model without context), the strict accuracy (ties lose)
    and the ties, items whose correct candidate's score equals any other candidate's (results.json: "ties", defined
    under "definitions").

    `ctxmt contrastive compare RUN_A RUN_B` runs McNemar's test on two runs' per-item decisions.
    """
    _contrastive(ctx, ctx.params)


def _contrastive(ctx: typer.Context, p: dict) -> None:
    """The body of ``ctxmt contrastive``; ``p``: its options by name."""
    from ctxmt_cli.tables import print_table

    testset, out = p["testset"], p["out"]
    if testset == "compare":
        refuse_given(ctx, [o.name for o in ctx.command.params if o.name not in ("testset", "runs")],
                     "does not apply to `contrastive compare RUN_A RUN_B` (it reads the two runs' decisions)")
        return _compare_contrastive(p["runs"])
    if out is None:
        refuse_given(ctx, ("force",), "is read with --out DIR only (it allows replacing OUT/results.json)")
    if p["runs"]:
        raise CtxmtError(f"unexpected arguments {[str(r) for r in p['runs']]}; give one TESTSET (or 'compare RUN_A "
                         "RUN_B')")
    if p["checkpoint"] is None:
        raise CtxmtError("contrastive scoring needs --checkpoint CKPT")
    dev = p["dev"] or None
    _check_set_options(testset.partition(":")[0], {"--split": p["split"], "--dev": dev, "--documents": p["documents"],
                                                  "--testset-json": p["testset_json"]})
    if out is not None:
        check_output_dir(out, "--out")
    from ctxmt_cli.evaluate.contrastive_report import render, run_contrastive, warning_lines

    results = run_contrastive(
        testset, p["checkpoint"], data=p["data"], out=out, force=p["force"], device=p["device"],
        context=p["context"], normalize=p["normalize"], span=p["score_span"], max_tokens=p["max_tokens"],
        context_gain=p["context_gain"],
        split=p["split"], dev=dev, documents=p["documents"], json=p["testset_json"], log_format=p["log_format"])
    print_table(render(results))
    for line in warning_lines(results):  # ties or unknown tokens decided the accuracy: one line each, on stderr
        typer.echo(f"ctxmt: warning: {line}", err=True)


#: options that one kind of contrastive test set reads (given for another kind, they would be ignored)
SET_OPTIONS = {"--split": "scat", "--dev": "voita", "--documents": "contrapro", "--testset-json": "lopes"}


def _check_set_options(kind: str, given: dict) -> None:
    """Refuse an option of one test set kind given for another (one line naming both)."""
    for option, value in given.items():
        if value is not None and SET_OPTIONS[option] != kind:
            raise CtxmtError(f"{option} is read by the {SET_OPTIONS[option]} test set only, not {kind!r}; drop it")


def _compare_contrastive(runs) -> None:
    """``ctxmt contrastive compare RUN_A RUN_B``: McNemar's test on two runs' decisions."""
    from ctxmt_cli.evaluate.contrastive_report import render_compare
    from ctxmt_cli.evaluate.mcnemar import compare_runs
    from ctxmt_cli.tables import print_table

    if not runs or len(runs) != 2:
        raise CtxmtError("usage: ctxmt contrastive compare RUN_A RUN_B (two directories written with --out)")
    print_table(render_compare(compare_runs(*runs), *runs))


@user_errors
def evaluate(
    ctx: typer.Context,
    checkpoint: list[Path] | None = typer.Option(
        None, "--checkpoint", "-c", help="translate the split with it; twice to compare two systems"),
    split: str = typer.Option("test", help="prepared split to translate and score"),
    data: Path | None = typer.Option(None, help="prepared dir (default: the first checkpoint's recipe data.path)"),
    hyp: list[Path] | None = typer.Option(None, help="score this hypothesis file instead (repeatable; the first is "
                                             "the baseline); - = stdin, e.g. ctxmt translate ... | ctxmt evaluate "
                                             "--hyp - --ref R"),
    ref: Path | None = typer.Option(None, help="reference file for --hyp (blank lines between documents)"),
    src: Path | None = typer.Option(None, help="source file for --hyp (needed by --comet)"),
    docids: Path | None = typer.Option(None, help="one document id per line of --hyp/--ref, instead of blank lines"),
    lowercase: bool = typer.Option(False, help="lowercased BLEU (as Voita et al. for Russian)"),
    tokenize: Tokenize = typer.Option("13a", help="sacrebleu tokenizer: 13a (detokenized BLEU), none (tokenized "
                                      "BLEU), ... (ja-mecab, ko-mecab need extras; spm, flores* a download)"),
    document_level: bool = typer.Option(
        False, help="also BLEU/chrF with each document's sentences joined into one segment"),
    significance: Significance | None = typer.Option(None, help="paired tests of each system against the first: "
                                                        "bootstrap resampling, ar (approximate randomisation), both"),
    samples: int | None = typer.Option(None, **SAMPLES, help="bootstrap resamples / AR trials (default 1000 / 10000)"),
    seed: int = typer.Option(12345, **SEED, help="seed of the significance tests (sacrebleu's default)"),
    comet: Path | None = typer.Option(
        None, help="local COMET model folder or .ckpt; needs the optional unbabel-comet (extra: comet)"),
    out: str | None = typer.Option(None, "--out", "-o", metavar="PATH", help="write every figure to this JSON file"),
    force: bool = typer.Option(False, help="replace an existing --out file"),
    beam: Beam = None, lenpen: Lenpen = None, target_mode: TargetModeOption = None,   # as translate decodes
    warmup_sentences: WarmupSentences = None,
    context: str | None = typer.Option(None, metavar="K[,K...]", help="with --checkpoint: translate once per K "
                                          "(comma-separated) and print BLEU/chrF per K. " + CONTEXT_HELP),
    group_sentences: str | None = typer.Option(None, metavar="N[,N...|all]", help="mbe: translate once per number "
                                                  "of sentences per group and print BLEU/chrF per N (Morishita et al. "
                                                  "2021, Figure 4; with --out also a PNG)"),
    first_pass: Path | None = typer.Option(None, help="hanoit reading target context: "
                                              "its target context from this sentence-level "
                                              "checkpoint's translations (default: the split's first-pass stream)"),
    device: Device = "auto", log_format: LogFormat = None,
):
    """BLEU and chrF (sacrebleu, signatures printed) of checkpoints on a prepared split, or of --hyp files
    against --ref.

    With --checkpoint, each system's decoding (beam, length penalty, target mode, time and, in generate mode, the
    windows decoded again in prefix mode) is printed on stderr and kept under "decoding" in --out."""
    from ctxmt_cli.evaluate.translation import EvalRequest, run_evaluate

    _check_evaluate_options(ctx, bool(hyp), comet is not None, significance is not None)
    request = EvalRequest(
        checkpoints=list(checkpoint or []), split=split, data=data, hyps=list(hyp or []), ref=ref, src=src,
        docids=docids, lowercase=lowercase, tokenize=tokenize, document_level=document_level,
        significance=significance, samples=samples, seed=seed, comet=comet, out=out, force=force, beam=beam,
        lenpen=lenpen, target_mode=target_mode, warmup_sentences=warmup_sentences, device=device, context=context,
        group_sentences=group_sentences, first_pass=first_pass, log_format=log_format,
    )
    typer.echo(run_evaluate(request))


def _check_evaluate_options(ctx, scores_files: bool, comet: bool, significance: bool) -> None:
    """Refuse the options of one way of ``evaluate`` given for the other (they would be silently ignored)."""
    if scores_files:
        decoding = ("split", "data", "beam", "lenpen", "target_mode", "warmup_sentences", "log_format")
        refuse_given(ctx, decoding, "goes with --checkpoint (a prepared split is translated); --hyp files are "
                     "scored as they are")
        if not comet:
            refuse_given(ctx, ("device",), "goes with --checkpoint or --comet (with --hyp alone no model runs)")
    if not significance:
        refuse_given(ctx, ("samples", "seed"), "is read by the significance tests only (--significance)")


def register(app: typer.Typer) -> None:
    """Add ``contrastive``, its alias ``score-contrastive`` and ``evaluate`` to the app."""
    app.command()(user_errors(contrastive))
    app.command(name="score-contrastive", help="Alias of `contrastive`.")(user_errors(contrastive))
    app.command(name="evaluate")(evaluate)
