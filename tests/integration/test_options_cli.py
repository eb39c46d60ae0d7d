"""Command-line conventions: one option convention over every command (-c/--checkpoint, -o/--out, --json to print
JSON, --log-format where a model runs; ctxmt_cli.cli.spellings), the old spellings still read with one warning line;
fixed value sets are enumerated choices (listed by --help, anything else refused by the parser as one line, exit
2); --device auto|cpu|cuda|cuda:N everywhere a model runs; warnings on stderr while stdout carries only
translations; tables off a terminal one row a line."""

from __future__ import annotations

import random
import subprocess
import sys

import pytest
import torch
from typer.testing import CliRunner

from ctxmt_cli.cli import app
from tests.integration.conftest import OUTPUT_NAMES, ROOT, assert_user_error, cli_commands, output_options, run_cli


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


MODEL_COMMANDS = [("translate", "-", "-c", "m.pt"), ("evaluate", "-c", "m.pt"),
                  ("contrastive", "synthetic", "-c", "m.pt"),
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


def _warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("ctxmt: warning:")]


def test_a_renamed_flag_still_works_with_a_warning(concat_checkpoint, two_documents, tmp_path):
    """--target-context is now --target-mode, --output --out: the old flags are read as the new ones, each named in
    one warning line, and the translation is the same."""
    old = run_cli("translate", two_documents, "-c", concat_checkpoint, "--beam", 1, "--target-context", "prefix",
                  "--output", tmp_path / "old.txt")
    new = run_cli("translate", two_documents, "-c", concat_checkpoint, "--beam", 1, "--target-mode", "prefix",
                  "-o", tmp_path / "new.txt")
    assert old.exit_code == new.exit_code == 0, old.output
    assert _warnings(old.stderr) == [
        "ctxmt: warning: --target-context is now called --target-mode (read as such; the old spelling goes in the "
        "next release)",
        "ctxmt: warning: --output is now called --out (read as such; the old spelling goes in the next release)"]
    assert not _warnings(new.stderr)
    assert (tmp_path / "old.txt").read_bytes() == (tmp_path / "new.txt").read_bytes()


def test_a_checkpoint_or_output_given_as_an_argument_still_works_with_a_warning(concat_checkpoint, tmp_path):
    """inspect CKPT, average CKPT... --output, export safetensors CKPT OUT and recipes copy NAME DIR do what their new
    spellings do, with one warning line per old spelling (average has two: its arguments, and --output)."""
    pairs = [
        (["inspect", concat_checkpoint, "--json"], ["inspect", "-c", concat_checkpoint, "--json"], None),
        (["average", concat_checkpoint, concat_checkpoint, "--output", tmp_path / "old.pt"],
         ["average", "-c", concat_checkpoint, "-c", concat_checkpoint, "-o", tmp_path / "new.pt"], "pt"),
        (["export", "safetensors", concat_checkpoint, tmp_path / "old.safetensors"],
         ["export", "safetensors", "-c", concat_checkpoint, "-o", tmp_path / "new.safetensors"], "safetensors"),
        (["recipes", "copy", "quickstart/concat", tmp_path / "old"],
         ["recipes", "copy", "quickstart/concat", "-o", tmp_path / "new"], ""),
    ]
    for old_args, new_args, written in pairs:
        old, new = run_cli(*old_args), run_cli(*new_args)
        assert old.exit_code == new.exit_code == 0, old.output
        said = _warnings(old.stderr)
        assert len(said) == (2 if old_args[0] == "average" else 1), said
        assert all(line.endswith("(read as such; the old spelling goes in the next release)") for line in said)
        assert not _warnings(new.stderr)
        if written is None:
            assert old.stdout == new.stdout
        elif written:
            old_file, new_file = tmp_path / f"old.{written}", tmp_path / f"new.{written}"
            assert old_file.stat().st_size == new_file.stat().st_size > 0
        else:
            assert (tmp_path / "old" / "concat.yaml").read_text() == (tmp_path / "new" / "concat.yaml").read_text()
    assert_user_error(run_cli("inspect", concat_checkpoint, "-c", concat_checkpoint), "inspect",
                      "give --checkpoint once")


#: outputs named by what they hold rather than -o/--out, and why
SECOND_OUTPUTS = {("cxmi", "per_sentence"): "P-CXMI per sentence, beside --out's figures",
                  ("train", "set_"): "the run's folder is the recipe's train.save_dir",
                  ("first-pass", "name"): "a stream name, written beside the prepared split"}


def test_every_command_follows_the_option_convention():
    """The convention of docs/commands/index.md (ctxmt_cli.cli.spellings), over every command of the app."""
    problems = []
    for path, command in cli_commands():
        options = [p for p in command.params if p.param_type_name == "option"]
        for param in command.params:
            if param.param_type_name == "argument" and param.name in ("checkpoint", "checkpoints", *OUTPUT_NAMES):
                problems.append(f"{path}: {param.name.upper()} is an argument; give it as an option")
        for param in options:
            flags = set(param.opts) | set(param.secondary_opts)
            if ({"-c", "--checkpoint"} & flags or param.name == "checkpoint") and \
                    (param.name, set(param.opts)) != ("checkpoint", {"-c", "--checkpoint"}):
                problems.append(f"{path}: the checkpoint option is {param.opts} ({param.name})")
            if {"-o", "--out"} & flags and set(param.opts) != {"-o", "--out"}:
                problems.append(f"{path}: -o/--out is spelt {param.opts}")
            if "--json" in flags and not (param.is_flag and param.name == "as_json"):
                problems.append(f"{path}: --json takes a value ({param.name}); --json means 'print JSON'")
        names = {p.name for p in options}
        if "device" in names and "log_format" not in names:
            problems.append(f"{path}: runs a model (--device) but has no --log-format")
    for path, _, param in output_options():
        if (path, param.name) not in SECOND_OUTPUTS and (param.name, set(param.opts)) != ("out", {"-o", "--out"}):
            problems.append(f"{path}: writes through {param.opts or param.name}, not -o/--out")
    assert not problems, "\n".join(problems)
    assert len(cli_commands()) > 20 and len(output_options()) > 15                # the walk saw the whole app


def test_a_table_through_a_pipe_keeps_each_row_on_one_line(concat_checkpoint, synthetic_dir):
    """contrastive's and inspect's tables, printed through the runner (no terminal): tab-separated, one row a line,
    however long a cell (the "by" groupings, a checkpoint path)."""
    result = run_cli("contrastive", f"synthetic:{synthetic_dir}", "-c", concat_checkpoint, "--no-context-gain")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    header = lines.index("set\tn\taccuracy\tstrict\tties\tunk tgt/src\tby")
    rows = lines[header + 1: lines.index("", header)]
    rows = [row for row in rows if not row.startswith("# ")]
    assert rows and all(row.count("\t") == 6 for row in rows), rows
    assert any("phenomenon: " in row and "; distance: " in row for row in rows)   # two groupings, one line
    assert not [line for line in lines if "│" in line or "┃" in line]
    shown = run_cli("inspect", "-c", concat_checkpoint).stdout.splitlines()
    assert f"checkpoint\t{concat_checkpoint}" in shown

