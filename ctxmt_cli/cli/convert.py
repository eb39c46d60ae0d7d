"""``ctxmt import marian DIR --out MODEL``: a Hugging Face MarianMTModel folder (Marian / OPUS-MT) as a ctxmt
sentence-level checkpoint carrying its tokenizer (:mod:`ctxmt_cli.convert.marian`).

Registered on the app by :func:`register`; torch is imported inside the command, so ``--help`` stays instant.
"""

from __future__ import annotations

from pathlib import Path

import typer

from ctxmt_cli.cli.errors import OneLineGroup, user_errors

import_app = typer.Typer(
    cls=OneLineGroup, no_args_is_help=True, pretty_exceptions_enable=False,
    help="Import a model of another toolkit as a ctxmt checkpoint (Marian / OPUS-MT).",
)


@import_app.command("marian")
@user_errors
def import_marian(
    folder: Path = typer.Argument(..., metavar="DIR", help="a MarianMTModel folder (save_pretrained): config.json, "
                                  "model.safetensors or pytorch_model.bin, source.spm, target.spm, vocab.json"),
    out: Path = typer.Option(..., "--out", "-o", metavar="MODEL", help="checkpoint to write (.pt, or .safetensors)"),
    force: bool = typer.Option(False, "--force", help="replace an existing MODEL"),
):
    """Write a sentence-level ctxmt checkpoint that computes the Marian model exactly and carries its tokenizer:
    translate with it (ctxmt translate -c MODEL), start any family from it (train.init_from), prepare documents
    with its tokenizer (ctxmt prepare ... --vocab-from MODEL) or export it (ctxmt export ctranslate2)."""
    from ctxmt_cli.convert.marian import import_marian as run

    record = run(folder, out, force=force)
    typer.echo(f"imported {record['name_or_path'] or folder} to {out}", err=True)


def register(app: typer.Typer) -> None:
    """Add ``import`` to the ``ctxmt`` app."""
    app.add_typer(import_app, name="import")
