"""The ``ctxmt`` command line, assembled in one place: each command group's module registers its commands.

Each command parses its options, loads, and calls one function; torch and the heavy modules are imported inside
the commands so ``--help`` is instant. Errors a user can cause print one line on stderr and exit with code 2: a
:class:`~ctxmt_cli.errors.CtxmtError`, an OS error the user can fix (a full disk, a permission) and a bad option
value (click's usage error, which would otherwise print a usage box).
"""

from __future__ import annotations

import sys

import typer

from ctxmt_cli.cli import (
    analysis,
    benchmark,
    convert,
    data,
    docrepair,
    evaluate,
    export,
    package,
    prepare,
    quickstart,
    serve,
    train,
    translate,
)
from ctxmt_cli.cli.errors import OneLineGroup
from ctxmt_cli.heap import keep_freed_memory

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
    keep_freed_memory()                  # every command: tensors reuse freed heap memory (ctxmt_cli.heap)


#: command groups in the order ``ctxmt --help`` lists their commands
GROUPS = (prepare, data, train, translate, evaluate, quickstart, benchmark, analysis, docrepair, package, serve,
          export, convert)
for group in GROUPS:
    group.register(app)


def main() -> None:  # pragma: no cover - console entry point
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
