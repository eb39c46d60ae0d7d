"""What a run that is gone left beside an output (:mod:`ctxmt_cli.temps`): its temps are deleted, an output it
had set aside is put back in place, and no set-aside copy (possibly the only one) is ever deleted, whatever else
stands in the folder (a Hypothesis property over generated folders)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxmt_cli.temps import ASIDE_TAG, MANIFEST, TEMP_TAG, remove_stale, temp_name


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


GONE = _dead_pid()


def _folder(path: Path, content: str, manifest: bool = True) -> Path:
    path.mkdir()
    (path / "results.json").write_text(content)
    if manifest:
        (path / MANIFEST).write_text("{}")
    return path


def test_an_aside_whose_run_is_gone_replaces_that_run_s_unfinished_output(tmp_path):
    _folder(tmp_path / f".qs{ASIDE_TAG}{GONE}-0123abcd", "the previous output")
    _folder(tmp_path / "qs", "half-built by the killed run")
    remove_stale(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["qs"]
    assert (tmp_path / "qs" / "results.json").read_text() == "the previous output"


def test_an_aside_is_put_back_where_nothing_or_an_empty_folder_stands(tmp_path):
    _folder(tmp_path / f".a{ASIDE_TAG}{GONE}-0123abcd", "a")
    _folder(tmp_path / f".b{ASIDE_TAG}{GONE}-0123abcd", "b")
    (tmp_path / "b").mkdir()                                   # killed before its manifest was written
    assert remove_stale(tmp_path) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]
    assert [(tmp_path / n / "results.json").read_text() for n in "ab"] == ["a", "b"]


def test_an_aside_stays_beside_what_ctxmt_did_not_write_and_a_live_run_s_is_untouched(tmp_path):
    user = _folder(tmp_path / f".u{ASIDE_TAG}{GONE}-0123abcd", "old")
    _folder(tmp_path / "u", "a user's folder", manifest=False)
    live = _folder(temp_name(tmp_path / "v", ASIDE_TAG), "a run of this process")
    assert remove_stale(tmp_path) == []
    assert user.is_dir() and live.is_dir() and (tmp_path / "u" / "results.json").read_text() == "a user's folder"


def test_a_committed_run_s_old_output_is_litter(tmp_path):
    garbage = _folder(tmp_path / f".qs{TEMP_TAG}{GONE}-0123abcd", "renamed before deletion: the run committed")
    _folder(tmp_path / "qs", "new")
    assert remove_stale(tmp_path) == [garbage]
    assert [p.name for p in tmp_path.iterdir()] == ["qs"]


ENTRY = st.tuples(st.sampled_from(["qs", "data", "run"]),
                  st.sampled_from(["aside", "temp", "plain-ours", "plain-user", "empty"]),
                  st.booleans())                                # the writer is gone (else: this process, alive)


@settings(max_examples=40)
@given(entries=st.lists(ENTRY, max_size=6))
def test_no_aside_copy_is_ever_deleted(entries, tmp_path_factory):
    """Whatever a folder holds (asides and temps of gone or live runs, ctxmt's outputs, a user's folders), every
    aside's content survives remove_stale: put back in place or left where it was."""
    root = tmp_path_factory.mktemp("stale")
    asides = {}
    for k, (name, kind, gone) in enumerate(entries):
        pid = GONE if gone else __import__("os").getpid()
        path = root / (f".{name}{ASIDE_TAG if kind == 'aside' else TEMP_TAG}{pid}-{k:08x}"
                       if kind in ("aside", "temp") else name)
        if path.exists():
            continue
        if kind == "empty":
            path.mkdir()
        else:
            _folder(path, f"copy {k}", manifest=kind != "plain-user")
        if kind == "aside":
            asides[f"copy {k}"] = path
    remove_stale(root)
    found = {p.read_text() for p in root.rglob("results.json")}
    assert set(asides) <= found
    for content, path in asides.items():
        name = path.name[1:path.name.rindex(ASIDE_TAG)]
        assert path.is_dir() or (root / name / "results.json").read_text() == content
