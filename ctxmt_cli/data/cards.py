"""Corpus cards: one YAML file per corpus the recipes name (the checkout's top-level ``data/NAME.yaml``, shipped
inside the wheel as ``ctxmt_cli/corpora/NAME.yaml``).

A card says what a corpus is (languages, publisher, licence, citation, where to get it, what a document is) and
how each prepared directory the recipes read (``data.path``) is made from the publisher's files: the exact
``ctxmt prepare`` command of the recipe headers and, where they were measured, the sentence and document counts a
correct preparation gives. Cards are validated by a typed schema (unknown keys are errors) and a malformed card is
one line naming the file and the key path.

This module imports nothing heavy (no torch): listing cards reads YAML only.
"""

from __future__ import annotations

import difflib
import re
import shlex
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ctxmt_cli.config import read_yaml_file
from ctxmt_cli.config_base import MAX_COUNT, MAX_VOCAB
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.recipe_catalog import packaged_recipes, shipped_folder

SplitName = Literal["train", "valid", "test"]
LIST_HINT = "see `ctxmt data list` for the corpus cards"


#: the corpus cards, one ``NAME.yaml`` per corpus (``ctxmt_cli/corpora/`` in a wheel, ``data/`` in a checkout)
CARDS_DIR = shipped_folder("corpora", "data")


class CardSection(BaseModel):
    """Base of every part of a card: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid")


class Languages(CardSection):
    """The translation direction the recipes use."""

    source: str = Field(min_length=2, description="source language code (ISO 639-1)")
    target: str = Field(min_length=2, description="target language code (ISO 639-1)")


class Citation(CardSection):
    """A work to cite: authors, year and title (the venue and a link where known)."""

    authors: str = Field(min_length=1, description="the authors as the paper lists them")
    year: int = Field(ge=1990, le=2100, description="year of publication")
    title: str = Field(min_length=1, description="title of the paper")
    venue: str | None = Field(None, description="where it appeared")
    url: str | None = Field(None, description="a link to the paper")


class Download(CardSection):
    """Where one part of the corpus is published, and which of its files the preparation reads."""

    url: str = Field(pattern=r"^https?://", description="the publisher's page or repository")
    files: list[str] = Field(min_length=1, description="the files (or folders) to get from it")
    note: str | None = Field(None, description="how to obtain them, where it is not a plain download")


class SplitCounts(CardSection):
    """What a correct preparation holds in one split."""

    sentences: int = Field(ge=1, le=MAX_COUNT * 1000,
                           description="sentence pairs after preparation (and cleaning, where asked)")
    documents: int = Field(ge=1, le=MAX_COUNT * 1000, description="documents after preparation")


class Check(CardSection):
    """How the counts were verified: the command run on files found here, with the stated replacements."""

    needs: list[str] = Field(default_factory=list, description="paths the command reads (relative to the "
                             "repository root, e.g. ../shared/data/...); the check runs only where all exist")
    replace: dict[str, str] = Field(default_factory=dict, description="literal replacements made in the command "
                                    "before it runs (stand-ins for files that are not public)")
    splits: list[SplitName] = Field(min_length=1, description="the splits whose counts the check verifies")


class Preparation(CardSection):
    """One prepared directory the recipes read, and the command that makes it from the publisher's files."""

    path: str = Field(min_length=1, description="the prepared directory, exactly the recipes' data.path")
    before: str | None = Field(None, description="shell steps to run first (conversions, variables)")
    command: str = Field(description="the exact `ctxmt prepare ...` command, as the recipe headers give it")
    vocab_size: int | None = Field(None, ge=8, le=MAX_VOCAB, description="SentencePiece pieces per model")
    counts: dict[SplitName, SplitCounts] = Field(default_factory=dict, description="measured counts per split")
    check: Check | None = Field(None, description="how the counts were verified")
    notes: str | None = Field(None, description="anything else about this preparation")

    @field_validator("command")
    @classmethod
    def _is_prepare(cls, value: str) -> str:
        if not command_args(value)[:2] == ["ctxmt", "prepare"]:
            raise ValueError("must be a `ctxmt prepare ...` command")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Preparation:
        out = option_value(command_args(self.command), "--out")                   # a flag as data
        if out != self.path:                                                        # a flag as data (below)
            raise ValueError(f"the command writes --out {out}, not the preparation's path {self.path}")
        missing = [s for s in (self.check.splits if self.check else []) if s not in self.counts]
        if missing:
            raise ValueError(f"check.splits names {', '.join(missing)} but counts has no such split")
        return self


class Card(CardSection):
    """One corpus: what it is, where to get it, and how the recipes' prepared directories are made from it."""

    name: str = Field(pattern=r"^[a-z0-9_]+$", description="the card's name: its file name without .yaml")
    title: str = Field(min_length=1, description="one line on the corpus")
    languages: Languages
    publisher: str = Field(min_length=1, description="who publishes the files")
    licence: str = Field(min_length=1, description="the terms of use, as the publisher states them")
    citations: list[Citation] = Field(min_length=1, description="the works to cite, the corpus's own first")
    download: list[Download] = Field(min_length=1, description="where to get the files")
    notes: str = Field(min_length=1, description="what a document is, and what else to know")
    preparations: list[Preparation] = Field(min_length=1, description="the prepared directories of the recipes")

    @model_validator(mode="after")
    def _unique_paths(self) -> Card:
        paths = [p.path for p in self.preparations]
        twice = sorted({p for p in paths if paths.count(p) > 1})
        if twice:
            raise ValueError(f"preparation path {twice[0]} is given twice")
        return self


def command_args(text: str) -> list[str]:
    """A command as its arguments: backslash line continuations joined, split as a POSIX shell would."""
    try:
        return shlex.split(join_command(text))
    except ValueError as err:
        raise ValueError(f"the command does not parse as a shell command ({err})") from None


def join_command(text: str) -> str:
    """A multi-line command on one line: ``\\`` continuations and runs of white space become one space."""
    return " ".join(re.sub(r"\\\s*\n", " ", text).split())


def option_value(args: list[str], option: str) -> str | None:
    """The value given to ``option`` (``--out X`` or ``--out=X``), the last one where it is repeated."""
    found = None
    for i, arg in enumerate(args):
        if arg == option and i + 1 < len(args):
            found = args[i + 1]
        elif arg.startswith(option + "="):
            found = arg.split("=", 1)[1]
    return found


def _error_line(err: ValidationError, source: Path) -> str:
    """The first problem of a card as one line: file, key path, what is wrong and how to fix it."""
    first = err.errors()[0]
    path = ".".join(str(p) for p in first["loc"]) or "(top level)"
    more = f" [+{len(err.errors()) - 1} more]" if len(err.errors()) > 1 else ""
    if first["type"] == "extra_forbidden":
        return f"{source}: unknown key '{path}'{more}; remove or rename it (the card schema: ctxmt_cli/data/cards.py)"
    if first["type"] == "missing":
        return f"{source}: {path}: missing{more}; add it (the card schema: ctxmt_cli/data/cards.py)"
    msg = first["msg"].removeprefix("Value error, ")
    given = first.get("input")
    shown = "" if isinstance(given, (dict, list)) or given is None else f" (got {given!r})"
    return f"{source}: {path}: {msg}{shown}{more}"


def load_card(path: str | Path) -> Card:
    """Read and validate one card; any problem is one CtxmtError line naming the file and the key path."""
    path = Path(path)
    raw = read_yaml_file(path, "corpus card")
    if not isinstance(raw, dict):
        raise CtxmtError(f"{path}: a card is a YAML mapping (name, title, languages, ...); this file holds "
                         f"{type(raw).__name__}: give a card file")
    try:
        card = Card.model_validate(raw)
    except ValidationError as err:
        raise CtxmtError(_error_line(err, path)) from None
    if card.name != path.stem:
        raise CtxmtError(f"{path}: name: {card.name!r} is not the file's name; rename one so both read {path.stem!r}")
    return card


def card_files(folder: Path | None = None) -> list[Path]:
    """The card files (sorted by name) of ``folder``, by default :data:`CARDS_DIR`."""
    folder = CARDS_DIR if folder is None else Path(folder)
    return sorted(p for p in folder.glob("*.yaml") if p.is_file()) if folder.is_dir() else []


def load_cards(folder: Path | None = None) -> list[Card]:
    """Every card, validated, sorted by name; a preparation path given by two cards is an error."""
    cards = [load_card(p) for p in card_files(folder)]
    owner: dict[str, str] = {}
    for card in cards:
        for prep in card.preparations:
            if owner.setdefault(prep.path, card.name) != card.name:
                raise CtxmtError(f"preparation path {prep.path} is in two cards ({owner[prep.path]}, {card.name}); "
                                 "keep it in one")
    return cards


def find_card(name: str, cards: list[Card] | None = None) -> Card:
    """The card ``name`` names: a card name, or one of its preparations (``data/europarl_enfr_8k`` or its last
    part); an unknown name is a one-line error with the closest name."""
    cards = load_cards() if cards is None else cards
    by_name = {c.name: c for c in cards}
    by_path = {key: c for c in cards for p in c.preparations for key in (p.path, Path(p.path).name)}
    key = name.strip().removesuffix(".yaml").rstrip("/")
    if key in by_name or key in by_path:
        return by_name.get(key) or by_path[key]
    close = difflib.get_close_matches(key, [*by_name, *by_path], n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]}?)" if close else ""
    raise CtxmtError(f"no corpus card {name!r}{hint}; {LIST_HINT}")


def recipes_by_path() -> dict[str, list[str]]:
    """The packaged recipes by the prepared directory they read (``data.path``): path -> recipe names."""
    found: dict[str, list[str]] = {}
    for recipe in packaged_recipes():
        data = recipe.raw.get("data") if isinstance(recipe.raw, dict) else None
        path = (data or {}).get("path") if isinstance(data, dict) else None
        if path:
            found.setdefault(str(path), []).append(recipe.name)
    return found
