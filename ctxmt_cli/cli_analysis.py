"""The analysis commands of the ``ctxmt`` command line: ``analyze-attention``, ``cxmi`` and ``plot``.

Kept beside ``cli.py`` (which registers them through :func:`register`) so neither module grows past
a readable size. Like every command, each parses its options and calls one function of
:mod:`ctxmt_cli.analysis`, importing torch and matplotlib inside the command so ``--help`` stays instant.
"""

from __future__ import annotations

import typer

from ctxmt_cli.cli_errors import user_errors

#: command name -> function; each is registered on the app by :func:`register`
COMMANDS: dict = {}


def register(app: typer.Typer) -> None:
    """Add every analysis command to ``app`` (errors become one line, exit 2)."""
    for name, fn in COMMANDS.items():
        app.command(name=name)(user_errors(fn))
