"""The commands on the corpus cards: ``data list`` and ``data show NAME``.

Registered on the app by :func:`register`. A card (``data/NAME.yaml`` in a checkout, ``ctxmt_cli/corpora/`` in a
wheel) names a corpus, where to get it, and the exact ``ctxmt prepare`` command of each prepared directory the
recipes read; both commands read YAML only.
"""

from __future__ import annotations

import typer

from ctxmt_cli.cli.completion import complete_card
from ctxmt_cli.cli.errors import OneLineGroup, user_errors

data_app = typer.Typer(
    cls=OneLineGroup, no_args_is_help=True, pretty_exceptions_enable=False,
    help="The corpus cards: one per corpus the recipes name, with its languages, publisher, licence, citation, "
         "where to get it, and the exact `ctxmt prepare` command of each prepared directory the recipes read.",
)


def _recipes_note(names: list[str]) -> str:
    """``5 recipes`` / ``1 recipe`` / ``no recipe``."""
    return f"{len(names)} recipe{'' if len(names) == 1 else 's'}" if names else "no recipe"


@data_app.command("list")
@user_errors
def list_cards():
    """One line per prepared directory: the corpus card, its languages, the directory, how many recipes read it."""
    from ctxmt_cli.data.cards import load_cards, recipes_by_path

    cards, readers = load_cards(), recipes_by_path()
    rows = [(c.name if i == 0 else "", f"{c.languages.source}→{c.languages.target}" if i == 0 else "",
             p.path, _recipes_note(readers.get(p.path, [])))
            for c in cards for i, p in enumerate(c.preparations)]
    header = ("NAME", "LANGUAGES", "PREPARED DIRECTORY", "READ BY")
    widths = [max(len(row[k]) for row in [header, *rows]) for k in range(3)]
    for row in [header, *rows]:
        typer.echo("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)) + "  " + row[3])
    typer.echo(f"{len(cards)} corpus cards; `ctxmt data show NAME` prints one", err=True)


def _block(dumper, text: str):
    """Multi-line strings (commands, shell steps) as YAML literal blocks, the way the cards write them."""
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


@data_app.command("show")
@user_errors
def show_card(name: str = typer.Argument(..., metavar="NAME", autocompletion=complete_card,
                                         help="card name, or a prepared directory (data/europarl_enfr_8k or "
                                         "europarl_enfr_8k)")):
    """Print a card (as YAML), each preparation followed by the recipes that read it."""
    import yaml

    from ctxmt_cli.data.cards import find_card, recipes_by_path

    card, readers = find_card(name), recipes_by_path()
    raw = card.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
    for prep in raw["preparations"]:
        prep["recipes"] = readers.get(prep["path"], [])

    class Dumper(yaml.SafeDumper):
        pass

    Dumper.add_representer(str, _block)
    typer.echo(yaml.dump(raw, Dumper=Dumper, sort_keys=False, allow_unicode=True, width=110), nl=False)


def register(app: typer.Typer) -> None:
    """Add ``data`` to the ``ctxmt`` app."""
    app.add_typer(data_app, name="data")
