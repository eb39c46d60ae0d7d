"""Path checks made before any work: one line saying what is wrong with a path, and nothing created."""

from __future__ import annotations

import errno
import os

import pytest

from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.paths import check_input_file, check_output_dir, check_output_file, os_error_line


@pytest.fixture
def tree(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("x")
    (tmp_path / "adir").mkdir()
    (tmp_path / "adir" / "x").write_text("an input")
    (tmp_path / "alink").symlink_to(tmp_path / "adir")
    return tmp_path


BAD = [  # (check, path, keyword arguments, message fragments)
    (check_input_file, "adir", {"what": "input", "hint": "fix it"}, ["input is a directory, not a file: adir"]),
    (check_input_file, "none", {"what": "input", "hint": "fix it"}, ["input not found: none; fix it"]),
    (check_output_dir, "afile", {"what": "--out"}, ["--out afile is a file, not a directory"]),
    (check_output_dir, "afile/a/b", {"what": "--out"}, ["--out afile/a/b", "afile is a file"]),
    (check_output_file, "adir", {"what": "-o", "force": None}, ["-o adir is a directory"]),
    (check_output_file, "afile", {"what": "-o", "force": False}, ["-o afile already exists", "`force`"]),
    (check_output_file, "afile", {"what": "-o", "force": True, "inputs": ("afile",)}, ["-o afile is also an input"]),
    (check_output_file, "afile/x", {"what": "-o", "force": None}, ["-o afile/x", "afile is a file"]),
    (check_output_file, "none/x", {"what": "-o", "force": None}, ["-o none/x: directory none not found; create it"]),
    # a trailing slash names a folder: never a file of that name (translate -o newout/)
    (check_output_file, "newout/", {"what": "-o", "force": False}, ["-o newout/ names a directory; give a file path"]),
    (check_output_file, "adir/.", {"what": "-o", "force": False}, ["-o adir/. is a directory"]),
    (check_output_file, "new/..", {"what": "-o", "force": False}, ["names a directory"]),
    # an output inside an input folder, or the folder itself, existing or not (cxmi --data adir --out adir/x)
    (check_output_file, "adir/test.ref.txt", {"what": "--out", "force": True, "inputs": ("adir",)},
     ["--out adir/test.ref.txt lies inside the input folder adir"]),
    (check_output_file, "adir/new/x.json", {"what": "--out", "force": False, "inputs": ("adir",), "make_parents": True},
     ["lies inside the input folder adir"]),
    (check_output_file, "sub/../adir/x", {"what": "--out", "force": False, "inputs": ("./adir/",)},
     ["lies inside the input folder"]),
    (check_output_dir, "adir", {"what": "--out", "inputs": ("adir",)}, ["--out adir is also an input"]),
    (check_output_dir, "adir/att", {"what": "--out", "inputs": ("adir",)}, ["--out adir/att lies inside the input"]),
    (check_output_dir, "alink/att", {"what": "--out", "inputs": ("adir",)}, ["lies inside the input folder adir"]),
    (check_output_file, "alink/x", {"what": "--out", "force": True, "inputs": ("adir/x",)}, ["is also an input"]),
]


@pytest.mark.parametrize("check,path,kwargs,needles", BAD)
def test_bad_paths_are_one_line_and_create_nothing(tree, check, path, kwargs, needles):
    before = sorted(p.name for p in tree.rglob("*"))
    with pytest.raises(CtxmtError) as err:
        check(path, **kwargs)
    for needle in needles:
        assert needle in str(err.value), str(err.value)
    assert sorted(p.name for p in tree.rglob("*")) == before


def test_good_paths_pass(tree):
    assert check_output_dir("adir", "--out").name == "adir"
    assert check_output_dir("new/deeper", "--out").name == "deeper"        # created later, by the command
    assert check_output_file("afile", "-o", force=None).name == "afile"    # None: the caller checked existence
    assert check_output_file("afile", "-o", force=True, inputs=("adir",)).name == "afile"
    assert check_output_file("new/x.json", "-o", force=False, make_parents=True, inputs=("adir",)).name == "x.json"
    assert check_output_dir("adir", "--out", inputs=("adir/x",)).name == "adir"    # writing beside an input file
    assert not (tree / "new").exists()


def test_unwritable_directory(tree):
    os.chmod(tree / "adir", 0o555)
    try:
        if os.access(tree / "adir", os.W_OK):
            pytest.skip("chmod does not stop this user (root) from writing")
        for check, path in ((check_output_dir, "adir/sub"), (check_output_dir, "adir"), (check_output_file, "adir/f")):
            with pytest.raises(CtxmtError, match="permission denied"):
                check(path, "--out", **({"force": None} if check is check_output_file else {}))
    finally:
        os.chmod(tree / "adir", 0o755)


def test_os_error_line_names_the_file_and_what_to_do():
    line = os_error_line(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "run/checkpoint_8.pt"))
    assert line.startswith("no space left on device: run/checkpoint_8.pt; free some space")
    assert "\n" not in line


@pytest.mark.parametrize("dash, tail", [(True, "give a file (use - for stdin)"), (False, "give a file")])
def test_a_named_pipe_is_not_a_regular_file_and_is_never_opened(tmp_path, dash, tail):
    """Opening a FIFO for reading blocks until a writer comes: the check looks, it does not open."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(CtxmtError) as err:
        check_input_file(fifo, "input file", "check the path", dash=dash)
    assert str(err.value) == f"input file is not a regular file (a named pipe): {fifo}; {tail}"


def test_a_character_device_is_not_a_regular_file():
    with pytest.raises(CtxmtError, match=r"is not a regular file \(a character device\): /dev/null"):
        check_input_file("/dev/null", "input file", "check the path")


def test_an_unreadable_file_says_permission_not_damage(tmp_path):
    locked = tmp_path / "locked.txt"
    locked.write_text("x\n")
    os.chmod(locked, 0)
    try:
        if os.access(locked, os.R_OK):
            pytest.skip("chmod does not stop this user (root) from reading")
        with pytest.raises(CtxmtError, match=r"input file cannot be read \(permission denied\): .*locked\.txt"):
            check_input_file(locked, "input file", "check the path")
    finally:
        os.chmod(locked, 0o644)
