"""The analysis commands of the ``ctxmt`` command line: ``analyze-attention``, ``cxmi`` and ``plot``.

Kept beside ``cli.py`` (which registers them through :func:`register`) so neither module grows past
a readable size. Like every command, each parses its options and calls one function of
:mod:`ctxmt_cli.analysis`, importing torch and matplotlib inside the command so ``--help`` stays instant.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ctxmt_cli.cli_errors import check_device, user_errors

#: command name -> function; each is registered on the app by :func:`register`
COMMANDS: dict = {}


def cxmi(
    checkpoint: Path = typer.Option(..., "--checkpoint", "-c", help="model checkpoint"),
    data: Optional[Path] = typer.Option(None, help="prepared dir (default: the checkpoint recipe's data.path)"),
    split: str = typer.Option("test", help="prepared split whose reference sentences are scored"),
    context: Optional[int] = typer.Option(None, help="K context sentences per side that has context (default: the "
                                          "model's own); a sentence-level model reads none, so its CXMI is 0"),
    random_context: bool = typer.Option(False, "--random-context", help="control: context sentences (source and "
                                        "target, aligned) drawn from another document, seeded"),
    seed: int = typer.Option(1, help="seed of --random-context"),
    out: Optional[Path] = typer.Option(None, help="write the figures to this JSON file"),
    per_sentence: Optional[Path] = typer.Option(None, help="write P-CXMI (one JSON line per sentence) to this file"),
    max_tokens: int = typer.Option(4096, help="token budget per scoring batch"),
    device: str = typer.Option("cpu", callback=check_device, help="cpu | cuda | cuda:N"),
):
    """Context usage (CXMI, Fernandes et al. 2021): log q(y|x,C) - log q(y|x) of the same model, per token and per
    sentence, over a prepared split's reference sentences."""
    from ctxmt_cli.analysis.cxmi import CxmiRequest, render, run_cxmi

    request = CxmiRequest(checkpoint=checkpoint, data=data, split=split, context=context, random_context=random_context,
                          seed=seed, max_tokens=max_tokens, device=device, out=out, per_sentence=per_sentence)
    typer.echo(render(run_cxmi(request)))


COMMANDS["cxmi"] = cxmi


def plot(
    run_dirs: list[Path] = typer.Argument(..., metavar="RUN_DIR", help="training directories (train.save_dir) "
                                          "holding metrics.jsonl; several are overlaid, one colour each"),
    out: Optional[Path] = typer.Option(None, help="directory for the PNGs (default: RUN_DIR/plots of the first run)"),
    force: bool = typer.Option(False, help="overwrite PNGs that already exist"),
):
    """Training curves (Lupo et al. 2022, Figure 3): losses, current / context loss ratio, learning rate, tokens/s
    and every loss term the family logs, one PNG per quantity against the update step (needs matplotlib)."""
    from ctxmt_cli.analysis.curves import plot_runs

    written = plot_runs(run_dirs, out, force)
    for path in written:
        typer.echo(str(path))
    typer.echo(f"{len(written)} figures from {len(run_dirs)} run(s)")


COMMANDS["plot"] = plot


def register(app: typer.Typer) -> None:
    """Add every analysis command to ``app`` (errors become one line, exit 2)."""
    for name, fn in COMMANDS.items():
        app.command(name=name)(user_errors(fn))
