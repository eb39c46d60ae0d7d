"""``python -m ctxmt_cli``: the ``ctxmt`` command line, for environments without the console script on PATH."""

from ctxmt_cli.cli import main

if __name__ == "__main__":  # pragma: no cover - run as a module
    main()
