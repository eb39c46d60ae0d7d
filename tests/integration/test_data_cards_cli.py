"""``ctxmt data list|show`` through the CLI, and the counts the cards record, measured by running each card's
exact prepare command where the publisher's files are in ../shared/data (skipped, with the reason, elsewhere)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from ctxmt_cli.data.cards import command_args, join_command, load_cards, option_value
from tests.integration.conftest import ROOT, assert_user_error, run_cli

SHARED = "../shared/data"
CHECKED = [(card.name, prep) for card in load_cards() for prep in card.preparations if prep.check]
#: preparations whose command takes more than ~10 s here (the full Europarl train split: ~45 s each)
SLOW = {"data/europarl_enfr", "data/europarl_enfr_8k"}


def test_data_list_names_every_card_and_preparation():
    result = run_cli("data", "list")
    assert result.exit_code == 0, result.output
    for card in load_cards():
        assert card.name in result.stdout
        for prep in card.preparations:
            assert prep.path in result.stdout
    assert "europarl_enfr  " in result.stdout and "5 recipes" in result.stdout


def test_data_show_prints_the_card_and_its_recipes():
    result = run_cli("data", "show", "europarl_enfr")
    assert result.exit_code == 0, result.output
    shown = yaml.safe_load(result.stdout)
    assert shown["name"] == "europarl_enfr" and shown["languages"] == {"source": "en", "target": "fr"}
    small = next(p for p in shown["preparations"] if p["path"] == "data/europarl_enfr_8k")
    assert "europarl_enfr/sentence_small" in small["recipes"]
    assert small["counts"]["train"] == {"sentences": 561605, "documents": 10587}
    assert "--vocab-size 8000" in small["command"]


def test_data_show_takes_a_prepared_directory():
    result = run_cli("data", "show", "data/yang2023_iwslt17")
    assert result.exit_code == 0, result.output
    assert yaml.safe_load(result.stdout)["name"] == "maruf2019_iwslt17"


def test_data_show_unknown_name_is_one_line_with_a_suggestion():
    assert_user_error(run_cli("data", "show", "europarl_enfrr"), "no corpus card 'europarl_enfrr'",
                      "did you mean europarl_enfr?", "ctxmt data list")


def _local_args(prep, out: Path) -> list[str]:
    """The card's command as it runs here: the card's stated replacements, ../shared/data where it lies, --out
    in a temporary folder."""
    text = join_command(prep.command)
    for old, new in prep.check.replace.items():
        text = text.replace(old, new)
    args = command_args(text.replace(SHARED, str((ROOT / SHARED).resolve())))
    assert option_value(args, "--out") == prep.path
    return [str(out) if arg == prep.path and args[i - 1] == "--out" else arg for i, arg in enumerate(args)]


def _params():
    for name, prep in CHECKED:
        marks = [pytest.mark.slow] if prep.path in SLOW else []
        yield pytest.param(name, prep, marks=marks, id=prep.path)


@pytest.mark.parametrize("name, prep", list(_params()))
def test_the_card_counts_are_what_its_command_prepares(name, prep, tmp_path):
    missing = [need for need in prep.check.needs if not (ROOT / need).exists()]
    if missing:
        print(f"{name}: {prep.path}: skipped, {missing[0]} is not here")
        pytest.skip(f"{missing[0]} is not here (the publisher's files: see data/{name}.yaml)")
    args = _local_args(prep, tmp_path / "prepared")
    result = run_cli(*args[1:])
    assert result.exit_code == 0, result.output
    meta = json.loads((tmp_path / "prepared" / "meta.json").read_text(encoding="utf-8"))
    for split in prep.check.splits:
        got = {k: meta["splits"][split][k] for k in ("sentences", "documents")}
        assert got == prep.counts[split].model_dump(), f"{name}: {prep.path} {split}"
    if prep.vocab_size and not any("--vocab-size" in old for old in prep.check.replace):
        assert meta["vocab_size"]["src"] == prep.vocab_size
