"""Errors name options as their reader knows them: the library by keyword (`` `force` ``, ``beam=0``), the command line
by its flags (``--force``, ``--beam 0``); no library message spells a flag."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ctxmt_cli.errors import CtxmtError, OptionError, named, option, use_option_names
from tests.integration.conftest import ROOT


def test_the_library_names_options_by_keyword():
    err = CtxmtError(f"out exists; pass {option('force')} to overwrite it or choose another {option('out')}")
    assert str(err) == "out exists; pass `force` to overwrite it or choose another `out`"
    refused = OptionError("max_tokens", 4, f"give a budget >= 16 or leave {option('max_tokens')} out")
    assert str(refused) == "max_tokens=4: give a budget >= 16 or leave `max_tokens` out"


def test_an_option_error_crosses_a_process_boundary():
    """A worker process's OptionError reaches its parent whole (pickled by its fields, not its message)."""
    import pickle

    back = pickle.loads(pickle.dumps(OptionError("beam", 0, "give a beam size >= 1")))
    assert (type(back), back.option, back.value, back.problem) == (OptionError, "beam", 0, "give a beam size >= 1")
    assert str(back) == "beam=0: give a beam size >= 1"


def test_the_way_of_naming_is_the_callers_and_is_restored():
    err = CtxmtError(f"pass {option('first_pass')}")
    previous = use_option_names(lambda name: "--" + name.replace("_", "-"))
    try:
        assert str(err) == "pass --first-pass" and named(f"{option('vocab_size')} 8") == "--vocab-size 8"
        assert OptionError("beam", 0, f"or set {option('greedy')}").with_flag("--beam") == "--beam 0: or set --greedy"
    finally:
        use_option_names(previous)
    assert str(err) == "pass `first_pass`"


@pytest.mark.parametrize("argv, flags", [
    (["evaluate", "--hyp", "h.txt"], ["--hyp needs --ref REFERENCE_FILE"]),
    (["evaluate", "-c", "m.pt", "--hyp", "h.txt", "--ref", "r.txt"], ["give either --checkpoint", "--hyp/--ref"]),
    (["train", "quickstart/sentence", "--set", "train.lr"], ["--set 'train.lr': expected KEY.PATH=VALUE"]),
])
def test_the_command_line_shows_its_flags(tmp_path, argv, flags):
    """The same library errors on the command line: one line, exit 2, the command's own flags, no marks."""
    run = subprocess.run([sys.executable, "-m", "ctxmt_cli", *argv], cwd=tmp_path, capture_output=True, text=True,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert run.returncode == 2, run.stderr
    line = run.stderr.strip()
    assert "\n" not in line and all(f in line for f in flags), line
    assert "`" not in line.partition("error:")[2].split(";")[0] and "\ue000" not in line


def test_a_message_is_one_line_whatever_line_breaks_its_parts_hold():
    from ctxmt_cli.errors import one_line

    for brk in "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029":
        text = str(CtxmtError(f"key 'a{brk}b' unknown"))
        assert len(text.splitlines()) == 1 and ascii(brk)[1:-1] in text, repr(text)
        assert len(OptionError("beam", f"1{brk}2", f"no{brk}good").with_flag("--beam").splitlines()) == 1
    assert one_line("a\nb") == "a b"
