"""Bad inputs a user can give, one table per command: one line on stderr, exit 2, nothing written or left behind.

Each row is (arguments, fragments the error line must hold). Arguments may name ``{data}`` (a prepared
synthetic dataset), ``{ckpt}`` and ``{run}`` (a trained checkpoint and its directory) and ``{recipe}``; the
rest are files of a scratch directory the command runs in (see :func:`ws`). The next bad input is one row.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ctxmt_cli.models.loading import read_checkpoint
from tests.integration.conftest import QUICKSTART, ROOT, TINY_SETS, assert_user_error, run_cli


@pytest.fixture
def ws(tmp_path, monkeypatch) -> Path:
    """A scratch working directory with files of every wrong kind."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("a file, not a directory\n")
    (tmp_path / "adir").mkdir()
    (tmp_path / "doc.txt").write_text("Hello there.\n\nAnother document.\n")
    (tmp_path / "notprep").mkdir()
    (tmp_path / "notprep" / "thesis.tex").write_text("years of work\n")
    (tmp_path / "empty.en").write_text("")
    (tmp_path / "empty.de").write_text("")
    (tmp_path / "small.en").write_text("a small corpus\nof two lines\n")
    (tmp_path / "small.de").write_text("ein kleiner Korpus\naus zwei Zeilen\n")
    (tmp_path / "folder.en").mkdir()
    (tmp_path / "folder.de").write_text("x\n")
    (tmp_path / "dup.yaml").write_text("train:\n  lr: 1.0e-3\nmodel:\n  family: sentence\ntrain:\n  lr: 2.0e-3\n")
    (tmp_path / "latin1.yaml").write_bytes(b"name: caf\xe9\n")
    (tmp_path / "ro").mkdir()
    os.chmod(tmp_path / "ro", 0o555)
    yield tmp_path
    os.chmod(tmp_path / "ro", 0o755)


def snapshot(*roots: Path) -> dict:
    """Every path under ``roots`` with its bytes (None for a directory)."""
    return {str(p): (p.read_bytes() if p.is_file() else None) for root in roots for p in [root, *root.rglob("*")]}


def check_bad_input(args: list[str], needles: list[str], ws: Path, paths: dict) -> None:
    """Run ``ctxmt ARGS``: one clear line, exit 2, and ``ws`` and the fixtures exactly as they were."""
    args = [a.format(**paths) for a in args]
    if any("ro/" in a or a == "ro" for a in args) and os.access(ws / "ro", os.W_OK):
        pytest.skip("chmod does not stop this user (root) from writing")
    roots = [ws, *(Path(p) for k, p in paths.items() if k in ("data", "run"))]
    before = snapshot(*roots)
    assert_user_error(run_cli(*args), *needles)
    assert snapshot(*roots) == before                  # nothing written, overwritten or left behind


def placeholders(data: Path | None = None, ckpt: Path | None = None) -> dict:
    """What a row's ``{data}``, ``{ckpt}``, ``{run}`` and ``{recipe}`` stand for."""
    found = {"recipe": str(QUICKSTART)}
    if data is not None:
        found["data"] = str(data)
    if ckpt is not None:
        found.update(ckpt=str(ckpt), run=str(ckpt.parent))
    return found


def tiny(save_dir: str) -> list[str]:
    sets = ["data.path={data}", f"train.save_dir={save_dir}", *TINY_SETS]
    return [arg for s in sets for arg in ("--set", s)]


PREPARE = [
    (["prepare", "text", "--train", "small", "--src-lang", "en", "--tgt-lang", "de", "--vocab-size", "3",
      "--out", "p"], ["prepare", "--vocab-size 3", "8"]),
    (["prepare", "synthetic", "--docs", "10", "--out", "p"], ["prepare", "--docs 10", "41"]),
    (["prepare", "text", "--train", "empty", "--src-lang", "en", "--tgt-lang", "de", "--out", "p"],
     ["corpus is empty", "empty.en"]),
    (["prepare", "text", "--train", "folder", "--src-lang", "en", "--tgt-lang", "de", "--out", "p"],
     ["folder.en", "is a directory, not a file"]),
    (["prepare", "text", "--train", "small", "--src-lang", "en", "--tgt-lang", "de", "--out", "notprep",
      "--force"], ["notprep", "not a prepared dataset", ".ctxmt-output.json"]),
    (["prepare", "text", "--train", "small", "--src-lang", "en", "--tgt-lang", "de", "--out", "afile",
      "--force"], ["afile", "not a prepared dataset"]),
    (["prepare", "text", "--train", "small", "--src-lang", "en", "--tgt-lang", "de", "--out", "afile/sub/p"],
     ["afile/sub/p", "afile is a file"]),
    (["prepare", "synthetic", "--docs", "41", "--out", "afile/p"], ["afile/p", "afile is a file"]),
    (["prepare", "text", "--train", "small", "--src-lang", "en", "--tgt-lang", "de", "--out", "ro/p"],
     ["ro/p", "permission denied"]),
    (["prepare", "text", "--train", "small", "--src-lang", "en", "--tgt-lang", "de", "--out", "p", "--reverse",
      "r.pt"], ["--reverse does not apply to `ctxmt prepare text`", "docrepair"]),
    (["prepare", "reverse", "--out", "p"], ["prepare reverse needs --data DIR"]),
    (["prepare", "reverse", "--data", "notprep", "--out", "p"], ["notprep", "not a prepared dataset"]),
    (["prepare", "reverse", "--data", "notprep", "--out", "p", "--vocab-size", "100"],
     ["--vocab-size does not apply to `ctxmt prepare reverse`", "--data"]),
]


@pytest.mark.parametrize("args,needles", PREPARE)
def test_prepare_bad_inputs(args, needles, ws):
    check_bad_input(args, needles, ws, placeholders())


TRAIN = [
    (["train", "{recipe}", *tiny("afile")], ["train.save_dir afile", "is a file, not a directory"]),
    (["train", "{recipe}", *tiny("afile/sub/run")], ["afile/sub/run", "afile is a file"]),
    (["train", "{recipe}", *tiny("ro/run")], ["ro/run", "permission denied"]),
    (["train", "{recipe}", *tiny("run"), "--set", "data.path=afile"], ["prepared data is a file, not a directory"]),
    (["train", "dup.yaml", "--dry-run"], ["dup.yaml:5", "'train'", "twice", "first at line 1"]),
    (["train", "latin1.yaml", "--dry-run"], ["latin1.yaml:1", "not UTF-8 text"]),
    (["train", "adir", "--dry-run"], ["recipe is a directory, not a file", "adir"]),
]


@pytest.mark.parametrize("args,needles", TRAIN)
def test_train_bad_inputs(args, needles, ws, synthetic_dir):
    check_bad_input(args, needles, ws, placeholders(data=synthetic_dir))


TRANSLATE = [
    (["translate", "doc.txt", "-c", "{ckpt}", "-o", "adir"], ["--out adir is a directory"]),
    # the output is checked before anything is loaded or translated
    (["translate", "doc.txt", "-c", "none.pt", "-o", "adir"], ["--out adir is a directory"]),
    (["translate", "doc.txt", "-c", "{ckpt}", "-o", "afile/out.txt"], ["afile/out.txt", "afile is a file"]),
    (["translate", "doc.txt", "-c", "{ckpt}", "-o", "nodir/out.txt"], ["nodir", "create it first"]),
    (["translate", "doc.txt", "-c", "{ckpt}", "-o", "doc.txt"], ["--out doc.txt is also an input"]),
    (["translate", "doc.txt", "-c", "{ckpt}", "-o", "{ckpt}"], ["is also an input"]),
    (["translate", "doc.txt", "-c", "{ckpt}", "-o", "ro/out.txt"], ["ro/out.txt", "permission denied"]),
    (["translate", "doc.txt", "-c", "adir"], ["checkpoint is a directory, not a file", "adir"]),
    (["translate", "adir", "-c", "{ckpt}"], ["is a directory, not a file", "adir"]),
    (["translate", "doc.txt", "-c", "{ckpt}", "--device", "tpu"],
     ["translate", "--device tpu", "auto | cpu | cuda | cuda:N"]),
    (["translate", "doc.txt", "-c", "{ckpt}", "--beam", "0"], ["translate", "--beam 0", "1"]),
    (["translate", "doc.txt", "-c", "{ckpt}", "--lenpen", "-1"], ["translate", "--lenpen -1", "0"]),
    (["translate", "doc.txt", "-c", "{ckpt}", "--batch-docs", "0"], ["translate", "--batch-docs 0", "1"]),
    (["translate", "doc.txt", "-c", "{ckpt}", "--context", "-1"], ["translate", "--context -1", "0"]),
    (["translate", "doc.txt", "-c", "{ckpt}", "--beam", "two"], ["translate", "--beam two"]),
    (["translate", "doc.txt", "--bogus"], ["translate", "--bogus"]),
    (["translate", "doc.txt", "-c", "{ckpt}", "--repair", "{ckpt}"], ["not a DocRepair model", "prepare docrepair"]),
    (["translate", "doc.txt", "-c", "{ckpt}", "--repair", "none.pt"], ["checkpoint not found", "none.pt"]),
    (["translate", "doc.txt", "-c", "{ckpt}", "--repair", "{ckpt}", "-o", "{ckpt}"], ["is also an input"]),
]


@pytest.mark.parametrize("args,needles", TRANSLATE)
def test_translate_bad_inputs(args, needles, ws, concat_checkpoint):
    check_bad_input(args, needles, ws, placeholders(ckpt=concat_checkpoint))


CONTRASTIVE = [
    (["contrastive", "synthetic:{data}", "-c", "{ckpt}", "--out", "afile"], ["--out afile is a file"]),
    (["contrastive", "synthetic:{data}", "-c", "{ckpt}", "--out", "afile/res"], ["afile/res", "afile is a file"]),
    (["contrastive", "synthetic:{data}", "-c", "{ckpt}", "--out", "ro/res"], ["ro/res", "permission denied"]),
    (["contrastive", "synthetic:{data}", "-c", "{ckpt}", "--max-tokens", "-5"], ["--max-tokens -5", "16"]),
    (["contrastive", "synthetic:{data}", "-c", "{ckpt}", "--device", "tpu"], ["--device tpu"]),
]


@pytest.mark.parametrize("args,needles", CONTRASTIVE)
def test_contrastive_bad_inputs(args, needles, ws, synthetic_dir, concat_checkpoint):
    check_bad_input(args, needles, ws, placeholders(data=synthetic_dir, ckpt=concat_checkpoint))


AVERAGE = [
    (["average", "-c", "{run}/checkpoint_2.pt", "-c", "{run}/checkpoint_4.pt", "-o", "{run}/checkpoint_2.pt"],
     ["checkpoint_2.pt is also an input"]),
    (["average", "-c", "{run}/checkpoint_2.pt", "-c", "{run}/checkpoint_4.pt", "-o", "{run}/checkpoint_2.pt",
      "--force"], ["checkpoint_2.pt is also an input"]),
    (["average", "-c", "{run}/checkpoint_2.pt", "-c", "{run}/checkpoint_4.pt", "-o", "{run}/checkpoint_best.pt"],
     ["checkpoint_best.pt already exists", "--force"]),
    (["average", "-c", "{run}/checkpoint_2.pt", "-c", "{run}/checkpoint_4.pt", "-o", "adir"],
     ["--out adir is a directory"]),
    (["average", "-c", "{run}/checkpoint_2.pt", "-o", "afile/avg.pt"], ["afile/avg.pt", "afile is a file"]),
    (["average", "-c", "{run}/checkpoint_2.pt", "-o", "ro/avg.pt"], ["ro/avg.pt", "permission denied"]),
]


@pytest.mark.parametrize("args,needles", AVERAGE)
def test_average_bad_inputs(args, needles, ws, concat_checkpoint):
    check_bad_input(args, needles, ws, placeholders(ckpt=concat_checkpoint))


EVALUATE = [
    (["evaluate", "--hyp", "doc.txt", "--ref", "doc.txt", "--out", "adir"], ["--out adir is a directory"]),
    (["evaluate", "--hyp", "doc.txt", "--ref", "doc.txt", "--out", "afile/bleu.json"], ["afile is a file"]),
    (["evaluate", "--hyp", "doc.txt", "--ref", "doc.txt", "--out", "ro/bleu.json"], ["permission denied"]),
    (["evaluate", "--hyp", "adir", "--ref", "doc.txt"], ["adir", "is a directory, not a file"]),
    (["evaluate", "--hyp", "doc.txt", "--ref", "doc.txt", "--device", "tpu"], ["evaluate", "--device tpu"]),
    (["evaluate", "--hyp", "doc.txt", "--ref", "doc.txt", "--context", "1"], ["--context", "--checkpoint"]),
]


@pytest.mark.parametrize("args,needles", EVALUATE)
def test_evaluate_bad_inputs(args, needles, ws):
    check_bad_input(args, needles, ws, placeholders())


QUICKSTART_ROWS = [
    (["quickstart", "--out", "afile"], ["--out afile is a file"]),
    (["quickstart", "--out", "afile/q"], ["afile/q", "afile is a file"]),
    (["quickstart", "--out", "ro/q"], ["ro/q", "permission denied"]),
    (["quickstart", "--docs", "10", "--out", "q"], ["quickstart", "--docs 10", "41"]),
    (["quickstart", "--updates", "0", "--out", "q"], ["quickstart", "--updates 0", "1"]),
    (["quickstart", "--systems", "concat,hanoi", "--out", "q"], ["'hanoi'", "available", "grouping", "sentence"]),
    (["quickstart", "--systems", "concat,concat", "--out", "q"], ["'concat' twice"]),
    (["quickstart", "--systems", ",", "--out", "q"], ["--systems is empty"]),
]


@pytest.mark.parametrize("args,needles", QUICKSTART_ROWS)
def test_quickstart_bad_inputs(args, needles, ws):
    check_bad_input(args, needles, ws, placeholders())


PLOT = [
    (["plot", "adir"], ["no metrics.jsonl in adir", "train.save_dir"]),
    (["plot", "afile"], ["run directory afile is a file, not a directory"]),
    (["plot", "nowhere"], ["run directory nowhere not found"]),
    (["plot", "{run}", "adir", "--out", "p"], ["no metrics.jsonl in adir"]),
    (["plot", "{run}", "--out", "afile"], ["--out afile is a file"]),
    (["plot", "{run}", "--out", "afile/p"], ["afile/p", "afile is a file"]),
    (["plot", "{run}", "--out", "ro/p"], ["ro/p", "permission denied"]),
]


@pytest.mark.parametrize("args,needles", PLOT)
def test_plot_bad_inputs(args, needles, ws, concat_checkpoint):
    pytest.importorskip("matplotlib", reason="matplotlib is in the test extra: pip install -e '.[test]'")
    check_bad_input(args, needles, ws, placeholders(ckpt=concat_checkpoint))


CXMI = [
    (["cxmi", "-c", "{ckpt}", "--out", "adir"], ["--out adir is a directory"]),
    (["cxmi", "-c", "{ckpt}", "--per-sentence", "afile/p.jsonl"], ["afile/p.jsonl", "afile is a file"]),
    (["cxmi", "-c", "{ckpt}", "--out", "ro/c.json"], ["ro/c.json", "permission denied"]),
    (["cxmi", "-c", "{ckpt}", "--out", "{ckpt}"], ["is also an input"]),
    (["cxmi", "-c", "{ckpt}", "--out", "c.json", "--per-sentence", "c.json"], ["the same file", "c.json"]),
    (["cxmi", "-c", "adir"], ["checkpoint is a directory, not a file", "adir"]),
    (["cxmi", "-c", "{ckpt}", "--data", "notprep"], ["notprep", "not a prepared dataset"]),
    (["cxmi", "-c", "{ckpt}", "--split", "dev"], ["'dev'", "available"]),
    (["cxmi", "-c", "{ckpt}", "--context", "-1"], ["--context -1"]),
    (["cxmi", "-c", "{ckpt}", "--device", "tpu"], ["cxmi", "--device tpu"]),
]


@pytest.mark.parametrize("args,needles", CXMI)
def test_cxmi_bad_inputs(args, needles, ws, synthetic_dir, concat_checkpoint):
    check_bad_input(args, needles, ws, placeholders(data=synthetic_dir, ckpt=concat_checkpoint))


DOCREPAIR = [
    (["first-pass", "-c", "{ckpt}", "--data", "{data}", "--split", "dev"], ["split 'dev' is not in", "available"]),
    (["first-pass", "-c", "{ckpt}", "--data", "notprep", "--split", "test"], ["notprep", "not a prepared dataset"]),
    (["first-pass", "-c", "{ckpt}", "--data", "{data}", "--split", "test", "--name", "a.b"], ["--name 'a.b'"]),
    (["first-pass", "-c", "{ckpt}", "--data", "{data}", "--split", "test", "--from", "tgt"],
     ["translates src → tgt", "the tgt side", "tgt → src model"]),
    (["first-pass", "-c", "{ckpt}", "--data", "{data}", "--split", "test", "--from", "back"],
     ["no finished first-pass stream 'back'", "ctxmt first-pass"]),
    (["first-pass", "-c", "{ckpt}", "--data", "{data}", "--split", "test", "--from", "fp", "--name", "fp"],
     ["--from fp: it names the stream being written"]),
    (["first-pass", "-c", "adir", "--data", "{data}", "--split", "test"], ["checkpoint is a directory", "adir"]),
    (["first-pass", "-c", "{ckpt}", "--data", "{data}", "--split", "test", "--device", "tpu"], ["--device tpu"]),
    (["first-pass", "-c", "{ckpt}", "--data", "{data}", "--split", "test", "--chunk-docs", "0"], ["--chunk-docs 0"]),
    (["prepare", "docrepair", "--data", "{data}", "--forward", "{ckpt}", "--out", "dr"], ["needs --reverse CKPT"]),
    (["prepare", "docrepair", "--reverse", "{ckpt}", "--forward", "{ckpt}", "--out", "dr"], ["needs --data DIR"]),
    (["prepare", "docrepair", "--data", "{data}", "--reverse", "{ckpt}", "--forward", "{ckpt}", "--out", "dr"],
     ["translates src → tgt", "the tgt side", "tgt → src model"]),          # a forward model as --reverse
    (["prepare", "docrepair", "--data", "{data}", "--reverse", "{ckpt}", "--forward", "{ckpt}", "--out", "dr",
      "--moses"], ["--moses does not apply to `ctxmt prepare docrepair`"]),
    (["prepare", "docrepair", "--data", "{data}", "--reverse", "{ckpt}", "--forward", "{ckpt}", "--out", "dr",
      "--stride", "5"], ["--group-size 4 --stride 5"]),
    (["prepare", "docrepair", "--data", "{data}", "--reverse", "{ckpt}", "--forward", "{ckpt}", "--out", "dr",
      "--splits", "train,train"], ["--splits 'train,train'", "each once"]),
    (["prepare", "docrepair", "--data", "{data}", "--reverse", "{ckpt}", "--forward", "{ckpt}", "--out", "dr",
      "--splits", "train,dev"], ["split 'dev' is not in"]),
    (["prepare", "docrepair", "--data", "{data}", "--reverse", "{ckpt}", "--forward", "{ckpt}", "--out", "afile"],
     ["afile already exists", "--force"]),
    (["prepare", "docrepair", "--data", "{data}", "--reverse", "{ckpt}", "--forward", "{ckpt}", "--out", "dr",
      "--device", "tpu"], ["--device tpu"]),
    (["prepare", "reverse", "--data", "{data}", "--out", "{data}", "--force"], ["is the --data directory"]),
    (["prepare", "reverse", "--data", "{data}", "--out", "r", "--splits", "train"],
     ["--splits does not apply to `ctxmt prepare reverse`"]),
]


@pytest.mark.parametrize("args,needles", DOCREPAIR)
def test_docrepair_bad_inputs(args, needles, ws, synthetic_dir, concat_checkpoint):
    check_bad_input(args, needles, ws, placeholders(data=synthetic_dir, ckpt=concat_checkpoint))


def test_first_pass_refuses_an_existing_stream_and_another_vocabulary(ws, synthetic_dir, concat_checkpoint):
    from ctxmt_cli.data.store import PreparedData
    from ctxmt_cli.data.streams import StreamWriter

    data = shutil.copytree(synthetic_dir, ws / "withstream", ignore=shutil.ignore_patterns("raw"))
    store = PreparedData(data).split("valid")
    writer = StreamWriter(data, "valid", "fp", PreparedData(data).meta["dtype"], {"side": "tgt"})
    writer.start(force=False)
    writer.append([[store.tgt(i).tolist() for i in range(a, b)] for a, b in store.documents()],
                  [["x"] * (b - a) for a, b in store.documents()])
    writer.finish({"side": "tgt"})
    found = placeholders(ckpt=concat_checkpoint)
    check_bad_input(["first-pass", "-c", "{ckpt}", "--data", "withstream", "--split", "valid", "--name", "fp"],
                    ["stream 'fp' of split 'valid' exists already", "--force"], ws, found)
    assert run_cli("prepare", "synthetic", "--docs", "41", "--seed", "2", "--out", ws / "other").exit_code == 0
    check_bad_input(["first-pass", "-c", "{ckpt}", "--data", "other", "--split", "test"],
                    ["was trained with another vocabulary than other"], ws, found)


# ---- a full disk: one line, the previous output still there and loadable, no partial or temp file -----------

def _full_disk(path) -> None:
    """What a full disk does to a write: some bytes land, then ENOSPC (``path``: a path or an open file)."""
    if hasattr(path, "write"):
        path.write(b"half")
        path = path.name
    else:
        Path(path).write_bytes(b"half")
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))


def test_full_disk_while_training_keeps_the_last_checkpoint(synthetic_dir, concat_checkpoint, tmp_path, monkeypatch):
    run = shutil.copytree(concat_checkpoint.parent, tmp_path / "run")
    before = snapshot(run)
    monkeypatch.setattr(torch, "save", lambda obj, f, *a, **k: _full_disk(f))
    sets = [a.format(data=synthetic_dir) for a in tiny(str(run))] + ["--set", "train.max_steps=6"]
    assert_user_error(run_cli("train", QUICKSTART, "--resume", "--allow-changed", "train.max_steps", *sets),
                      "no space left on device", str(run))
    monkeypatch.undo()
    after = snapshot(run)
    assert _without_metrics(after) == _without_metrics(before)    # the log grew; nothing else changed
    assert read_checkpoint(run / "checkpoint_last.pt")["state"]["step"] == 4


def _without_metrics(listing: dict) -> dict:
    """A run folder's snapshot less metrics.jsonl, and less its size and hash in the manifest (which follows it)."""
    kept = {}
    for path, data in listing.items():
        if path.endswith("metrics.jsonl"):
            continue
        if path.endswith(".ctxmt-output.json"):
            record = json.loads(data)
            record["files"].pop("metrics.jsonl", None)
            data = record
        kept[path] = data
    return kept


def _interrupted(path) -> None:
    """Ctrl-C while a write is half done."""
    Path(path).write_bytes(b"half")
    raise KeyboardInterrupt


@pytest.mark.parametrize("failure,code,line", [(_full_disk, 2, "no space left on device: out.txt"),
                                               (_interrupted, 130, "ctxmt: interrupted")])
def test_failed_translation_write_keeps_the_old_output(concat_checkpoint, ws, monkeypatch, failure, code, line):
    (ws / "out.txt").write_text("the previous translation\n")
    before = snapshot(ws)
    from ctxmt_cli.decode.documents import DocumentWriter
    # the translation is streamed into a temporary file beside out.txt: its first write fails
    monkeypatch.setattr(DocumentWriter, "write", lambda self, text: self._named(lambda: failure(self.tmp)))
    result = run_cli("translate", "doc.txt", "-c", concat_checkpoint, "-o", "out.txt", "--force")
    monkeypatch.undo()
    assert result.exit_code == code and "Traceback" not in result.output
    assert len(result.stderr.strip().splitlines()) == 1 and line in result.stderr
    assert snapshot(ws) == before                      # no .out.txt.tmpPID, the old output untouched


def test_full_disk_while_preparing_keeps_the_old_dataset(ws, monkeypatch):
    args = ["prepare", "text", "--train", "small", "--src-lang", "en", "--tgt-lang", "de", "--out", "p"]
    assert run_cli(*args).exit_code == 0
    before = snapshot(ws)
    def write_meta(directory, meta):
        _full_disk(directory / "meta.json")

    monkeypatch.setattr("ctxmt_cli.data.prepare.write_meta", write_meta)
    assert_user_error(run_cli(*args, "--force"), "no space left on device")
    monkeypatch.undo()
    assert snapshot(ws) == before


# ---- inputs that are not regular files: a named pipe, a device, a directory (never opened: a pipe would block) ---
NOT_REGULAR = [
    (["translate", "fifo", "-c", "{ckpt}", "-o", "out.txt"],
     ["input file is not a regular file (a named pipe): fifo", "give a file (use - for stdin)"]),
    (["translate", "doc.txt", "-c", "fifo", "-o", "out.txt"],
     ["checkpoint is not a regular file (a named pipe): fifo"]),
    (["translate", "doc.txt", "-c", "/dev/null", "-o", "out.txt"], ["checkpoint is not a regular file (a character"]),
    (["translate", "doc.txt", "-c", "{ckpt}", "--repair", "fifo"], ["checkpoint is not a regular file", "fifo"]),
    (["evaluate", "--hyp", "fifo", "--ref", "doc.txt"], ["hyp file is not a regular file (a named pipe): fifo",
                                                          "(use - for stdin)"]),
    (["evaluate", "--hyp", "doc.txt", "--ref", "/dev/null"], ["is not a regular file (a character device): /dev/null"]),
    (["prepare", "text", "--train", "pipe", "--src-lang", "en", "--tgt-lang", "de", "--out", "p"],
     ["pipe.en", "not a regular file (a named pipe)"]),
    (["prepare", "jsonl", "--train", "fifo", "--out", "p"], ["not a regular file (a named pipe): fifo"]),
    (["contrastive", "jsonl:fifo", "-c", "{ckpt}", "--out", "res"], ["jsonl test set is not a regular file", "fifo"]),
    (["contrastive", "jsonl:adir", "-c", "{ckpt}", "--out", "res"], ["jsonl test set is a directory, not a file"]),
    (["contrastive", "voita:fifo", "-c", "{ckpt}", "--out", "res"], ["Voita test set is not a regular file", "fifo"]),
    (["cxmi", "-c", "fifo"], ["checkpoint is not a regular file (a named pipe): fifo"]),
    (["inspect", "-c", "fifo"], ["not a regular file", "fifo"]),
    (["train", "fifo", "--dry-run"], ["recipe is not a regular file: fifo"]),
]


@pytest.mark.parametrize("args,needles", NOT_REGULAR)
def test_not_a_regular_file_is_said_so(args, needles, ws, concat_checkpoint):
    os.mkfifo(ws / "fifo")
    os.mkfifo(ws / "pipe.en")
    (ws / "pipe.de").write_text("x\n")
    check_bad_input(args, needles, ws, placeholders(ckpt=concat_checkpoint))


def _ctxmt(*args: str, stdin=None, privileged: bool = True) -> subprocess.CompletedProcess:
    """``python -m ctxmt_cli ARGS`` in a process of its own (``privileged=False``: root without the capabilities that
    let it read any file, so a chmod 000 file is unreadable as for any user)."""
    command = [sys.executable, "-m", "ctxmt_cli", *args]
    if not privileged:
        command = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", *command]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(command, input=stdin, capture_output=True, timeout=600, env=env)


def test_dev_stdin_as_a_path_points_to_dash(ws, concat_checkpoint):
    """``/dev/stdin`` is a pipe here: reading it as a file would take the input away from ``-``'s reader."""
    done = _ctxmt("translate", "/dev/stdin", "-c", str(concat_checkpoint), "-o", "out.txt", stdin=b"Hello.\n")
    lines = done.stderr.decode().strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "input file is not a regular file (a named pipe): /dev/stdin; give a file (use - for stdin)" in lines[0]
    assert not (ws / "out.txt").exists()


@pytest.mark.parametrize("args,needles", [
    (["translate", "locked.txt", "-c", "{ckpt}", "-o", "out.txt"],
     ["input file cannot be read (permission denied): locked.txt", "chmod u+r"]),
    (["translate", "doc.txt", "-c", "locked.pt", "-o", "out.txt"], ["locked.pt", "is not readable"]),   # click's check
    (["train", "{recipe}", "--dry-run", "--set", "train.init_from=locked.pt"],
     ["train.init_from: checkpoint cannot be read (permission denied): locked.pt"]),
    (["cxmi", "-c", "{ckpt}", "--data", "pd", "--out", "c.json"], ["permission denied", "pd/spm.model"]),
])
def test_an_unreadable_file_is_a_permission_problem_not_damage(args, needles, ws, synthetic_dir, concat_checkpoint):
    (ws / "locked.txt").write_text("Hello.\n")
    shutil.copyfile(concat_checkpoint, ws / "locked.pt")
    shutil.copytree(synthetic_dir, ws / "pd", ignore=shutil.ignore_patterns("raw"))
    for name in ("locked.txt", "locked.pt", "pd/spm.model"):
        os.chmod(ws / name, 0)
    names = sorted(ws.rglob("*"))
    before = snapshot(ws) if os.access(ws / "locked.txt", os.R_OK) else None   # a snapshot reads every file
    args = [a.format(**placeholders(ckpt=concat_checkpoint)) for a in args]
    if os.access(ws / "locked.txt", os.R_OK):           # root: run without the capabilities that bypass chmod
        if shutil.which("setpriv") is None:
            pytest.skip("this user reads any file, and setpriv is not here to drop that")
        done = _ctxmt(*args, privileged=False)
        code, text = done.returncode, done.stderr.decode()
    else:
        result = run_cli(*args)
        code, text = result.exit_code, result.stderr
    assert code == 2 and len(text.strip().splitlines()) == 1 and "Traceback" not in text, text
    assert all(needle in text for needle in needles) and "damaged" not in text and "truncated" not in text, text
    assert sorted(ws.rglob("*")) == names and (before is None or snapshot(ws) == before)


SPLIT_NAMES = [
    (["first-pass", "-c", "{ckpt}", "--data", "{data}", "--split", "../test"],
     ["split '../test' is not in", "a split is a name such as test, not a path"]),
    (["cxmi", "-c", "{ckpt}", "--data", "{data}", "--split", "test/"], ["a split is a name such as test, not a path"]),
    (["first-pass", "-c", "{ckpt}", "--data", "{data}", "--split", "dev"],
     ["split 'dev' is not in", "pick one of the available splits"]),
]


@pytest.mark.parametrize("args,needles", SPLIT_NAMES)
def test_a_split_is_a_name_not_a_path(args, needles, ws, synthetic_dir, concat_checkpoint):
    check_bad_input(args, needles, ws, placeholders(data=synthetic_dir, ckpt=concat_checkpoint))
