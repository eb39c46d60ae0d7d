"""The ``ctxmt`` command line: one module per command group, the Typer app assembled in :mod:`ctxmt_cli.cli.app`."""

from ctxmt_cli.cli.app import app, main

__all__ = ["app", "main"]
