"""The DocRepair pipeline on the ``ctxmt`` command line: ``first-pass``, ``prepare docrepair``, ``prepare reverse``.

``first-pass`` is registered on the app by :func:`register`; ``prepare`` (:mod:`ctxmt_cli.cli.prepare`) hands its two
derived formats to :func:`prepare_derived`. They read a prepared dataset instead of a raw corpus, so each
takes its own options and refuses the raw-corpus ones; :data:`READS` says which options every format of
``prepare`` reads, and :func:`check_options` refuses the others: an option that would be silently ignored is an
error.
"""

from __future__ import annotations

from pathlib import Path

import typer

from ctxmt_cli.cli.errors import given_params, option_spelling, user_errors
from ctxmt_cli.cli.options import (
    COUNT,
    BatchDocs,
    Beam,
    Device,
    LogFormat,
)
from ctxmt_cli.errors import CtxmtError

DERIVED_FORMATS = ("docrepair", "reverse")
#: options of `ctxmt prepare` that only the derived formats read
DERIVED_OPTIONS = ("data", "splits", "reverse", "forward", "group_size", "stride", "beam", "round_trip", "device",
                   "log_format")
#: the corpus readers' options (every corpus format reads each of them)
CORPUS_OPTIONS = ("train", "valid", "test", "src_lang", "tgt_lang", "vocab_size", "joint", "moses", "spm_type",
                  "max_sentence_tokens", "seed", "spm_sample", "spm", "vocab_from", "workers", "min_words",
                  "max_words", "max_length_ratio", "log_format")
#: what each format of `ctxmt prepare` reads besides FORMAT, --out and --force; any other option is refused
READS = {
    "synthetic": {"seed", "docs", "vocab_size", "log_format"},    # generated languages, BPE, its own lengths
    **{fmt: set(CORPUS_OPTIONS) for fmt in ("text", "jsonl", "iwslt-tags", "iwslt-xml", "voita", "maruf")},
    "docrepair": {*DERIVED_OPTIONS, "seed"},
    "reverse": {"data"},
}


def check_options(ctx, fmt: str) -> None:
    """Refuse options ``prepare FORMAT`` would not read (one line naming the option and the formats that read it)."""
    allowed = READS[fmt] | {"fmt", "out", "force"}
    for param in given_params(ctx):
        if param.name not in allowed:
            readers = [name for name, reads in READS.items() if param.name in reads]
            reads = sorted(f"--{n.replace('_', '-')}" for n in allowed - {"fmt"})
            own = f"; {fmt} reads {', '.join(reads)}" if len(reads) <= 6 else ""
            verb = "reads" if len(readers) == 1 else "read"
            raise CtxmtError(f"{option_spelling(ctx, param)} does not apply to `ctxmt prepare {fmt}` (only "
                             f"{_formats(readers)} {verb} it{own}); drop it")


#: what a reused vocabulary (``--spm``, ``--vocab-from``) makes meaningless: the options of training one
_TRAINING_OPTIONS = ("vocab_size", "spm_type", "joint", "spm_sample")


def check_vocabulary_options(ctx) -> None:
    """With ``--spm`` or ``--vocab-from``, refuse the options of SentencePiece training (nothing is trained)."""
    given = {param.name: param for param in given_params(ctx)}
    reuse = [name for name in ("spm", "vocab_from") if name in given]
    clash = [given[name] for name in _TRAINING_OPTIONS if name in given]
    if reuse and clash:
        raise CtxmtError(f"{option_spelling(ctx, clash[0])} does not apply with "
                         f"{option_spelling(ctx, given[reuse[0]])}: the vocabulary is reused, not trained; drop it")


def _formats(names: list[str]) -> str:
    """``text, jsonl, ... and maruf``; the six corpus formats as one phrase."""
    corpus = [n for n in names if n not in DERIVED_FORMATS and n != "synthetic"]
    if len(corpus) > 1:
        names = [n for n in names if n not in corpus] + ["the corpus formats"]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def prepare_derived(ctx) -> str:
    """``ctxmt prepare docrepair|reverse`` with the options of ``ctx`` (the prepare command's context); the summary
    line to print (the progress goes to stderr in ``--log-format``)."""
    opts = ctx.params
    fmt, out, data, force, splits = opts["fmt"], opts["out"], opts["data"], opts["force"], opts["splits"]
    check_options(ctx, fmt)
    if data is None:
        raise CtxmtError(f"ctxmt prepare {fmt} needs --data DIR, a prepared dataset")
    if fmt == "reverse":
        from ctxmt_cli.data.docrepair import reverse_prepared

        meta = reverse_prepared(data, out, force=force)
        return f"prepared {out} ({meta['src_lang']} → {meta['tgt_lang']}: {data} with its sides swapped)"
    if opts["reverse"] is None or opts["forward"] is None:
        raise CtxmtError("ctxmt prepare docrepair needs --reverse CKPT (target → source) and --forward CKPT "
                         "(source → target)")
    from ctxmt_cli.decode.first_pass import PassSettings, RoundTrip, round_trip_corpus

    names = tuple(s.strip() for s in splits.split(",") if s.strip())
    if not names or len(set(names)) != len(names):
        raise CtxmtError(f"--splits {splits!r}: give prepared split names, comma-separated, each once "
                         "(e.g. train,valid)")
    job = RoundTrip(data, out, opts["reverse"], opts["forward"], names, opts["group_size"], opts["stride"],
                    device=opts["device"], round_trip=opts["round_trip"], seed=opts["seed"])
    log = _progress_log(opts["log_format"])
    try:
        meta = round_trip_corpus(job, PassSettings(beam=opts["beam"], force=force), say=log.message,
                                 progress=log.update)
    finally:
        log.close()
    sizes = ", ".join(f"{k}: {v['sentences']} groups / {v['documents']} docs" for k, v in meta["splits"].items())
    return f"prepared {out} (DocRepair, {meta['tgt_lang']} → {meta['tgt_lang']}, groups of {job.group_size}; {sizes})"


def _progress_log(log_format: str | None):
    """Progress of a translation pass on stderr (stdout keeps the command's summary line) in ``log_format``."""
    from ctxmt_cli.logs import CountLog

    return CountLog.on_stderr(log_format, "documents")


@user_errors
def first_pass(
    checkpoint: Path = typer.Option(..., "--checkpoint", "-c", help="the model that translates (sentence-level "
                                    "for DocRepair; any family works)"),
    data: Path = typer.Option(..., help="prepared dataset directory"),
    split: str = typer.Option(..., help="prepared split to translate"),
    name: str = typer.Option("first-pass", help="stream name: files {split}.{name}.stream.* beside the split"),
    from_: str = typer.Option("src", "--from", help="src (the split's source side) | tgt (its target side, with a "
                              "target → source model) | NAME (another stream of the split)"),
    beam: Beam = None,
    batch_docs: BatchDocs = None,
    chunk_docs: int = typer.Option(1024, **COUNT, help="documents translated between two appends (the resume unit)"),
    device: Device = "auto",
    force: bool = typer.Option(False, help="replace an existing stream (finished, or unfinished from other settings)"),
    log_format: LogFormat = None,
):
    """Translate one side of a prepared split sentence by sentence and store it beside the split as a stream
    (token ids + text, the split's documents); an interrupted run resumes where it stopped."""
    from ctxmt_cli.data.store import PreparedData
    from ctxmt_cli.data.streams import check_stream_name
    from ctxmt_cli.decode.first_pass import PassSettings, write_first_pass
    from ctxmt_cli.models.loading import load_model, torch_device

    check_stream_name(name)
    prepared = PreparedData(data)
    prepared.split(split)
    loaded = load_model(checkpoint, device=torch_device(device))
    log = _progress_log(log_format)
    try:
        record = write_first_pass(prepared, split, name, loaded, checkpoint, source=from_,
                                  settings=PassSettings(beam, batch_docs, chunk_docs, force), say=log.message,
                                  progress=log.update)
    finally:
        log.close()
    typer.echo(f"wrote {data / f'{split}.{name}.stream.bin'} and .txt ({record['sentences']} sentences, "
               f"{record['documents']} documents, {record['language']})")


def register(app: typer.Typer) -> None:
    """Add ``first-pass`` to the app."""
    app.command(name="first-pass")(first_pass)
