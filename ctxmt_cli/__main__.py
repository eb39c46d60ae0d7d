"""``python -m ctxmt_cli``: the ``ctxmt`` command line, for environments without the console script on PATH."""

from ctxmt_cli.cli import app

if __name__ == "__main__":  # pragma: no cover - run as a module
    app(prog_name="ctxmt")
