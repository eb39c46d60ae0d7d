"""ctxmt_cli.cli.errors: while a command runs, warnings are one line each on stderr and stdout keeps the output."""

from __future__ import annotations

import logging
import warnings

import typer
from typer.testing import CliRunner

from ctxmt_cli.cli.errors import OneLineGroup, warnings_on_stderr


def _app() -> typer.Typer:
    app = typer.Typer(cls=OneLineGroup)

    @app.command()
    def speak():
        typer.echo("output 1")
        warnings.warn("a python warning\nover two lines", UserWarning, stacklevel=1)
        logging.getLogger("ctxmt_cli.decode.translator").warning("a %s warning", "logged")
        typer.echo("output 2")

    @app.command()
    def other():
        pass

    return app


def test_warnings_go_to_stderr_one_line_each():
    before = warnings.showwarning, list(logging.getLogger("ctxmt_cli").handlers)
    result = CliRunner().invoke(_app(), ["speak"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == ["output 1", "output 2"]
    python, logged = result.stderr.splitlines()
    assert python.startswith("ctxmt: warning: a python warning over two lines (UserWarning from test_cli_errors.py:")
    assert logged == "ctxmt: warning: a logged warning"
    assert (warnings.showwarning, list(logging.getLogger("ctxmt_cli").handlers)) == before     # restored


def test_nested_use_keeps_one_handler():
    logger = logging.getLogger("ctxmt_cli")
    with warnings_on_stderr(), warnings_on_stderr():
        assert len(logger.handlers) == 1 and logger.propagate is False      # a warning prints once
    assert logger.propagate is True
