"""Nothing a user gives ctxmt destroys their files: outputs never land on inputs (compared as files, so a hard
link or another spelling is caught), ``--force`` replaces only what ctxmt wrote, and a full disk is one line
with the previous output intact and no temp file left behind.

The tables reuse :func:`tests.integration.test_bad_inputs.check_bad_input` (exit 2, one line, no traceback, the
scratch directory and the fixtures byte-identical afterwards). The disk-full rows run on a real 4 MiB tmpfs,
skipped with the reason where this user cannot mount one.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
from pathlib import Path

import pytest

from ctxmt_cli.outputs import ASIDE_TAG, TEMP_TAG
from ctxmt_cli.ownership import MANIFEST, record
from ctxmt_cli.recipe_catalog import RECIPES_DIR
from tests.integration.conftest import assert_user_error, run_cli
from tests.integration.test_bad_inputs import check_bad_input, placeholders, snapshot, tiny, ws  # noqa: F401
from tests.tmpfs import mounted_tmpfs

PREP = ["prepare", "text", "--train", "small", "--src-lang", "en", "--tgt-lang", "de"]


@pytest.fixture
def spaces(ws):  # noqa: F811 - the fixture of test_bad_inputs, extended
    """``ws`` plus hard links and folders that make an output one of the inputs, and folders ``--force`` must
    not replace: a user's folder, a prepared dataset with a user's file, links to and inside one."""
    os.link(ws / "doc.txt", ws / "hard.txt")
    (ws / "ref.txt").write_text("Hello there.\n\nAnother document.\n")
    (ws / "corpus").mkdir()
    for side in ("en", "de"):
        shutil.copy(ws / f"small.{side}", ws / "corpus" / f"small.{side}")
    assert run_cli(*PREP, "--out", "mine").exit_code == 0
    (ws / "mine" / "notes.txt").write_text("a user's notes\n")
    assert run_cli(*PREP, "--out", "own").exit_code == 0
    (ws / "linkdir").symlink_to(ws / "own")
    assert run_cli(*PREP, "--out", "inner").exit_code == 0
    (ws / "inner" / "link").symlink_to(ws / "notprep")
    return ws


def _hard_link(target: Path, link: Path) -> Path:
    link.parent.mkdir(parents=True, exist_ok=True)
    os.link(target, link)
    return link


# ---- an output is never one of the command's inputs ---------------------------------------------------------
OUTPUT_IS_INPUT = [
    (["evaluate", "--hyp", "doc.txt", "--ref", "ref.txt", "--out", "ref.txt"], ["--out ref.txt is also an input"]),
    (["evaluate", "--hyp", "doc.txt", "--ref", "ref.txt", "--out", "./doc.txt"], ["doc.txt is also an input"]),
    (["evaluate", "--hyp", "doc.txt", "--ref", "ref.txt", "--out", "hard.txt"], ["hard.txt is also an input"]),
    (["evaluate", "-c", "{ckpt}", "--data", "{data}", "--out", "{ckpt}"], ["is also an input"]),
    (["evaluate", "--hyp", "doc.txt", "--ref", "ref.txt", "--src", "hard.txt", "--out", "hard.txt"],
     ["is also an input"]),
    (["translate", "doc.txt", "-c", "{ckpt}", "-o", "./doc.txt"], ["doc.txt is also an input"]),
    (["translate", "doc.txt", "-c", "{ckpt}", "-o", "hard.txt"], ["hard.txt is also an input"]),
    (["average", "-c", "{run}/checkpoint_2.pt", "-c", "{run}/checkpoint_4.pt", "-o", "ck2.pt", "--force"],
     ["ck2.pt is also an input"]),
    (["cxmi", "-c", "{ckpt}", "--out", "ck.pt"], ["ck.pt is also an input"]),
    (["cxmi", "-c", "{ckpt}", "--per-sentence", "ck.pt"], ["ck.pt is also an input"]),
    (["contrastive", "synthetic:{data}", "-c", "res/results.json", "--out", "res", "--force"],
     ["res/results.json is also an input"]),
    (["analyze-attention", "-c", "att/analysis.json", "--data", "{data}", "--out", "att", "--force", "--no-plots"],
     ["att/analysis.json is also an input"]),
    (["prepare", "text", "--train", "corpus/small", "--src-lang", "en", "--tgt-lang", "de", "--out", "corpus",
      "--force"], ["--out corpus holds the input"]),
    ([*PREP, "--out", ".", "--force"], ["holds the input"]),
    (["prepare", "reverse", "--data", "{data}", "--out", "{data}", "--force"], ["is the --data directory"]),
    (["export", "ctranslate2", "-c", "{ckpt}", "-o", "{run}", "--force"], ["holds the input"]),
    (["recipes", "copy", "quickstart/concat.yaml", "-o", str(RECIPES_DIR / "quickstart")],
     ["lies inside the input folder"]),
    (["train", "{recipe}", *tiny("{data}")], ["is the prepared dataset data.path"]),
    (["prepare", "docrepair", "--data", "{data}", "--reverse", "{ckpt}", "--forward", "{ckpt}", "--out", "{data}",
      "--force"], ["is also an input"]),
    (["prepare", "docrepair", "--data", "{data}", "--reverse", "{ckpt}", "--forward", "{ckpt}", "--out", "{run}",
      "--force"], ["holds the input", "replacing it would delete that input"]),
    (["first-pass", "-c", "{ckpt}", "--data", "fpd", "--split", "test", "--name", "fp", "--force"],
     ["fpd/test.fp.stream.bin is also an input"]),
]


@pytest.mark.parametrize("args,needles", OUTPUT_IS_INPUT)
def test_an_output_is_never_an_input(args, needles, spaces, synthetic_dir, concat_checkpoint):
    if args[0] == "export":
        pytest.importorskip("ctranslate2", reason="the ctranslate2 extra: pip install -e '.[ctranslate2]'")
    _hard_link(concat_checkpoint, spaces / "ck.pt")
    _hard_link(concat_checkpoint.parent / "checkpoint_2.pt", spaces / "ck2.pt")
    _hard_link(concat_checkpoint, spaces / "res" / "results.json")
    _hard_link(concat_checkpoint, spaces / "att" / "analysis.json")
    if args[0] == "first-pass":              # a prepared dataset whose stream file is the checkpoint itself
        shutil.copytree(synthetic_dir, spaces / "fpd", ignore=shutil.ignore_patterns("raw"))
        _hard_link(concat_checkpoint, spaces / "fpd" / "test.fp.stream.bin")
    check_bad_input(args, needles, spaces, placeholders(data=synthetic_dir, ckpt=concat_checkpoint))


def test_plot_never_draws_over_the_metrics_it_reads(spaces, concat_checkpoint):
    pytest.importorskip("matplotlib", reason="matplotlib is in the test extra: pip install -e '.[test]'")
    run = spaces / "run"
    run.mkdir()
    shutil.copy(concat_checkpoint.parent / "metrics.jsonl", run / "metrics.jsonl")
    assert run_cli("plot", "run", "--out", "pl").exit_code == 0
    png = sorted((spaces / "pl").glob("*.png"))[0]
    png.unlink()
    _hard_link(run / "metrics.jsonl", png)
    check_bad_input(["plot", "run", "--out", "pl", "--force"], [f"{png.name} is also an input"], spaces, {})


# ---- --force replaces only what ctxmt wrote ------------------------------------------------------------------
NOT_OURS = {
    "notprep": "is not a",                                       # a user's folder, no manifest
    "mine": "mine/notes.txt, which is not a file ctxmt wrote",   # ctxmt's output with a user's file
    "linkdir": "linkdir is a symbolic link",                     # a link to ctxmt's output
    "inner": "inner/link, which is a symbolic link",             # a link inside it
}
FORCE_COMMANDS = {
    "prepare": [*PREP, "--out", "{out}", "--force"],
    "reverse": ["prepare", "reverse", "--data", "{data}", "--out", "{out}", "--force"],
    "quickstart": ["quickstart", "--out", "{out}", "--force", "--docs", "41", "--updates", "1"],
    "export": ["export", "ctranslate2", "-c", "{ckpt}", "-o", "{out}", "--force"],
}


@pytest.mark.parametrize("target", sorted(NOT_OURS))
@pytest.mark.parametrize("command", sorted(FORCE_COMMANDS))
def test_force_refuses_what_ctxmt_did_not_write(command, target, spaces, synthetic_dir, concat_checkpoint):
    if command == "export":
        pytest.importorskip("ctranslate2", reason="the ctranslate2 extra: pip install -e '.[ctranslate2]'")
    args = [a.replace("{out}", target) for a in FORCE_COMMANDS[command]]
    for folder in ("mine", "own", "inner"):                 # prepared datasets: make them this command's output
        _written_by(spaces / folder, WRITER[command])
    check_bad_input(args, [NOT_OURS[target], "--force does not replace it", "nothing was deleted"], spaces,
                    placeholders(data=synthetic_dir, ckpt=concat_checkpoint))
    assert (spaces / "notprep" / "thesis.tex").read_text() == "years of work\n"


#: the command each --force row writes, as its manifest names it
WRITER = {"prepare": "prepare text", "reverse": "prepare reverse", "quickstart": "quickstart",
          "export": "export ctranslate2"}


def _written_by(folder: Path, command: str) -> None:
    """Name ``command`` as the writer in ``folder``'s manifest (its entries unchanged)."""
    record = json.loads((folder / MANIFEST).read_text())
    (folder / MANIFEST).write_text(json.dumps({**record, "command": command}))


@pytest.mark.parametrize("command", ["quickstart", "export"])
def test_force_never_replaces_another_command_s_output(command, spaces, synthetic_dir, concat_checkpoint):
    """``own`` is a clean prepared dataset: a quickstart or an export --force refuses it all the same (as it
    refuses a training run: each command replaces only what it wrote itself)."""
    if command == "export":
        pytest.importorskip("ctranslate2", reason="the ctranslate2 extra: pip install -e '.[ctranslate2]'")
    args = [a.replace("{out}", "own") for a in FORCE_COMMANDS[command]]
    check_bad_input(args, ["own was written by ctxmt prepare, not", f"--force of ctxmt {WRITER[command]}",
                           "nothing was deleted"], spaces, placeholders(data=synthetic_dir, ckpt=concat_checkpoint))


def test_force_replaces_ctxmt_s_own_output(spaces, synthetic_dir, concat_checkpoint):
    for args in ([*PREP, "--out", "own", "--force"],
                 ["prepare", "reverse", "--data", synthetic_dir, "--out", "rev"],
                 ["prepare", "reverse", "--data", synthetic_dir, "--out", "rev", "--force"]):
        result = run_cli(*args)
        assert result.exit_code == 0, result.output
    assert (spaces / "own" / MANIFEST).is_file() and (spaces / "rev" / "meta.json").is_file()
    assert not [p for p in spaces.iterdir() if TEMP_TAG in p.name or ASIDE_TAG in p.name]


# ---- a full disk: one line, the previous output intact, no temp file --------------------------------------------
@pytest.fixture
def disk(tmp_path):
    """A 4 MiB tmpfs on ``tmp_path / "disk"``, unmounted afterwards; skipped where it cannot be mounted."""
    yield from mounted_tmpfs(tmp_path / "disk", "4m")


def fill(disk: Path, leave: int = 0) -> None:
    """Fill ``disk`` until ``leave`` bytes are free (a file named ``filler``, part of every listing)."""
    free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
    with open(disk / "filler", "ab") as handle:
        try:
            handle.write(b"\0" * max(free - leave, 0))
            handle.flush()
        except OSError as err:
            assert err.errno == errno.ENOSPC


def no_litter(root: Path) -> None:
    left = [p for p in root.rglob("*") if TEMP_TAG in p.name or ASIDE_TAG in p.name or p.name.startswith(".tmp")]
    assert left == [], left


def full_disk_error(args: list, disk: Path, progress: bool = False) -> None:
    """``ctxmt ARGS`` on the full ``disk``: one line naming the full disk (after the progress lines of a command
    that shows them, with ``progress``), the files there unchanged, no temp."""
    before = snapshot(disk)
    if progress:
        result = run_cli(*args)
        assert result.exit_code == 2 and "Traceback" not in result.output, result.output
        last = result.stderr.strip().splitlines()[-1]
        assert last.startswith("ctxmt: error: no space left on device: " + str(disk)), result.output
    else:
        assert_user_error(run_cli(*args), "no space left on device", str(disk))
    assert snapshot(disk) == before
    no_litter(disk)


def test_full_disk_translate_evaluate_average_recipes(disk, concat_checkpoint, tmp_path):
    doc = tmp_path / "doc.txt"
    doc.write_text("Hello there.\n\nAnother document.\n")
    for name in ("out.txt", "bleu.json", "avg.pt", "recipes/concat.yaml"):
        (disk / name).parent.mkdir(exist_ok=True)
        (disk / name).write_text("the previous output\n")
    run = concat_checkpoint.parent
    fill(disk)
    full_disk_error(["translate", doc, "-c", concat_checkpoint, "-o", disk / "out.txt", "--force"], disk)
    full_disk_error(["evaluate", "--hyp", doc, "--ref", doc, "--out", disk / "bleu.json", "--force"], disk)
    full_disk_error(["average", "-c", run / "checkpoint_2.pt", "-c", run / "checkpoint_4.pt", "-o", disk / "avg.pt",
                     "--force"], disk)
    (disk / "recipes" / "concat.yaml").unlink()
    fill(disk)                                                     # the page the old copy held
    full_disk_error(["recipes", "copy", "quickstart/concat.yaml", "-o", disk / "recipes"], disk)


def test_full_disk_train_fresh_mid_run_and_resume(disk, synthetic_dir, concat_checkpoint):
    from ctxmt_cli.models.loading import read_checkpoint

    size = concat_checkpoint.stat().st_size
    data = {"data": synthetic_dir}
    # resume: the run's checkpoints are there; the next one does not fit
    shutil.copytree(concat_checkpoint.parent, disk / "resumed", ignore=shutil.ignore_patterns("tensorboard"))
    fill(disk)
    before = {p: b for p, b in snapshot(disk).items() if not p.endswith("metrics.jsonl")}
    args = [a.format(**data) for a in tiny(str(disk / "resumed"))]
    assert_user_error(run_cli("train", "{recipe}".format(**placeholders()), "--resume", "--allow-changed",
                              "train.max_steps", *args, "--set", "train.max_steps=6"), "no space left on device",
                      str(disk))
    assert {p: b for p, b in snapshot(disk).items() if not p.endswith("metrics.jsonl")} == before
    assert read_checkpoint(disk / "resumed" / "checkpoint_last.pt")["state"]["step"] == 4
    no_litter(disk)
    shutil.rmtree(disk / "resumed")
    (disk / "filler").unlink()
    for run, leave in (("fresh", 0), ("midrun", size + size // 2)):     # midrun: one checkpoint fits, not two
        fill(disk, leave + 64 * 1024)
        args = [a.format(**data) for a in tiny(str(disk / run))]
        assert_user_error(run_cli("train", placeholders()["recipe"], *args), "no space left on device", str(disk))
        for path in (disk / run).glob("*.pt"):                              # what is there is whole
            assert read_checkpoint(path)["state"]["step"] >= 2
        no_litter(disk)
        (disk / "filler").unlink()


def test_full_disk_prepare_contrastive(disk, synthetic_dir, concat_checkpoint, ws):  # noqa: F811
    assert run_cli(*PREP, "--out", disk / "p").exit_code == 0
    (disk / "res").mkdir()
    (disk / "res" / "results.json").write_text("{}\n")
    record(disk / "res", [disk / "res" / "results.json"], command="contrastive")     # an earlier run's, untouched
    fill(disk)
    full_disk_error([*PREP, "--out", disk / "p", "--force"], disk)
    full_disk_error(["contrastive", f"synthetic:{synthetic_dir}", "-c", concat_checkpoint, "--out", disk / "res",
                     "--force"], disk, progress=True)


def test_full_disk_export(disk, sentence_level_checkpoint):
    pytest.importorskip("ctranslate2", reason="the ctranslate2 extra: pip install -e '.[ctranslate2]'")
    result = run_cli("export", "ctranslate2", "-c", sentence_level_checkpoint, "-o", disk / "m")
    assert result.exit_code == 0, result.output
    fill(disk)
    full_disk_error(["export", "ctranslate2", "-c", sentence_level_checkpoint, "-o", disk / "m", "--force"], disk)


def test_full_disk_plot_and_analyze_attention(disk, synthetic_dir, concat_checkpoint):
    pytest.importorskip("matplotlib", reason="matplotlib is in the test extra: pip install -e '.[test]'")
    run = concat_checkpoint.parent
    assert run_cli("plot", run, "--out", disk / "plots").exit_code == 0
    args = ["analyze-attention", "-c", concat_checkpoint, "--data", synthetic_dir, "--out", disk / "att",
            "--max-sentences", "4"]
    result = run_cli(*args)
    assert result.exit_code == 0, result.output
    fill(disk)
    full_disk_error(["plot", run, "--out", disk / "plots", "--force"], disk)
    full_disk_error([*args, "--force"], disk)


def no_partial(root: Path) -> None:
    left = [p for p in root.rglob("*") if ".partial" in p.name]
    assert left == [], left


def test_full_disk_quickstart_leaves_no_half_built_folder(disk):
    fill(disk, 256 * 1024)
    full_disk_error(["quickstart", "--out", disk / "qs", "--docs", "41", "--updates", "1", "--systems", "concat",
                     "--device", "cpu"], disk, progress=True)
    assert sorted(p.name for p in disk.iterdir()) == ["filler"]


def test_full_disk_recipes_copy_of_a_folder_is_all_or_nothing(disk):
    fill(disk, 8 * 1024)                                   # a file or two fit, not the folder
    full_disk_error(["recipes", "copy", "quickstart", "-o", disk / "new" / "recipes"], disk)
    assert sorted(p.name for p in disk.iterdir()) == ["filler"]


def test_full_disk_first_pass_leaves_no_partial_stream(disk, synthetic_dir, sentence_level_checkpoint):
    shutil.copytree(synthetic_dir, disk / "data", ignore=shutil.ignore_patterns("raw"))
    fill(disk)
    full_disk_error(["first-pass", "-c", sentence_level_checkpoint, "--data", disk / "data", "--split", "test",
                     "--name", "fp"], disk, progress=True)
    no_partial(disk)


def test_full_disk_prepare_never_gives_sentencepiece_s_traceback(disk, tmp_path):
    """A disk nearly full when SentencePiece writes its model (it does not check its writes: the model comes out
    truncated, and loading it failed with a traceback), at several margins: one line naming the disk."""
    import random

    rng = random.Random(1)
    words = [f"w{i}" for i in range(3000)]
    for side in ("en", "de"):
        (tmp_path / f"c.{side}").write_text("".join(" ".join(rng.choice(words) for _ in range(12)) + "\n"
                                                    for _ in range(3000)))
    args = ["prepare", "text", "--train", tmp_path / "c", "--src-lang", "en", "--tgt-lang", "de", "--vocab-size", "500",
            "--out", disk / "p"]
    for leave in (300_000, 400_000, 450_000, 500_000, 550_000, 700_000):
        fill(disk, leave)
        result = run_cli(*args)
        if result.exit_code == 0:                         # it fitted: the next margin is for another size
            shutil.rmtree(disk / "p")
        else:
            assert_user_error(result, "no space left on device", str(disk))
        assert sorted(p.name for p in disk.iterdir()) == ["filler"]
        (disk / "filler").unlink()
