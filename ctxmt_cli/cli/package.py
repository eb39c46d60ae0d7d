"""The commands on what ships with ctxmt and what a checkpoint holds: ``recipes list|show|copy`` and ``inspect``.

Registered on the app by :func:`register`. Listing recipes reads YAML only;
``inspect`` imports torch inside the command, so ``--help`` stays instant.
"""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path

import typer

from ctxmt_cli.cli.completion import complete_recipe, complete_recipe_folder, complete_recipe_or_folder
from ctxmt_cli.cli.errors import OneLineGroup, user_errors
from ctxmt_cli.family_catalog import PACKAGED
from ctxmt_cli.paths import check_output_dir

#: The model families a packaged recipe can name (``model.family``): the family catalog's
Family = Enum("Family", [(name, name) for name in PACKAGED], type=str)


recipes_app = typer.Typer(
    cls=OneLineGroup, no_args_is_help=True, pretty_exceptions_enable=False,
    help="The recipes that ship with ctxmt: list them, print one, copy them to edit. Every command that takes a "
         "recipe takes its NAME (FOLDER/FILE, .yaml optional) as well as a path; an existing file wins.",
)


@recipes_app.command("list")
@user_errors
def list_recipes(
    folder: str | None = typer.Argument(None, metavar="[FOLDER]", autocompletion=complete_recipe_folder,
                                           help="only this folder's recipes (e.g. quickstart, yang2023_hanoit)"),
    family: Family | None = typer.Option(None, help="only recipes of this model family"),
):
    """One line per packaged recipe: NAME, model family, what it is (its description or the paper row)."""
    from ctxmt_cli.recipe_catalog import packaged_recipes

    found = [r for r in packaged_recipes(folder) if family is None or r.family() == family.value]
    width = max((len(r.name) for r in found), default=0)
    for recipe in found:
        typer.echo(f"{recipe.name:<{width}}  {recipe.family():<8}  {recipe.summary()}")
    typer.echo(f"{len(found)} recipes; `ctxmt recipes show NAME` prints one, `ctxmt train NAME` trains it", err=True)


@recipes_app.command("show")
@user_errors
def show_recipe(name: str = typer.Argument(..., metavar="NAME", autocompletion=complete_recipe,
                                           help="recipe name (or path)")):
    """Print a recipe file as it ships, header comments included."""
    from ctxmt_cli.recipe_catalog import read_recipe_text, resolve_recipe

    typer.echo(read_recipe_text(resolve_recipe(name)), nl=False)


@recipes_app.command("copy")
@user_errors
def copy_recipe(
    name: str = typer.Argument(..., metavar="NAME", autocompletion=complete_recipe_or_folder,
                               help="recipe name, or a FOLDER for all of its files"),
    out: Path = typer.Option(..., "--out", "-o", metavar="DIR", help="directory to copy into (created if missing)"),
):
    """Copy a packaged recipe (or a whole folder) into --out DIR to edit it; an existing file is never overwritten."""
    from ctxmt_cli.recipe_catalog import RECIPES_DIR, copy_recipes

    check_output_dir(out, "--out", inputs=[RECIPES_DIR])      # never into the packaged recipes themselves
    for path in copy_recipes(name, out):
        typer.echo(f"wrote {path}")


def _table(info: dict):
    """The rich table of ``ctxmt inspect``: one row per figure, grouped."""
    from rich.table import Table

    vocab, train = info["vocabulary"], info["training"]
    languages = f"{vocab['source_language'] or '?'} → {vocab['target_language'] or '?'}"
    if train["best"] is None:
        best = "—"
    else:
        best = f"{train['best']:.4f} ({train['early_stop_on']}, step {train['best_step']})"
    rows = [
        ("checkpoint", info["path"]), ("recipe name", info["name"]), ("family", info["family"]),
        ("parameters", f"{info['parameters']:,}"), ("written by", f"ctxmt {info['ctxmt_version']} "
                                                                  f"(format {info['format']}, {info['container']})"),
        ("vocabulary", f"source {vocab['source_size']:,} / target {vocab['target_size']:,} "
                       f"({'joint' if vocab['joint'] else 'separate'}; Moses {'yes' if vocab['moses'] else 'no'})"),
        ("languages", languages), ("vocabulary fingerprint", str(vocab["fingerprint"])),
        ("step / epoch", f"{train['step']} / {train['epoch']}"), ("best", best),
        ("validations", str(train["validations"])), ("world size", str(train["world_size"] or "—")),
        ("resumable", "yes (optimiser state inside)" if train["resumable"] else "no (weights only)"),
        ("tensor hashes", f"sha256 of {info['tensor_hashes']} tensors, all match" if info.get("tensor_hashes")
         else "none (written before ctxmt recorded them)"),
    ]
    imported = info.get("imported_from")
    if imported:
        model = f"{imported.get('kind')} model {imported.get('name_or_path') or '?'}"
        rows.append(("imported from", f"{model} ({imported.get('folder')}; "
                                      f"transformers {imported.get('transformers_version')})"))
    if train["averaged_from"]:
        rows.append(("averaged from", ", ".join(train["averaged_from"])))
    for depth, start in enumerate(train["init_from"]):
        rows.append(("started from" if depth == 0 else "  which started from",
                     f"{start['path']} ({start['family']}, step {start['step']}; loaded {start['loaded']} tensors, "
                     f"new {start['new']}, skipped {start['skipped']})"))
    for change in train["recipe_changes"]:
        rows.append((f"recipe changed at step {change.get('step')}",
                     ", ".join(f"{k} {old} → {new}" for k, (old, new) in (change.get("changed") or {}).items())))
    table = Table(show_header=False, title="ctxmt checkpoint")
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")                 # a long path wraps, never loses its end
    for key, value in rows:
        table.add_row(key, value)
    return table


@user_errors
def inspect_checkpoint(
    checkpoint: Path = typer.Option(..., "--checkpoint", "-c", metavar="CKPT", help="checkpoint file "
                                    "(checkpoint_*.pt or .safetensors)"),
    as_json: bool = typer.Option(False, "--json", help="one JSON object on stdout instead of the table"),
):
    """A checkpoint's recipe (resolved), family, parameter count, vocabulary and training state."""
    from ctxmt_cli.models.checkpoint_info import checkpoint_info

    info = checkpoint_info(checkpoint)
    if as_json:
        typer.echo(json.dumps(info, indent=2, ensure_ascii=False))
        return
    import yaml
    from rich.console import Console

    from ctxmt_cli.tables import print_table

    console = Console()
    print_table(_table(info), console)
    console.print("[bold]recipe (resolved):[/bold]")
    typer.echo(yaml.safe_dump(info["recipe"], sort_keys=False, allow_unicode=True), nl=False)


def register(app: typer.Typer) -> None:
    """Add ``recipes`` and ``inspect`` to the ``ctxmt`` app."""
    app.add_typer(recipes_app, name="recipes")
    app.command(name="inspect")(inspect_checkpoint)

