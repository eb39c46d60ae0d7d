"""``ctxmt export ctranslate2 -c CKPT -o DIR``: a checkpoint as a CTranslate2 model folder;
``ctxmt export safetensors -c CKPT -o OUT.safetensors``: its weights in a format whose loading cannot run code.

Registered on the app by :func:`register`. CTranslate2 and torch are imported inside
the command (:mod:`ctxmt_cli.export.ct2_export`), so ``--help`` stays instant and a missing ``ctranslate2`` is one
line naming the extra to install.
"""

from __future__ import annotations

from pathlib import Path

import typer

from ctxmt_cli.cli.errors import OneLineGroup, user_errors
from ctxmt_cli.cli.options import Quantization

export_app = typer.Typer(
    cls=OneLineGroup, no_args_is_help=True, pretty_exceptions_enable=False,
    help="Export a checkpoint to another inference engine (CTranslate2) or to safetensors.",
)


@export_app.command("ctranslate2")
@user_errors
def export_ctranslate2(
    checkpoint: Path = typer.Option(..., "--checkpoint", "-c", metavar="CKPT", help="model checkpoint (sentence, "
                                    "or concat without shifted positions, segment, persistent or PSE encodings)"),
    out: Path = typer.Option(..., "--out", "-o", metavar="DIR", help="folder to create: the CTranslate2 model, its "
                             "SentencePiece model(s) and ctxmt.json"),
    quantization: Quantization = typer.Option("float32", help="weight type CTranslate2 stores (int8: smaller and "
                                              "faster on CPU)"),
    force: bool = typer.Option(False, "--force", help="replace an existing --out folder"),
):
    """Write a CTranslate2 model folder; translate it with ctxmt translate DOCS --engine ctranslate2 -c DIR.
    A model CTranslate2 cannot compute exactly is refused with the option that prevents it."""
    from ctxmt_cli.export.ct2_export import export_ctranslate2 as export

    meta = export(checkpoint, out, quantization=quantization, force=force)
    typer.echo(f"exported {checkpoint} ({meta['family']}, {quantization}) to {out}", err=True)


@export_app.command("safetensors")
@user_errors
def export_safetensors(
    checkpoint: Path = typer.Option(..., "--checkpoint", "-c", metavar="CKPT", help="model checkpoint "
                                    "(checkpoint_*.pt)"),
    out: Path = typer.Option(..., "--out", "-o", metavar="OUT.safetensors", help="file to write"),
    force: bool = typer.Option(False, "--force", help="replace an existing --out file"),
):
    """Write the weights, recipe and vocabulary as safetensors (no pickle: loading it cannot run code); every
    command that takes -c CKPT reads it and translates exactly as with the .pt. It holds no optimiser state,
    so it cannot be resumed."""
    from ctxmt_cli.export.safetensors_export import export_safetensors as export

    typer.echo(f"exported {checkpoint} to {export(checkpoint, out, force=force)}", err=True)


def register(app: typer.Typer) -> None:
    """Add ``export`` to the ``ctxmt`` app."""
    app.add_typer(export_app, name="export")
