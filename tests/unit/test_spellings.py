"""ctxmt_cli.cli.spellings: the spellings of earlier versions are rewritten to the current ones before click parses
a command line, each kind with one warning; anything else passes through untouched."""

from __future__ import annotations

import warnings

import pytest
import typer

from ctxmt_cli.cli import app
from ctxmt_cli.cli.spellings import DEPRECATED, SpellingClash, respell


def _command(path: str):
    command = typer.main.get_command(app)
    for name in path.split():
        command = command.commands[name]
    return command


def _respelt(path: str, *args: str) -> tuple[list[str], list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        new = respell(path, _command(path), list(args))
    return new, [str(w.message) for w in caught]


@pytest.mark.parametrize("path, old, new", [
    ("inspect", ["m.pt", "--json"], ["--checkpoint", "m.pt", "--json"]),
    ("average", ["a.pt", "b.pt", "--output", "avg.pt", "--force"],
     ["--checkpoint", "a.pt", "--checkpoint", "b.pt", "--out", "avg.pt", "--force"]),
    ("average", ["-o", "avg.pt", "a.pt", "b.pt"], ["-o", "avg.pt", "--checkpoint", "a.pt", "--checkpoint", "b.pt"]),
    ("export ctranslate2", ["m.pt", "ct2", "--quantization", "int8"],
     ["--checkpoint", "m.pt", "--out", "ct2", "--quantization", "int8"]),
    ("export ctranslate2", ["--quantization", "int8", "m.pt", "ct2"],       # an option's value is no argument
     ["--quantization", "int8", "--checkpoint", "m.pt", "--out", "ct2"]),
    ("export safetensors", ["m.pt", "m.safetensors"], ["--checkpoint", "m.pt", "--out", "m.safetensors"]),
    ("recipes copy", ["quickstart/concat", "mine"], ["quickstart/concat", "--out", "mine"]),
    ("translate", ["docs.txt", "-c", "m.pt", "--output=out.txt", "--target-context", "prefix"],
     ["docs.txt", "-c", "m.pt", "--out=out.txt", "--target-mode", "prefix"]),
    ("contrastive", ["lopes:x", "-c", "m.pt", "--json", "none"], ["lopes:x", "-c", "m.pt", "--testset-json", "none"]),
    ("score-contrastive", ["lopes:x", "--json=t.json"], ["lopes:x", "--testset-json=t.json"]),
    ("inspect", ["--", "-odd-name.pt"], ["--", "--checkpoint", "-odd-name.pt"]),
])
def test_old_spellings_become_the_new_ones_with_one_warning_each(path, old, new):
    got, said = _respelt(path, *old)
    assert got == new
    assert said and all("(read as such; the old spelling goes in the next release)" in line for line in said)
    assert len(said) == len({line.split(" ")[0] for line in said} - {"ctxmt"}) + any(line.startswith("ctxmt ") for line
                                                                                    in said)   # one line per kind


@pytest.mark.parametrize("path, args", [
    ("inspect", ["-c", "m.pt", "--json"]), ("average", ["-c", "a.pt", "-c", "b.pt", "-o", "avg.pt"]),
    ("export ctranslate2", ["-c", "m.pt", "-o", "ct2"]), ("recipes copy", ["quickstart", "-o", "mine"]),
    ("translate", ["-", "-c", "m.pt", "-o", "-"]), ("train", ["quickstart/concat", "--set", "a=b"]),
])
def test_current_spellings_pass_through_silently(path, args):
    assert _respelt(path, *args) == (args, [])


def test_a_positional_beside_the_option_it_became_is_refused():
    with pytest.raises(SpellingClash, match="give --checkpoint once"):
        _respelt("inspect", "a.pt", "-c", "b.pt")
    assert _respelt("average", "a.pt", "-c", "b.pt", "-o", "x.pt")[0] == \
        ["--checkpoint", "a.pt", "-c", "b.pt", "-o", "x.pt"]                 # repeatable: both are read


def test_every_deprecated_spelling_names_a_current_option_of_its_command():
    for path, old in DEPRECATED.items():
        command = _command(path)
        flags = {opt for p in command.params for opt in p.opts if p.param_type_name == "option"}
        targets = set(old.flags.values()) | {t for t in old.positionals if t is not None}
        assert targets <= flags, (path, targets - flags)
        assert not set(old.flags) & flags, path                          # an old flag is no current one
