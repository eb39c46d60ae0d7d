"""The ``prepare`` command: read a corpus into the prepared layout, or derive one from a prepared dataset."""

from __future__ import annotations

from pathlib import Path

import typer

from ctxmt_cli.cli.errors import user_errors
from ctxmt_cli.cli.options import (
    BEAM,
    SEED,
    SENTENCE_TOKENS,
    SENTENCES,
    SYNTHETIC_DOCS,
    VOCAB,
    Device,
    LogFormat,
    MaxLengthRatio,
    MaxWords,
    MinWords,
    PrepareFormat,
    RoundTripMode,
    SpmModel,
    SpmSample,
    SpmType,
    VocabFrom,
    Workers,
)


@user_errors
def prepare(
    ctx: typer.Context,
    fmt: PrepareFormat = typer.Argument(..., metavar="FORMAT", help="a corpus: synthetic, text, jsonl, iwslt-tags, "
                                        "iwslt-xml, voita, maruf (a <d> line before each document, Maruf et al. 2019); "
                                        "from a prepared --data DIR: docrepair (its round-trip corpus), reverse"),
    out: Path = typer.Option(..., "--out", "-o", help="prepared dataset directory to write"),
    train: Path | None = typer.Option(None, help="train PATH, a prefix: PATH.L1 and PATH.L2 (iwslt-xml: "
                                         "PATH.L1.xml and PATH.L2.xml; maruf: PATH.L1 and PATH.L2, else Maruf's "
                                         "PATH_L1.txt and PATH_L2.txt; jsonl: the file itself); L1, L2: --src-lang, "
                                         "--tgt-lang; any file may be .gz, .xz or .bz2 (PATH.L1.xz for PATH.L1)"),
    valid: Path | None = typer.Option(None, help="valid PATH"),
    test: Path | None = typer.Option(None, help="test PATH"),
    src_lang: str = typer.Option("src", help="source language code / file suffix"),
    tgt_lang: str = typer.Option("tgt", help="target language code / file suffix"),
    vocab_size: int = typer.Option(8000, **VOCAB, help="SentencePiece vocabulary size"),
    joint: bool = typer.Option(True, "--joint/--separate", help="one SentencePiece model for both sides"),
    moses: bool = typer.Option(False, help="Moses-tokenize (sacremoses) before SentencePiece"),
    spm_type: SpmType = typer.Option("unigram", help="SentencePiece model type"),
    max_sentence_tokens: int = typer.Option(250, **SENTENCE_TOKENS,
                                            help="longer sentences are truncated with a warning"),
    seed: int = typer.Option(1, **SEED, help="random seed"),
    spm_sample: SpmSample = 2_000_000,
    spm: SpmModel = None,
    vocab_from: VocabFrom = None,
    workers: Workers = 0,
    min_words: MinWords = 0,
    max_words: MaxWords = 0,
    max_length_ratio: MaxLengthRatio = 0.0,
    docs: int = typer.Option(2000, **SYNTHETIC_DOCS, help="synthetic: number of documents"),
    force: bool = typer.Option(False, help="overwrite an existing output directory"),
    data: Path | None = typer.Option(None, help="docrepair, reverse: the prepared dataset to read"),
    splits: str = typer.Option("train,valid", help="docrepair: splits to round-trip translate, comma-separated"),
    reverse: Path | None = typer.Option(None, help="docrepair: target → source checkpoint (trained on "
                                           "`ctxmt prepare reverse`)"),
    forward: Path | None = typer.Option(None, help="docrepair: source → target checkpoint"),
    group_size: int = typer.Option(4, **SENTENCES, help="docrepair: sentences per group (Voita et al. 2019: 4)"),
    stride: int | None = typer.Option(None, **SENTENCES, help="docrepair: a group starts every N sentences "
                                         "(default: the group size, disjoint groups)"),
    beam: int | None = typer.Option(None, **BEAM, help="docrepair: beam of the back-translation (and of the "
                                       "forward one with --round-trip beam; default: each checkpoint recipe's)"),
    round_trip: RoundTripMode = typer.Option("sample", help="docrepair: the forward translation of the "
                                             "back-translations is sampled (seeded by --seed; Voita et al. 2019's "
                                             "public configuration) or the beam's 1-best"),
    device: Device = "auto",
    log_format: LogFormat = None,
):
    """Read a corpus (or generate the synthetic benchmark) into the prepared binary layout; or derive one from
    a prepared dataset (docrepair, reverse)."""
    _prepare(ctx, ctx.params)


def _prepare(ctx: typer.Context, p: dict) -> None:
    """The body of ``ctxmt prepare``; ``p``: its options by name."""
    from ctxmt_cli.cli.docrepair import DERIVED_FORMATS, check_options, check_vocabulary_options, prepare_derived
    from ctxmt_cli.data.clean import CleanRules
    from ctxmt_cli.data.pipeline import prepare_from_cli, summary_lines
    from ctxmt_cli.logs import CountLog

    fmt, out = p["fmt"], p["out"]
    if fmt in DERIVED_FORMATS:
        return typer.echo(prepare_derived(ctx))
    check_options(ctx, fmt)
    check_vocabulary_options(ctx)
    clean = CleanRules(p["min_words"], p["max_words"], p["max_length_ratio"])
    spec = {k: p[k] for k in ("src_lang", "tgt_lang", "vocab_size", "joint", "moses", "max_sentence_tokens", "seed",
                              "force", "spm_type", "spm_sample", "workers", "spm", "vocab_from")}
    if spec["vocab_from"] is not None and Path(spec["vocab_from"]).is_file():     # a checkpoint's tokenizer
        from ctxmt_cli.models.loading import open_checkpoint

        spec["vocab_tokenizer"] = open_checkpoint(spec["vocab_from"]).tokenizer
    log = CountLog.periodic(p["log_format"], "pairs")     # stdout keeps the summary
    try:
        meta = prepare_from_cli(fmt, out, {"train": p["train"], "valid": p["valid"], "test": p["test"]},
                                docs=p["docs"], clean=clean,
                                count=lambda split, done, total: log.update(f"prepare {split}", done, total), **spec)
    finally:
        log.close()
    typer.echo("\n".join(summary_lines(out, meta, clean)))


def register(app: typer.Typer) -> None:
    """Add ``prepare`` to the app."""
    app.command(name="prepare")(prepare)
