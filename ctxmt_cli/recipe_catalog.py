"""The recipes (the checkout's top-level ``recipes/``, shipped inside the wheel as ``ctxmt_cli/recipes/``) and how a
recipe argument is found.

A recipe argument is a path or a name. An existing file wins. Otherwise the argument names a packaged
recipe: ``FOLDER/FILE`` with or without ``.yaml`` (``lupo2022_focused_concat/en_de_s4to4_shift_cd``), or
the file name alone where a single folder has it. A path under ``recipes/`` (``recipes/quickstart/concat.yaml``,
as a checkout spells them) names the packaged recipe of the same name where no such file exists, so commands
written for a checkout keep working after a plain ``pip install``.
An existing directory is not a recipe: ``ctxmt quickstart --out quickstart`` writes ``quickstart/concat/``,
and ``ctxmt train quickstart/concat`` in that folder still means the packaged recipe.

This module imports nothing heavy (no torch): listing recipes reads YAML only.
"""

from __future__ import annotations

import contextlib
import difflib
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import yaml

from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.outputs import copy_atomic, remove_stale
from ctxmt_cli.yaml_loader import YamlLimitError, read_capped


def shipped_folder(inside: str, top: str) -> Path:
    """A folder of files that ship with ctxmt: ``ctxmt_cli/INSIDE`` in an installed wheel (setup.py copies it
    there), else the checkout's top-level ``TOP/`` folder (a checkout, an editable install)."""
    packaged = Path(__file__).resolve().parent / inside
    return packaged if packaged.is_dir() else Path(__file__).resolve().parents[1] / top


#: the packaged recipes, one folder per paper (or the quickstart's systems)
RECIPES_DIR = shipped_folder("recipes", "recipes")
SUFFIXES = (".yaml", ".yml")
#: how a checkout's commands spell a recipe (and spelled it while the folder sat inside the package)
LEGACY_PREFIXES = ("./recipes/", "recipes/", "ctxmt_cli/recipes/")
LIST_HINT = "see `ctxmt recipes list` for the packaged recipes, or give the path to a YAML file"
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)   # the C loader where PyYAML has it: 200 files in a blink


@dataclass(frozen=True)
class RecipeInfo:
    """One packaged recipe: its name (``FOLDER/FILE`` without ``.yaml``) and file."""

    name: str
    path: Path

    @property
    def folder(self) -> str:
        """The folder (paper) the recipe belongs to."""
        return self.name.split("/", 1)[0]

    @cached_property
    def raw(self) -> dict:
        """The recipe file as plain YAML (not validated)."""
        return yaml.load(self.path.read_text(encoding="utf-8"), Loader=_Loader) or {}

    def family(self) -> str:
        """The recipe's model family (``model.family``; ``sentence`` when the recipe leaves it out)."""
        return str((self.raw.get("model") or {}).get("family", "sentence"))

    def summary(self) -> str:
        """One line on the system: its ``description``, else the header's ``Reproduces:`` line, else its first."""
        if self.raw.get("description"):
            return str(self.raw["description"])
        header = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            if not line.startswith("#"):
                break
            header.append(line.lstrip("#").strip())
        found = [line for line in header if line.startswith("Reproduces:")]
        return (found or header or [""])[0]


def packaged_recipes(folder: str | None = None) -> list[RecipeInfo]:
    """Every packaged recipe (sorted by name), or those of one ``folder``."""
    if folder is not None and folder not in recipe_folders():
        raise CtxmtError(f"no recipe folder {folder!r}; folders: {', '.join(recipe_folders())}")
    base = RECIPES_DIR / folder if folder else RECIPES_DIR
    found = [p for p in base.rglob("*") if p.suffix in SUFFIXES and p.is_file()]
    return sorted((RecipeInfo(_name_of(p), p) for p in found), key=lambda r: r.name)


def recipe_folders() -> list[str]:
    """The folders of packaged recipes (one per paper, and ``quickstart``)."""
    return sorted(p.name for p in RECIPES_DIR.iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))


def _name_of(path: Path) -> str:
    """``.../recipes/quickstart/concat.yaml`` -> ``quickstart/concat``."""
    return path.relative_to(RECIPES_DIR).with_suffix("").as_posix()


def _as_name(text: str) -> str:
    """A recipe argument as a packaged name: no legacy ``recipes/`` prefix, no ``.yaml`` suffix."""
    name = text.replace("\\", "/")
    for prefix in LEGACY_PREFIXES:
        if name.startswith(prefix):
            name = name[len(prefix):]
            break
    for suffix in SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def find_packaged(text: str) -> Path:
    """The file of the packaged recipe ``text`` names; an unknown or ambiguous name is a one-line error."""
    if not text.strip():        # Path('') is the current directory: never report an empty name as "a directory"
        raise CtxmtError(f"the recipe name is empty; give a recipe YAML file or a packaged NAME: {LIST_HINT}")
    name = _as_name(text)
    known = {r.name: r.path for r in packaged_recipes()}
    if name in known:
        return known[name]
    if "/" not in name:                                  # a file name alone: fine where one folder has it
        matches = sorted(n for n in known if n.rsplit("/", 1)[-1] == name)
        if len(matches) == 1:
            return known[matches[0]]
        if matches:
            raise CtxmtError(f"recipe name {text} is in several folders ({', '.join(matches)}); "
                             "give FOLDER/NAME")
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.75)
    hint = f"; did you mean {close[0]}?" if close else ""
    if Path(text).is_dir():
        raise CtxmtError(f"recipe is a directory, not a file: {text} (and no packaged recipe of that name{hint}); "
                         f"{LIST_HINT}")
    if Path(text).exists():                              # a device, a FIFO: reading could block forever
        raise CtxmtError(f"recipe is not a regular file: {text} (and no packaged recipe of that name{hint}); "
                         f"{LIST_HINT}")
    raise CtxmtError(f"recipe not found: {text} (no such file, and no packaged recipe of that name{hint}); {LIST_HINT}")


def resolve_recipe(arg: str | Path) -> Path:
    """The recipe file an argument means: an existing file, else the packaged recipe it names."""
    path = Path(arg)
    if path.is_file():
        return path
    return find_packaged(str(arg))


def read_recipe_text(path: Path, kind: str = "recipe") -> str:
    """A recipe file's (or another YAML file's: ``kind``) text; bytes that are not UTF-8 (a binary file, a Latin-1
    file) are one line naming the line; so is a file larger than any recipe (:data:`~ctxmt_cli.yaml_loader.MAX_BYTES`),
    read no further than that."""
    try:
        data = read_capped(path)
    except YamlLimitError as err:
        raise CtxmtError(f"{path}: {err.what}, the most a {kind} may be; give the right file (a recipe is a few "
                         "KB of YAML)") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise CtxmtError(f"{path}:{line}: not UTF-8 text (byte 0x{data[err.start]:02x}); a {kind} is a YAML text "
                         "file: give the right file, or save it as UTF-8 (e.g. iconv -f LATIN1 -t UTF-8)") from None


def copy_recipes(name: str, dest: Path) -> list[Path]:
    """Copy a packaged recipe, or every file of a recipe folder, into directory ``dest``; returns the copies.

    Nothing is overwritten: if any target file exists, nothing is written at all.
    """
    folder = _as_name(name).strip("/")
    if folder in recipe_folders():
        sources = sorted(p for p in (RECIPES_DIR / folder).iterdir() if p.is_file())
    else:
        sources = [find_packaged(name)]
    dest = Path(dest)
    if dest.exists() and not dest.is_dir():
        raise CtxmtError(f"{dest} is a file, not a directory; give a directory (it is created if missing)")
    targets = [dest / p.name for p in sources]
    taken = [t for t in targets if t.exists()]
    if taken:
        raise CtxmtError(f"{taken[0]} already exists; nothing copied: remove it or choose another directory")
    made = [p for p in (dest, *dest.parents) if not p.exists()]         # the folders this copy creates
    dest.mkdir(parents=True, exist_ok=True)
    remove_stale(dest)
    done = []
    try:
        for source, target in zip(sources, targets, strict=True):
            done.append(copy_atomic(source, target))     # a full disk leaves no empty copy behind to block a retry
    except BaseException:                  # all or nothing: no part of a folder, no empty folder left behind
        for path in done:
            path.unlink(missing_ok=True)
        for folder in made:                              # the deepest first
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise
    return targets
