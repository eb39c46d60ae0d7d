"""The corpus cards of data/: every card validates, every recipe's data.path has exactly one preparation, every
preparation command parses as ``ctxmt prepare`` options and is the command the recipe headers give."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer
import yaml

from ctxmt_cli.cli import app
from ctxmt_cli.cli.errors import UsageError
from ctxmt_cli.data.cards import (
    CARDS_DIR,
    card_files,
    command_args,
    find_card,
    join_command,
    load_card,
    load_cards,
    recipes_by_path,
)
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.recipe_catalog import RECIPES_DIR

ROOT = Path(__file__).resolve().parents[2]
CARDS = load_cards()
PREPARATIONS = [(card.name, prep) for card in CARDS for prep in card.preparations]


def test_the_checkout_reads_its_top_level_cards():
    assert CARDS_DIR == ROOT / "data"
    assert [p.stem for p in card_files()] == [c.name for c in CARDS]
    assert len(CARDS) >= 11


def test_every_recipe_data_path_has_exactly_one_card_preparation():
    paths = [prep.path for _, prep in PREPARATIONS]
    assert len(paths) == len(set(paths))
    assert set(recipes_by_path()) == set(paths)


@pytest.mark.parametrize("name, prep", PREPARATIONS, ids=[p.path for _, p in PREPARATIONS])
def test_every_preparation_command_parses_as_ctxmt_prepare(name, prep, monkeypatch):
    """The command's options are those of ``ctxmt prepare`` with valid values (parsed, not run; whether this
    machine has the CUDA device a command names is no concern of the card)."""
    monkeypatch.setattr("ctxmt_cli.device.resolve_device", lambda *a, **k: None)
    args = command_args(prep.command)
    assert args[:2] == ["ctxmt", "prepare"]
    params = _parse_prepare(args[2:])
    assert str(params["out"]) == prep.path
    assert str(getattr(params["fmt"], "value", params["fmt"])) == args[2]


def _parse_prepare(args: list[str]) -> dict:
    """``ctxmt prepare ARGS`` parsed by the Typer app (types, choices, bounds checked), not run."""
    root = typer.main.get_command(app)
    with root.make_context("ctxmt", ["prepare", *args], resilient_parsing=True) as parent:
        command = root.get_command(parent, "prepare")
        return command.make_context("prepare", list(args), parent=parent).params


@pytest.mark.parametrize("args", [["text", "--vocab-sise", "8000", "--out", "x"],
                                  ["text", "--vocab-size", "many", "--out", "x"], ["textt", "--out", "x"]])
def test_the_parsing_check_refuses_a_bad_command(args):
    with pytest.raises(UsageError):
        _parse_prepare(args)


def _header(path: Path) -> list[str]:
    """A recipe's leading comment lines, without the ``#`` and one space."""
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        lines.append(re.sub(r"^# ?", "", line))
    return lines


def _header_commands(path: Path) -> set[str]:
    """The ``ctxmt prepare`` commands a recipe header gives, each on one line."""
    found, current = set(), None
    for line in _header(path):
        if current is None and line.lstrip().startswith("ctxmt prepare"):
            current = []
        if current is not None:
            current.append(line)
            if not line.rstrip().endswith("\\"):
                found.add(join_command("\n".join(current)))
                current = None
    return found


def _squeezed(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("name, prep", PREPARATIONS, ids=[p.path for _, p in PREPARATIONS])
def test_every_preparation_is_the_command_its_recipes_give(name, prep):
    """Where the recipes' headers give a prepare command, the card's is the same (and so are the steps before)."""
    readers = [RECIPES_DIR / f"{r}.yaml" for r in recipes_by_path()[prep.path]]
    given = set().union(*(_header_commands(p) for p in readers))
    if not given:
        assert prep.path == "quickstart/data"             # the quickstart prepares its own data
        return
    assert given == {join_command(prep.command)}
    if prep.before:
        headers = [_squeezed("\n".join(_header(p))) for p in readers]
        assert any(_squeezed(prep.before) in h for h in headers), f"{name}: 'before' is in no header of {prep.path}"


def test_counts_are_recorded_only_where_a_check_says_how():
    for name, prep in PREPARATIONS:
        if prep.counts:
            assert prep.check is not None and set(prep.check.splits) == set(prep.counts), name


def _card_text(**changes) -> str:
    """The synthetic card renamed ``demo``, with top-level keys replaced (None: removed)."""
    raw = yaml.safe_load((CARDS_DIR / "synthetic.yaml").read_text(encoding="utf-8"))
    raw.update(name="demo", **changes)
    return yaml.safe_dump({k: v for k, v in raw.items() if v is not None}, sort_keys=False, allow_unicode=True)


def _prep(**fields) -> list[dict]:
    return [{"path": "x", "command": "ctxmt prepare text --out x", **fields}]


@pytest.mark.parametrize("text, needles", [
    (_card_text(colour="blue"), ["unknown key 'colour'"]),
    (_card_text() + "licence: MIT\n", ["key 'licence' is given twice"]),
    (_card_text(title=None), ["title: missing"]),
    (_card_text(preparations=_prep(command="ctxmt prepare text --out y")), ["preparations.0", "--out y"]),
    (_card_text(preparations=_prep(command="ctxmt train x")), ["preparations.0.command", "ctxmt prepare"]),
    (_card_text(preparations=_prep(counts={"train": {"sentences": -1, "documents": 1}})),
     ["preparations.0.counts.train.sentences", "greater than or equal to 1"]),
    (_card_text(preparations=_prep(countz={})), ["unknown key 'preparations.0.countz'"]),
    (_card_text(preparations=_prep(counts={"train": {"sentences": 1, "documents": 1}},
                                   check={"splits": ["test"]})), ["check.splits names test"]),
    (_card_text(preparations=_prep() * 2), ["path x is given twice"]),
    ("a: [b\n", ["not valid YAML"]),
    ("- a\n", ["a card is a YAML mapping"]),
])
def test_a_malformed_card_is_one_line_naming_file_and_key(tmp_path, text, needles):
    path = tmp_path / "demo.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(CtxmtError) as err:
        load_card(path)
    message = str(err.value)
    assert len(message.splitlines()) == 1 and str(path) in message
    for needle in needles:
        assert needle in message, message


def test_a_card_named_otherwise_than_its_file_is_refused(tmp_path):
    path = tmp_path / "other.yaml"
    path.write_text((CARDS_DIR / "synthetic.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    with pytest.raises(CtxmtError, match="not the file's name"):
        load_card(path)


def test_find_card_by_name_or_preparation_and_did_you_mean():
    assert find_card("europarl_enfr", CARDS).name == "europarl_enfr"
    assert find_card("data/europarl_enfr_8k", CARDS).name == "europarl_enfr"
    assert find_card("en_ru_opensubs", CARDS).name == "voita2019_en_ru"
    with pytest.raises(CtxmtError, match=r"did you mean europarl_enfr\?"):
        find_card("europarl_enfrr", CARDS)
