"""The ``train`` and ``average`` commands."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from ctxmt_cli.cli.completion import complete_recipe
from ctxmt_cli.cli.errors import user_errors
from ctxmt_cli.cli.options import Device, LogFormat
from ctxmt_cli.errors import CtxmtError


@user_errors
def train_command(
    recipe: str = typer.Argument(..., metavar="RECIPE", autocompletion=complete_recipe,
                                 help="a recipe YAML file, or the NAME of a packaged recipe (`ctxmt recipes list`; "
                                 "e.g. quickstart/concat); an existing file wins"),
    set_: list[str] = typer.Option([], "--set", help="override KEY.PATH=VALUE (repeatable)"),
    resume: bool = typer.Option(False, help="continue from checkpoint_last.pt in train.save_dir (with the recipe it "
                                "was trained with: see --allow-changed)"),
    allow_changed: list[str] = typer.Option([], "--allow-changed", metavar="KEY[,KEY...]", help="with --resume: "
                                            "recipe keys (or sections) that may differ from the checkpoint's, e.g. "
                                            "train.max_steps,train.lr; each change is printed and recorded in the "
                                            "run (metrics.jsonl, the checkpoints' state.recipe_history)"),
    init_from: Path | None = typer.Option(None, "--init-from", metavar="CKPT", help="set train.init_from: start "
                                             "from this checkpoint's weights and architecture (two-step training)"),
    dry_run: bool = typer.Option(False, help="validate, print the resolved recipe and parameter count, exit"),
    device: Device = "auto",
    log_format: LogFormat = None,
):
    """Train the system a recipe describes (under torchrun: one process per device)."""
    from ctxmt_cli.config import load_recipe

    loaded = load_recipe(recipe, set_)
    if init_from is not None:      # the recipe key, set once here: the schema's field is the one definition
        loaded = loaded.model_copy(update={"train": loaded.train.model_copy(update={"init_from": str(init_from)})})
    if allow_changed and not resume:
        raise CtxmtError("--allow-changed applies to --resume only (a fresh run has nothing to differ from); "
                         "add --resume or drop it")
    from ctxmt_cli.train.resume import parse_allowed

    allowed = parse_allowed(allow_changed, loaded)
    if dry_run:
        from ctxmt_cli.cli.commands import dry_run_report

        typer.echo(dry_run_report(loaded))
        return
    from ctxmt_cli.cli.commands import train_result_lines
    from ctxmt_cli.train.trainer import train

    result = train(loaded, resume=resume, device=device, log_format=log_format, allow_changed=allowed)
    if os.environ.get("RANK", "0") == "0":  # under torchrun only rank 0 reports
        typer.echo(train_result_lines(result, log_format))


@user_errors
def average(
    checkpoint: list[Path] = typer.Option(..., "--checkpoint", "-c", metavar="CKPT", help="a checkpoint to average "
                                          "(repeat: -c A -c B ...)"),
    out: str = typer.Option(..., "--out", "-o", metavar="PATH", help="averaged checkpoint to write (not one of the "
                            "inputs)"),
    force: bool = typer.Option(False, help="overwrite an existing --out"),
):
    """Average the weights of several checkpoints of one model."""
    from ctxmt_cli.cli.commands import average_files

    typer.echo(f"wrote {average_files(list(checkpoint), out, force=force)}")


def register(app: typer.Typer) -> None:
    """Add ``train`` and ``average`` to the app."""
    app.command(name="train")(train_command)
    app.command(name="average")(average)
