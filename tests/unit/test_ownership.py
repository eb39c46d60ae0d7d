"""``--force`` by exact ownership: a manifest lists every file ctxmt wrote with its size and sha256, and a folder
is replaced only when every entry in it is listed and unchanged; a user's file, a folder ctxmt did not make, a
link, a mount point, a file edited since or a running run's lock is refused in one line and nothing is deleted.
The Hypothesis property mixes generated user entries into a ctxmt-written folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.ownership import (
    MANIFEST,
    check_files_replaceable,
    check_replaceable,
    claim,
    read_ledger,
    record,
    write_manifest,
)
from ctxmt_cli.replacing import build_dir, rebuilding
from ctxmt_cli.run_lock import LOCK_NAME
from tests.tmpfs import mounted_tmpfs


def listing(root: Path) -> dict:
    """Every path under ``root`` with its bytes (None for a folder, the target for a link, the kind otherwise)."""
    found = {}
    for p in sorted(root.rglob("*")):
        found[str(p.relative_to(root))] = (os.readlink(p) if p.is_symlink() else None if p.is_dir() else
                                           p.read_bytes() if p.is_file() else "special")
    return found


def _owned(root: Path, command: str = "test") -> Path:
    out = root / "out"
    out.mkdir()
    (out / "a.bin").write_bytes(b"a")
    (out / "sub").mkdir()
    (out / "sub" / "b.txt").write_text("b")
    write_manifest(out, command)
    return out


def test_the_manifest_lists_every_file_with_size_and_hash(tmp_path):
    out = _owned(tmp_path)
    record_ = json.loads((out / MANIFEST).read_text())
    assert record_["ctxmt_output"] == 2 and record_["command"] == "test" and record_["dirs"] == ["sub"]
    assert sorted(record_["files"]) == ["a.bin", "sub/b.txt"] and "patterns" not in record_
    assert record_["files"]["a.bin"] == {"size": 1, "sha256": __import__("hashlib").sha256(b"a").hexdigest()}
    check_replaceable(out, "--out", command="test")


@pytest.mark.parametrize("spoil,needle", [
    (lambda out: (out / "notes.txt").write_text("mine"), "notes.txt, which is not a file ctxmt wrote"),
    (lambda out: (out / "sub" / "notes.txt").write_text("mine"), "notes.txt, which is not a file ctxmt wrote"),
    (lambda out: (out / "photos").mkdir(), "photos, which is a directory ctxmt did not write"),
    (lambda out: (out / "link").symlink_to("/etc"), "link, which is a symbolic link"),
    (lambda out: ((out / "sub" / "b.txt").unlink(), (out / "sub" / "b.txt").symlink_to("/etc/hostname")),
     "b.txt, which is a symbolic link"),
    (lambda out: (out / "a.bin").write_bytes(b"b"), "a.bin, which has changed since ctxmt wrote it"),
    (lambda out: (out / "a.bin").write_bytes(b"ab"), "a.bin, which has changed since ctxmt wrote it"),
    (lambda out: (out / "checkpoint_my_finetuned.pt").write_bytes(b"c"), "checkpoint_my_finetuned.pt, which is not"),
    (lambda out: (out / "test.fp.stream.bin").write_bytes(b"c"), "test.fp.stream.bin, which is not a file"),
    (lambda out: os.mkfifo(out / "pipe"), "pipe, which is not a file ctxmt wrote"),
    (lambda out: (out / MANIFEST).unlink(), "is not a directory ctxmt wrote (no .ctxmt-output.json"),
    (lambda out: (out / MANIFEST).write_text("{not json"), "is not a directory ctxmt wrote (no .ctxmt-output.json"),
])
def test_anything_ctxmt_did_not_write_or_that_changed_stops_force(tmp_path, spoil, needle):
    out = _owned(tmp_path)
    spoil(out)
    before = listing(tmp_path)
    with pytest.raises(CtxmtError, match="nothing was deleted") as caught:
        check_replaceable(out, "--out", command="test")
    assert needle in str(caught.value) and len(str(caught.value).splitlines()) == 1
    with pytest.raises(CtxmtError):
        build_dir(out, "test", lambda tmp: (tmp / "new.bin").write_bytes(b"new"), force=True)
    assert listing(tmp_path) == before


def test_an_older_manifest_accounts_for_its_exact_names_and_no_pattern(tmp_path):
    out = tmp_path / "old"
    out.mkdir()
    (out / "meta.json").write_text("{}")
    (out / "raw").mkdir()
    (out / "raw" / "test.src").write_text("x")
    (out / MANIFEST).write_text(json.dumps({"ctxmt_output": 1, "command": "prepare", "entries": [
        "meta.json", "raw", "raw/test.src"], "patterns": ["*.stream.*", "raw/*", "*.ref.txt"]}))
    check_replaceable(out, "--out", command="prepare text")
    for name in ("my.ref.txt", "test.fp.stream.bin", "raw/contrastive/my_notes/thesis.tex"):
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text("a user's")
        with pytest.raises(CtxmtError, match="which is (not a file|a directory) ctxmt"):
            check_replaceable(out, "--out", command="prepare text")
        (out / name).unlink()
        if name.startswith("raw/contrastive"):
            (out / "raw" / "contrastive" / "my_notes").rmdir()
            (out / "raw" / "contrastive").rmdir()


def test_files_recorded_after_an_older_manifest_stay_recorded(tmp_path):
    """A run started by an older ctxmt and resumed by this one: what it records now is kept on every later read
    (the older format's number is not carried into the new manifest)."""
    out = tmp_path / "run"
    out.mkdir()
    (out / MANIFEST).write_text(json.dumps({"ctxmt_output": 1, "command": "train", "version": "0.0.1",
                                            "entries": [], "patterns": ["checkpoint_*.pt"], "init_from": None}))
    for step in (1, 2):
        (out / f"checkpoint_{step}.pt").write_bytes(b"x" * step)
        record(out, [out / f"checkpoint_{step}.pt"])
    ledger = read_ledger(out)
    assert sorted(ledger.files) == ["checkpoint_1.pt", "checkpoint_2.pt"] and ledger.extra == {"init_from": None}
    check_replaceable(out, "--out", command="train")


def test_a_folder_without_a_manifest_is_never_replaced_even_a_prepared_dataset_s_shape(tmp_path):
    out = tmp_path / "prep"
    out.mkdir()
    for name in ("meta.json", "train.src.bin", "train.docs", "spm.model", "valid.ref.txt"):
        (out / name).write_text("x")
    with pytest.raises(CtxmtError, match="no .ctxmt-output.json listing the files ctxmt wrote"):
        check_replaceable(out, "--out", command="prepare text")


def test_a_directory_holding_an_input_is_refused(tmp_path):
    out = _owned(tmp_path)
    with pytest.raises(CtxmtError, match="holds the input .*a.bin"):
        check_replaceable(out, "--out", inputs=[out / "a.bin"], command="test")


def test_a_growing_folder_lists_exactly_what_was_recorded(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "notes.txt").write_text("mine, there before the run")
    claim(run, "train")
    (run / "checkpoint_2.pt").write_bytes(b"c2")
    (run / "checkpoint_last.pt").write_bytes(b"c2")
    (run / "tensorboard").mkdir()
    (run / "tensorboard" / "events.1").write_bytes(b"e")
    record(run, [run / "checkpoint_2.pt", run / "checkpoint_last.pt", run / "tensorboard" / "events.1"],
           copies={run / "checkpoint_last.pt": run / "checkpoint_2.pt"})
    assert sorted(read_ledger(run).files) == ["checkpoint_2.pt", "checkpoint_last.pt", "tensorboard/events.1"]
    assert read_ledger(run).dirs == {"tensorboard"}
    with pytest.raises(CtxmtError, match="notes.txt"):
        check_replaceable(run, "--out", command="train")
    (run / "notes.txt").unlink()
    check_replaceable(run, "--out", command="train")
    (run / "checkpoint_2.pt").unlink()                           # pruned: dropped from the manifest
    record(run, [run / "checkpoint_2.pt"])
    assert sorted(read_ledger(run).files) == ["checkpoint_last.pt", "tensorboard/events.1"]
    (run / "tensorboard" / "notes").mkdir()                      # a user's folder among the events
    (run / "tensorboard" / "notes" / "thesis.tex").write_text("years of work")
    with pytest.raises(CtxmtError, match="notes, which is a directory ctxmt did not write"):
        check_replaceable(run, "--out", command="train")


def test_a_nested_output_accounts_for_its_own_files(tmp_path):
    outer = tmp_path / "qs"
    with rebuilding(outer, "quickstart"):
        build_dir(outer / "data", "prepare synthetic", lambda tmp: (tmp / "meta.json").write_text("{}"))
        record(outer, [outer / "data"])
    assert read_ledger(outer).dirs == {"data"} and read_ledger(outer).files == {}
    check_replaceable(outer, "--out", command="quickstart")
    (outer / "data" / "my.ref.txt").write_text("a user's")
    with pytest.raises(CtxmtError, match="my.ref.txt, which is not a file ctxmt wrote"):
        check_replaceable(outer, "--out", command="quickstart")


def test_the_lock_of_a_running_train_stops_force_and_a_left_over_one_does_not(tmp_path):
    out = _owned(tmp_path, "train")
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from ctxmt_cli.run_lock import take; "
                               "take(sys.argv[1]); print('held', flush=True); time.sleep(60)", str(out)],
                              stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": os.getcwd()})
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(CtxmtError, match=f"is the lock of a ctxmt train run still going \\(PID {holder.pid}\\)"):
            check_replaceable(out, "--out", command="train")
    finally:
        holder.kill()
        holder.wait()
    assert (out / LOCK_NAME).exists()                            # a kill -9 leaves the file, holding nothing
    check_replaceable(out, "--out", command="train")


def test_force_onto_a_mount_point_is_one_line(tmp_path):
    out = _owned(tmp_path)
    gen = mounted_tmpfs(out / "sub" / "disk", "1m")
    next(gen)
    try:
        with pytest.raises(CtxmtError, match="holds .*disk, which is a mount point"):
            check_replaceable(out, "--out", command="test")
        with pytest.raises(CtxmtError, match="is a mount point, so `force` does not replace it"):
            check_replaceable(out / "sub" / "disk", "--out", command="test")
    finally:
        next(gen, None)


@pytest.mark.parametrize("writer,replacer", [("train", "quickstart"), ("train", "export ctranslate2"),
                                             ("prepare text", "quickstart"), ("quickstart", "prepare text"),
                                             ("export ctranslate2", "prepare synthetic")])
def test_force_replaces_only_the_same_commands_output(tmp_path, writer, replacer):
    out = _owned(tmp_path, writer)
    before = listing(tmp_path)
    with pytest.raises(CtxmtError, match=f"was written by ctxmt {writer}, not .*nothing was deleted"):
        check_replaceable(out, "--out", command=replacer)
    with pytest.raises(CtxmtError):
        build_dir(out, replacer, lambda tmp: None, force=True)
    assert listing(tmp_path) == before


def test_every_prepare_format_replaces_a_prepared_dataset(tmp_path):
    out = _owned(tmp_path, "prepare synthetic")
    check_replaceable(out, "--out", command="prepare text")
    check_replaceable(out, "--out", command="prepare reverse")


def test_files_in_a_shared_folder_are_replaced_only_when_ctxmt_wrote_them(tmp_path):
    res = tmp_path / "res"
    res.mkdir()
    (res / "results.json").write_text("{}")
    with pytest.raises(CtxmtError, match="already exists; pass `force`"):
        check_files_replaceable([res / "results.json"], "--out file", force=False)
    with pytest.raises(CtxmtError, match="results.json is not a file ctxmt wrote.*nothing was replaced"):
        check_files_replaceable([res / "results.json"], "--out file", force=True)
    record(res, [res / "results.json"], command="contrastive")
    check_files_replaceable([res / "results.json", res / "new.scores"], "--out file", force=True)
    (res / "results.json").write_text('{"edited": 1}')
    with pytest.raises(CtxmtError, match="has changed since ctxmt wrote it"):
        check_files_replaceable([res / "results.json"], "--out file", force=True)


# ---- a generated property: user entries mixed into a ctxmt-written folder --------------------------------------
NAMES = st.sampled_from(["notes.txt", "thesis.tex", "checkpoint_my.pt", "x.png", "raw", "my.ref.txt",
                         "test.fp.stream.bin", "meta.json", "a.bin", "sub", "tensorboard", ".hidden"])
SPOILS = st.lists(st.tuples(st.sampled_from(["", "sub/", "sub/deeper/"]), NAMES,
                            st.sampled_from(["file", "dir", "link", "dangling", "edit", "grow"])),
                  min_size=0, max_size=4)


def _ctxmt_folder(root: Path) -> Path:
    def build(tmp: Path) -> None:
        (tmp / "a.bin").write_bytes(b"a" * 10)
        (tmp / "sub" / "deeper").mkdir(parents=True)
        (tmp / "sub" / "b.txt").write_text("b")
        (tmp / "sub" / "deeper" / "c.bin").write_bytes(b"c")
    out = root / "out"
    build_dir(out, "test", build)
    return out


def _spoil(out: Path, where: str, name: str, how: str) -> bool:
    """Put a user's entry (or an edit) at ``where + name``; whether the folder changed."""
    path = out / where / name
    ours = path.is_file() and not path.is_symlink()
    if how in ("edit", "grow"):
        if not ours:
            return False
        path.write_bytes(b"z" * path.stat().st_size if how == "edit" else path.read_bytes() + b"!")
        return True
    if path.exists() or path.is_symlink():
        return False
    if how == "file":
        path.write_text("a user's")
    elif how == "dir":
        path.mkdir()
    else:
        path.symlink_to(out / "a.bin" if how == "link" else out / "nowhere")
    return True


@given(spoils=SPOILS)
def test_property_force_deletes_nothing_unless_every_entry_is_ctxmt_s_untouched(tmp_path_factory, spoils):
    root = tmp_path_factory.mktemp("prop")
    out = _ctxmt_folder(root)
    spoiled = [_spoil(out, *s) for s in spoils]
    before = listing(root)
    if any(spoiled):
        with pytest.raises(CtxmtError) as caught:
            build_dir(out, "test", lambda tmp: (tmp / "new.bin").write_bytes(b"new"), force=True)
        line = str(caught.value)
        assert len(line.splitlines()) == 1 and "nothing was deleted" in line
        assert listing(root) == before
    else:
        build_dir(out, "test", lambda tmp: (tmp / "new.bin").write_bytes(b"new"), force=True)
        assert sorted(p.name for p in root.iterdir()) == ["out"] and (out / "new.bin").read_bytes() == b"new"
