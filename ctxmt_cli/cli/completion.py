"""Shell completion of the values ctxmt knows by name: packaged recipes, recipe folders, quickstart systems and
corpus cards.

Typer completes commands and options itself (``ctxmt --install-completion``); these functions are the
``autocompletion=`` of the arguments that take a name. Each offers the names that start with the word typed so
far; where none does, a recipe argument (a name or a path) offers file paths instead: the folders and YAML
files that start with it. They read YAML file names only, so a TAB costs no model and no torch import.
"""

from __future__ import annotations

from pathlib import Path


def complete_path(incomplete: str, suffixes: tuple[str, ...] = ()) -> list[str]:
    """Folders (``NAME/``) and files (with one of ``suffixes``; any file without) whose path starts with
    ``incomplete``; hidden entries only when the name typed starts with a dot. A single folder is followed by its
    own entries, so the shell completes into it instead of ending the word there."""
    head, sep, stem = incomplete.rpartition("/")
    prefix = head + sep
    base = Path(prefix or ".").expanduser()
    try:
        entries = sorted(base.iterdir())
    except OSError:                                      # no such folder, not a folder, not readable
        return []
    found = []
    for entry in entries:
        if not entry.name.startswith(stem) or (entry.name.startswith(".") and not stem.startswith(".")):
            continue
        if entry.is_dir():
            found.append(f"{prefix}{entry.name}/")
        elif not suffixes or entry.suffix in suffixes:
            found.append(f"{prefix}{entry.name}")
    if len(found) == 1 and found[0].endswith("/"):
        return found + complete_path(found[0], suffixes)
    return found


def complete_recipe(incomplete: str) -> list[str]:
    """``ctxmt train RECIPE``, ``recipes show NAME``: the packaged recipe names starting with ``incomplete``
    (``quickstart/c`` -> ``quickstart/caching``, ``quickstart/concat``, ...), else the YAML files and folders
    whose path does."""
    from ctxmt_cli.recipe_catalog import SUFFIXES, packaged_recipes

    names = [recipe.name for recipe in packaged_recipes() if recipe.name.startswith(incomplete)]
    return names or complete_path(incomplete, SUFFIXES)


def complete_recipe_folder(incomplete: str) -> list[str]:
    """``ctxmt recipes list FOLDER``: the recipe folders starting with ``incomplete``."""
    from ctxmt_cli.recipe_catalog import recipe_folders

    return [folder for folder in recipe_folders() if folder.startswith(incomplete)]


def complete_recipe_or_folder(incomplete: str) -> list[str]:
    """``ctxmt recipes copy NAME``: a recipe folder (all its files) or a packaged recipe name."""
    return complete_recipe_folder(incomplete) + complete_recipe(incomplete)


def complete_systems(incomplete: str) -> list[str]:
    """``ctxmt quickstart --systems a,b``: the list typed so far, completed with each quickstart system not in it
    yet whose name starts with the last item."""
    from ctxmt_cli.cli.quickstart import available_systems

    done, _, last = incomplete.rpartition(",")
    chosen = {name for name in done.split(",") if name}
    lead = done + "," if done else ""
    return [lead + name for name in available_systems() if name.startswith(last) and name not in chosen]


def complete_card(incomplete: str) -> list[str]:
    """``ctxmt data show NAME``: the corpus card names (their files' names) starting with ``incomplete``."""
    from ctxmt_cli.data.cards import card_files

    return [path.stem for path in card_files() if path.stem.startswith(incomplete)]
