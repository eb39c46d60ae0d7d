"""Command-line conventions: fixed value sets are enumerated choices (listed by --help, anything else refused by the
parser as one line, exit 2); --device auto|cpu|cuda|cuda:N everywhere a model runs; warnings on stderr while stdout
carries only translations."""

from __future__ import annotations

import random
import subprocess
import sys

import pytest
import torch
from typer.testing import CliRunner

from ctxmt_cli.cli import app
from tests.integration.conftest import ROOT, assert_user_error, run_cli


def wide_help(command: str):
    """``ctxmt COMMAND --help`` on a terminal wide enough that no option's line wraps."""
    return CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "250"})


BAD_CHOICES = [
    (("prepare", "csv", "--out", "x"), "'csv' is not one of"),
    (("prepare", "text", "--out", "x", "--spm-type", "char"), "--spm-type char"),
    (("translate", "-", "-c", "m.pt", "--target-mode", "gold"), "--target-mode gold"),
    (("translate", "-", "-c", "m.pt", "--group-order", "random"), "--group-order random"),
    (("evaluate", "--hyp", "h", "--tokenize", "moses"), "--tokenize moses"),
    (("evaluate", "--hyp", "h", "--significance", "t-test"), "--significance t-test"),
    (("contrastive", "wmt:x", "-c", "m.pt"), "unknown test set 'wmt'"),
    (("contrastive", "synthetic", "-c", "m.pt", "--normalize", "max"), "--normalize max"),
    (("contrastive", "synthetic", "-c", "m.pt", "--score-span", "first"), "--score-span first"),
    (("contrastive", "scat", "-c", "m.pt", "--split", "dev"), "--split dev"),
    (("benchmark", "speed"), "'speed' is not one of"),
    (("benchmark", "train", "--preset", "huge"), "--preset huge"),
    (("benchmark", "mbe", "--corpus", "wmt"), "--corpus wmt"),
    (("train", "r.yaml", "--log-format", "xml"), "--log-format xml"),
    (("quickstart", "--log-format", "text"), "--log-format text"),
]


@pytest.mark.parametrize("args, says", BAD_CHOICES, ids=[says for _, says in BAD_CHOICES])
def test_a_value_outside_a_choice_is_one_line(args, says):
    text = assert_user_error(run_cli(*args), says)
    assert "Value error" not in text


@pytest.mark.parametrize("command, choices", [("translate", ["<prefix|generate>", "<consecutive|length>"]),
                                              ("contrastive", ["<mean|none>", "<all|current>", "<train|valid|test>"]),
                                              ("train", ["<plain|rich|json>", "[auto|cpu|cuda|cuda:N]"]),
                                              ("benchmark", ["<tiny|small|base|big>"])])
def test_help_lists_the_choices(command, choices):
    result = wide_help(command)
    assert result.exit_code == 0
    for text in choices:
        assert text in result.stdout, (text, result.stdout)


MODEL_COMMANDS = [("translate", "-", "-c", "m.pt"), ("evaluate", "-c", "m.pt"), ("contrastive", "synthetic", "-c", "m.pt"),
                  ("train", "r.yaml"), ("quickstart",), ("first-pass", "-c", "m.pt", "--data", "d", "--split", "test"),
                  ("analyze-attention", "-c", "m.pt"), ("cxmi", "-c", "m.pt"), ("benchmark", "context-scaling"),
                  ("prepare", "docrepair", "--out", "x"), ("serve", "-c", "m.pt")]


@pytest.mark.parametrize("args", MODEL_COMMANDS, ids=lambda a: a[0])
def test_every_model_command_takes_device_auto_by_default(args):
    result = wide_help(args[0])
    assert "[auto|cpu|cuda|cuda:N]" in result.stdout and "[default: auto]" in result.stdout.split("--device")[1]
    absent = f"cuda:{torch.cuda.device_count() if torch.cuda.is_available() else 0}"
    text = assert_user_error(run_cli(*args, "--device", absent), f"--device {absent}")
    assert ("CUDA device(s)" if torch.cuda.is_available() else "CUDA is not available") in text
    assert_user_error(run_cli(*args, "--device", "gpu"), "--device gpu", "auto | cpu | cuda | cuda:N")


def test_translate_stdout_holds_only_translations_while_a_warning_is_emitted(concat_checkpoint, two_documents):
    """A real pipe: `ctxmt translate` in a subprocess with a sentence over the window limit (a truncation warning)."""
    words = two_documents.read_text().split()
    rng = random.Random(0)
    long_sentence = " ".join(rng.choice(words) for _ in range(1500))         # > 1023 subwords (one or more a word)
    text = two_documents.read_text().rstrip("\n") + "\n" + long_sentence + "\n"
    run = subprocess.run([sys.executable, "-m", "ctxmt_cli", "translate", "-", "-c", str(concat_checkpoint),
                          "--beam", "1"], input=text, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "ctxmt: warning: sentence" in run.stderr and "truncated to the window limit" in run.stderr
    lines = run.stdout.splitlines()
    assert len(lines) == len(text.splitlines())                               # one line per input line
    assert not [line for line in lines if "warning" in line or "translated" in line]


def test_a_renamed_flag_still_works_with_a_warning(concat_checkpoint, two_documents):
    """--target-context is now --target-mode: the old flag is read as the new one and named in one warning line."""
    old = run_cli("translate", two_documents, "-c", concat_checkpoint, "--beam", 1, "--target-context", "prefix")
    new = run_cli("translate", two_documents, "-c", concat_checkpoint, "--beam", 1, "--target-mode", "prefix")
    assert old.exit_code == new.exit_code == 0, old.output
    assert "ctxmt: warning: --target-context is now called --target-mode" in old.stderr
    assert "warning" not in new.stderr and old.stdout == new.stdout

