"""Nothing ctxmt did not write is deleted or replaced: ``--force`` removes exactly the files a manifest lists
(unchanged since), an output never lands on an input or inside an input folder, an existing file is replaced only
with ``--force``, and one ``train`` run holds its ``save_dir``.

Rows reuse :func:`tests.integration.test_bad_inputs.check_bad_input` (exit 2, one line, no traceback, the scratch
directory and the fixtures byte-identical). :func:`test_every_output_option_has_a_row` enumerates the command line:
a new command that writes a file or a folder fails it until a row here proves the one check refuses its output on
an input. The Hypothesis property generates output spellings relative to the inputs.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxmt_cli.ownership import MANIFEST, check_replaceable, read_ledger
from ctxmt_cli.recipe_catalog import RECIPES_DIR
from ctxmt_cli.run_lock import LOCK_NAME
from tests.integration.conftest import QUICKSTART, TINY_SETS, assert_user_error, output_options, run_cli
from tests.integration.test_bad_inputs import check_bad_input, placeholders, snapshot, ws  # noqa: F401
from tests.tmpfs import mounted_tmpfs

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def own(ws, synthetic_dir, concat_checkpoint):  # noqa: F811 - the fixture of test_bad_inputs, extended
    """``ws`` plus ctxmt's outputs to spoil: a prepared dataset (``ds``, its manifest and hashes copied), a training
    run (``run``), a quickstart-shaped folder holding both (``qs``), a user's ``thesis.tex`` and ``other.pt``."""
    shutil.copytree(synthetic_dir, ws / "ds")
    shutil.copytree(concat_checkpoint.parent, ws / "run", ignore=shutil.ignore_patterns("plots", LOCK_NAME))
    (ws / "qs").mkdir()
    shutil.copytree(ws / "ds", ws / "qs" / "data")
    shutil.copytree(ws / "run", ws / "qs" / "concat")
    (ws / "qs" / MANIFEST).write_text('{"ctxmt_output": 2, "command": "quickstart", "files": {}, '
                                      '"dirs": ["concat", "data"]}')
    (ws / "thesis.tex").write_text("years of work\n")
    (ws / "other.pt").write_bytes(b"a user's checkpoint")
    (ws / "ref.txt").write_text("Hello there.\n\nAnother document.\n")
    return ws


def test_a_trained_run_and_a_prepared_dataset_list_exactly_their_files(own):
    """The run's manifest accounts for every file training wrote (checkpoints, metrics, TensorBoard events): a
    --force of the folder holding them would go through, nothing being foreign or changed."""
    ledger = read_ledger(own / "run")
    assert {"checkpoint_best.pt", "checkpoint_last.pt", "metrics.jsonl"} <= set(ledger.files)
    assert all(entry["size"] > 0 and len(entry["sha256"]) == 64 for entry in ledger.files.values())
    assert "patterns" not in (own / "run" / MANIFEST).read_text()
    check_replaceable(own / "qs", "--out", command="quickstart")
    check_replaceable(own / "ds", "--out", command="prepare synthetic")
    assert not (own / "run" / LOCK_NAME).exists()                # the run let go of its folder


# ---- --force removes only what ctxmt wrote, unchanged -----------------------------------------------------------
QS = ["quickstart", "--out", "qs", "--force", "--docs", "41", "--updates", "1"]
SYN = ["prepare", "synthetic", "--out", "ds", "--docs", "41", "--force"]
FORCE_ROWS = [  # (entries a user adds or edits, arguments, fragments of the line)
    ({"qs/concat/checkpoint_my_finetuned.pt": b"mine"}, QS, ["checkpoint_my_finetuned.pt, which is not a file ctxmt"]),
    ({"qs/concat/tensorboard/notes/thesis.tex": b"mine"}, QS, ["which is a directory ctxmt did not write"]),
    ({"qs/concat/plots/x.png": b"mine"}, QS, ["plots, which is a directory ctxmt did not write"]),
    ({"qs/concat/metrics.jsonl": b"edited\n"}, QS, ["metrics.jsonl, which has changed since ctxmt wrote it"]),
    ({"qs/data/my.ref.txt": b"mine"}, QS, ["my.ref.txt, which is not a file ctxmt wrote"]),
    ({"ds/raw/contrastive/my_notes/thesis.tex": b"mine"}, SYN, ["which is a directory ctxmt did not write"]),
    ({"ds/my.ref.txt": b"mine"}, SYN, ["my.ref.txt, which is not a file ctxmt wrote"]),
    ({"ds/test.ref.txt": b"edited"}, SYN, ["test.ref.txt, which has changed since ctxmt wrote it"]),
    ({"ds/test.fp.stream.bin": b"mine"}, SYN, ["test.fp.stream.bin, which is not a file ctxmt wrote"]),
    ({"ds/" + MANIFEST: None}, SYN, ["is not a prepared dataset (no .ctxmt-output.json"]),
    ({"res/results.json": b"{}"}, ["contrastive", "synthetic:{data}", "-c", "{ckpt}", "--out", "res", "--force"],
     ["res/results.json is not a file ctxmt wrote", "nothing was replaced"]),
    ({"att/analysis.json": b"{}"}, ["analyze-attention", "-c", "{ckpt}", "--data", "{data}", "--out", "att",
                                    "--force", "--no-plots"], ["att/analysis.json is not a file ctxmt wrote"]),
]


@pytest.mark.parametrize("entries,args,needles", FORCE_ROWS)
def test_force_refuses_anything_ctxmt_did_not_write_or_that_changed(entries, args, needles, own, synthetic_dir,
                                                                    concat_checkpoint):
    for name, data in entries.items():
        path = own / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.unlink() if data is None else path.write_bytes(data)
    check_bad_input(args, [*needles, "does not replace it"], own, placeholders(data=synthetic_dir,
                                                                                 ckpt=concat_checkpoint))


def test_force_replaces_untouched_output_and_then_refuses_a_user_file(own, tmp_path):
    result = run_cli(*SYN)
    assert result.exit_code == 0, result.output
    assert read_ledger(own / "ds").command == "prepare synthetic"
    out = tmp_path / "qs2"
    for _ in range(2):                               # the second replaces the first: all of it ctxmt's, untouched
        result = run_cli("quickstart", "--out", out, "--docs", 41, "--updates", 1, "--systems", "sentence", "--force")
        assert result.exit_code == 0, result.output
    check_replaceable(out, "--out", command="quickstart")
    (out / "sentence" / "checkpoint_my_finetuned.pt").write_bytes(b"mine")
    before = snapshot(tmp_path)
    assert_user_error(run_cli("quickstart", "--out", out, "--docs", 41, "--updates", 1, "--systems", "sentence",
                              "--force"), "checkpoint_my_finetuned.pt, which is not a file ctxmt wrote")
    assert snapshot(tmp_path) == before


@pytest.fixture
def mounted(own):
    """A 4 MiB tmpfs on ``own / "disk"``, unmounted afterwards however the test ends."""
    yield from mounted_tmpfs(own / "disk", "4m")


def test_force_onto_a_mount_point_is_one_line(own, mounted):
    check_bad_input([*SYN[:3], "disk", *SYN[4:]], ["disk is a mount point", "give a folder inside it"], own, {})
    shutil.copytree(own / "ds", mounted, dirs_exist_ok=True)           # ctxmt's own dataset, on a mount point
    check_bad_input([*SYN[:3], "disk", *SYN[4:]], ["disk is a mount point"], own, {})
    check_bad_input(["prepare", "synthetic", "--out", "disk", "--docs", "41"], ["disk is a mount point"], own, {})


def test_first_pass_force_replaces_only_its_own_unchanged_stream(own, sentence_level_checkpoint):
    args = ["first-pass", "-c", sentence_level_checkpoint, "--data", own / "ds", "--split", "valid", "--name", "fp"]
    result = run_cli(*args)
    assert result.exit_code == 0, result.output
    assert "valid.fp.stream.bin" in read_ledger(own / "ds").files       # listed: prepare --force may replace it
    check_replaceable(own / "ds", "--out", command="prepare synthetic")
    (own / "ds" / "valid.fp.stream.txt").write_text("edited by hand\n")
    check_bad_input([*map(str, args), "--force"], ["valid.fp.stream.txt", "has changed since ctxmt wrote it"], own, {})


# ---- outputs never land on inputs, and an existing file needs --force ----------------------------------------
ON_INPUTS = [
    (["cxmi", "-c", "{ckpt}", "--data", "ds", "--out", "ds/test.ref.txt"], ["lies inside the input folder ds"]),
    (["cxmi", "-c", "{ckpt}", "--data", "ds", "--per-sentence", "ds/new/p.jsonl"], ["lies inside the input folder"]),
    (["analyze-attention", "-c", "{ckpt}", "--data", "ds", "--out", "ds"], ["--out ds is also an input"]),
    (["analyze-attention", "-c", "{ckpt}", "--data", "ds", "--out", "ds/att"], ["lies inside the input folder ds"]),
    (["contrastive", "synthetic:ds", "-c", "{ckpt}", "--out", "ds/res"], ["lies inside the input folder ds"]),
    (["evaluate", "-c", "{ckpt}", "--data", "ds", "--out", "ds/bleu.json"], ["lies inside the input folder ds"]),
    (["prepare", "reverse", "--data", "ds", "--out", "ds/rev"], ["lies inside the input folder ds"]),
    (["train", "{recipe}", "--set", "data.path=ds", "--set", "train.save_dir=ds/run",
      *[a for s in TINY_SETS for a in ("--set", s)]], ["train.save_dir ds/run lies inside the input folder ds"]),
    (["recipes", "copy", "quickstart/concat.yaml", "-o", str(RECIPES_DIR / "new")], ["lies inside the input folder"]),
    (["plot", "run", "--out", "run/metrics.jsonl"], ["--out run/metrics.jsonl is also an input"]),
    (["evaluate", "--hyp", "ref.txt", "--ref", "ref.txt", "--out", "thesis.tex"], ["thesis.tex already exists",
                                                                                    "--force"]),
    (["translate", "ref.txt", "-c", "{ckpt}", "-o", "thesis.tex"], ["--out thesis.tex already exists", "--force"]),
    (["translate", "ref.txt", "-c", "{ckpt}", "-o", "other.pt"], ["--out other.pt already exists"]),
    (["translate", "ref.txt", "-c", "{ckpt}", "-o", "newout/"], ["newout/ names a directory; give a file path"]),
    (["evaluate", "--hyp", "ref.txt", "--ref", "ref.txt", "--out", "newout/"], ["names a directory"]),
    (["cxmi", "-c", "{ckpt}", "--data", "{data}", "--out", "thesis.tex"], ["thesis.tex already exists", "--force"]),
    (["average", "-c", "{run}/checkpoint_2.pt", "-c", "{run}/checkpoint_4.pt", "-o", "other.pt"],
     ["other.pt already exists"]),
    (["average", "-c", "{run}/checkpoint_2.pt", "-c", "{run}/checkpoint_4.pt", "-o", "newout/"], ["names a directory"]),
    (["export", "safetensors", "-c", "{ckpt}", "-o", "other.pt"], [".safetensors"]),
    (["export", "ctranslate2", "-c", "{ckpt}", "-o", "thesis.tex"], ["thesis.tex already exists"]),
    (["first-pass", "-c", "{ckpt}", "--data", "ds", "--split", "test", "--name", "fp", "--from", "fp"],
     ["names the stream being written"]),
]
#: every command-line option that names where a command writes, and the ON_INPUTS / FORCE_ROWS rows proving it
#: goes through the one check (paths.check_not_input / check_output_file, ownership.check_replaceable)
OUTPUT_OPTIONS = {
    ("prepare", "out"): "prepare reverse --data ds --out ds/rev", ("train", "set_"): "train.save_dir=ds/run",
    ("average", "out"): "-o other.pt", ("translate", "out"): "-o thesis.tex",
    ("contrastive", "out"): "synthetic:ds", ("score-contrastive", "out"): "the alias of contrastive",
    ("evaluate", "out"): "ds/bleu.json", ("quickstart", "out"): "QS", ("analyze-attention", "out"): "ds/att",
    ("cxmi", "out"): "ds/test.ref.txt", ("cxmi", "per_sentence"): "ds/new/p.jsonl", ("plot", "out"): "run/metrics",
    ("recipes copy", "out"): "RECIPES_DIR", ("export ctranslate2", "out"): "thesis.tex",
    ("export safetensors", "out"): "other.pt", ("first-pass", "name"): "--from fp",
    # its rows need a Hugging Face Marian folder, built by that file's fixture (output exists, inside the input)
    ("import marian", "out"): "test_import_cli.py",
    # benchmarks write their own result names under their --out (a rerun replaces its figures), never an input
    ("benchmark", "out"): "exempt",
}


@pytest.mark.parametrize("args,needles", ON_INPUTS)
def test_an_output_never_lands_on_an_input_or_a_user_s_file(args, needles, own, synthetic_dir, concat_checkpoint):
    if args[:2] == ["export", "ctranslate2"]:
        pytest.importorskip("ctranslate2", reason="the ctranslate2 extra: pip install -e '.[ctranslate2]'")
    check_bad_input(args, needles, own, placeholders(data=synthetic_dir, ckpt=concat_checkpoint))


def test_force_replaces_a_named_file(own, concat_checkpoint):
    result = run_cli("translate", "ref.txt", "-c", concat_checkpoint, "-o", "thesis.tex", "--force")
    assert result.exit_code == 0, result.output
    assert len((own / "thesis.tex").read_text().splitlines()) == 3
    result = run_cli("evaluate", "--hyp", "ref.txt", "--ref", "ref.txt", "--out", "thesis.tex", "--force")
    assert result.exit_code == 0 and '"BLEU"' in (own / "thesis.tex").read_text()


def test_every_output_option_has_a_row():
    """A command that writes must come with a row above (and go through the one check) before it ships."""
    missing = {(path, param.name) for path, _, param in output_options()} - set(OUTPUT_OPTIONS)
    assert not missing, f"output options without a row in ON_INPUTS/FORCE_ROWS: {sorted(missing)}"
    rows = " ".join(" ".join(args) for args, _ in ON_INPUTS) + " ".join(" ".join(a) for _, a, _ in FORCE_ROWS)
    for key, proof in OUTPUT_OPTIONS.items():
        elsewhere = proof.endswith(".py") and (Path(__file__).parent / proof).is_file()
        assert proof in ("exempt", "QS", "RECIPES_DIR", "the alias of contrastive") or proof in rows or elsewhere, key


# ---- generated output spellings relative to the inputs ----------------------------------------------------------
BASES = st.sampled_from(["ds", "./ds", "ds/", "ds/.", "sub/../ds", "dslink", "dslink/", "ds/raw/..", "./sub/../ds/"])
TAILS = st.sampled_from(["", "/test.ref.txt", "/meta.json", "/new.json", "/raw/test.src", "/newdir/x.json", "/x/"])


@settings(max_examples=20)
@given(base=BASES, tail=TAILS, command=st.sampled_from(["cxmi", "cxmi-per-sentence", "analyze-attention"]))
def test_property_an_output_on_or_in_the_input_folder_is_refused(own, concat_checkpoint, base, tail, command):
    (own / "sub").mkdir(exist_ok=True)
    if not (own / "dslink").is_symlink():
        (own / "dslink").symlink_to(own / "ds")
    out = (base.rstrip("/") + tail) if tail else base
    ck = str(concat_checkpoint)
    args = {"cxmi": ["cxmi", "-c", ck, "--data", "ds", "--out", out],
            "cxmi-per-sentence": ["cxmi", "-c", ck, "--data", "ds", "--per-sentence", out],
            "analyze-attention": ["analyze-attention", "-c", ck, "--data", "ds", "--out", out, "--no-plots"]}[command]
    before = snapshot(own)
    result = run_cli(*args)
    line = assert_user_error(result)
    assert any(why in line for why in ("is also an input", "lies inside the input folder", "names a directory",
                                       "is a directory", "is a file, not a directory")), line
    assert snapshot(own) == before


@settings(max_examples=10)
@given(spelling=st.sampled_from(["ck.pt", "./ck.pt", "hard.pt", "cklink.pt", "sub/../ck.pt", "ref.txt", "./ref.txt"]))
def test_property_an_output_that_is_an_input_file_is_refused(own, concat_checkpoint, spelling):
    (own / "sub").mkdir(exist_ok=True)
    for name, make in (("ck.pt", shutil.copy), ("hard.pt", os.link), ("cklink.pt", os.symlink)):
        if not ((own / name).exists() or (own / name).is_symlink()):
            make(concat_checkpoint if name == "ck.pt" else own / "ck.pt", own / name)
    before = snapshot(own)
    line = assert_user_error(run_cli("translate", "ref.txt", "-c", "ck.pt", "-o", spelling, "--force"))
    assert "is also an input" in line and snapshot(own) == before


# ---- one run per save_dir ----------------------------------------------------------------------------------------
def _train(save: Path, data: Path, steps: int) -> list[str]:
    sets = [f"data.path={data}", f"train.save_dir={save}", *TINY_SETS, f"train.max_steps={steps}",
            "train.valid_every=1000"]
    return [sys.executable, "-m", "ctxmt_cli", "train", str(QUICKSTART), *[a for s in sets for a in ("--set", s)]]


def test_a_second_train_into_the_same_save_dir_stops_naming_the_first(synthetic_dir, tmp_path):
    """Two real processes: the first holds the folder (stopped with SIGSTOP once it has the lock, so the folder
    cannot change meanwhile); the second exits 2 with one line naming its PID and touches nothing."""
    save, env = tmp_path / "run", {**os.environ, "PYTHONPATH": str(ROOT)}
    log = (tmp_path / "first.log").open("w")
    first = subprocess.Popen(_train(save, synthetic_dir, 500), env=env, stdout=subprocess.DEVNULL, stderr=log)
    try:
        deadline = time.monotonic() + 120
        while not (save / LOCK_NAME).is_file() or not (save / LOCK_NAME).read_text().strip():
            assert first.poll() is None and time.monotonic() < deadline, (tmp_path / "first.log").read_text()
            time.sleep(0.05)
        os.kill(first.pid, signal.SIGSTOP)
        before = snapshot(save)
        second = subprocess.run(_train(save, synthetic_dir, 4), env=env, capture_output=True, text=True,
                                timeout=300)
        lines = second.stderr.strip().splitlines()
        assert second.returncode == 2 and len(lines) == 1 and "Traceback" not in second.stderr, second.stderr
        assert f"is in use by another ctxmt train run (PID {first.pid})" in lines[0]
        assert snapshot(save) == before
        for resume in (["--resume"],):                           # a resume is held off the same way
            again = subprocess.run(_train(save, synthetic_dir, 4) + resume, env=env, capture_output=True,
                                   text=True, timeout=300)
            assert again.returncode == 2 and f"PID {first.pid}" in again.stderr and snapshot(save) == before
    finally:
        os.kill(first.pid, signal.SIGCONT)
        first.send_signal(signal.SIGINT)
        first.wait(timeout=120)
        log.close()
    assert first.returncode == 130, (tmp_path / "first.log").read_text()
    assert not (save / LOCK_NAME).exists()                       # the first let go as it ended
