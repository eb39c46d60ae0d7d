"""Input and output paths, checked before any work is done, and OS errors turned into one line.

A command checks every path it will write before it reads a model or a corpus: a
translation that takes an hour must not fail at its last step because ``-o`` names a
directory. The checks have no side effects (nothing is created): they look at the
path itself and at its nearest existing ancestor. An error the operating system
reports later anyway (a full disk, a permission changed meanwhile) becomes one line
through :func:`os_error_line`. This module imports nothing heavy.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from ctxmt_cli.errors import CtxmtError, option

#: OS errors a user causes and can fix (a full disk, permissions, a path of the wrong kind)
USER_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EISDIR, errno.ENOTDIR,
               errno.ENAMETOOLONG, errno.EEXIST, errno.EBUSY}
_HINTS = {
    errno.ENOSPC: "free some space or write somewhere else; files already there were not touched",
    errno.EDQUOT: "the disk quota is used up; free some space or write somewhere else",
    errno.EROFS: "the file system is read-only; write somewhere else",
    errno.EACCES: "check the permissions or write somewhere else",
    errno.EPERM: "check the permissions or write somewhere else",
    errno.EBUSY: "it is a mount point or in use: write somewhere else; nothing was deleted",
}


def check_input_file(path: Path, what: str, hint: str, *, dash: bool = False) -> Path:
    """``path`` must be an existing regular file this process may read; a directory, a named pipe or device (whose
    reading could block forever or never end), an unreadable file or a missing path is one line saying which.
    ``dash``: the command reads stdin for ``-``, which the line then suggests for a pipe."""
    path = Path(path)
    if path.is_file():
        if not os.access(path, os.R_OK):
            raise CtxmtError(f"{what} cannot be read (permission denied): {path}; check its permissions "
                             f"(e.g. chmod u+r {path}) or give a copy you may read")
        return path
    if path.is_dir():
        raise CtxmtError(f"{what} is a directory, not a file: {path}; {hint}")
    if path.exists():
        stdin = " (use - for stdin)" if dash else ""
        raise CtxmtError(f"{what} is not a regular file ({_file_kind(path)}): {path}; give a file{stdin}")
    raise CtxmtError(f"{what} not found: {path}; {hint}")


def _file_kind(path: Path) -> str:
    """What a path that exists but is neither a file nor a directory is, in words."""
    import stat

    try:
        mode = os.stat(path).st_mode
    except OSError:
        return "unreadable"
    kinds = ((stat.S_ISFIFO, "a named pipe"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISSOCK, "a socket"))
    return next((name for test, name in kinds if test(mode)), "a special file")


def _existing_ancestor(path: Path) -> Path:
    """The nearest ancestor of ``path`` (or ``path`` itself) that exists; a file ancestor is returned too."""
    current = Path(path)
    while not current.exists() and current != current.parent:
        current = current.parent
    return current


def _check_creatable(path: Path, what: str) -> None:
    """``path`` does not exist yet: its nearest existing ancestor must be a directory we may write in."""
    ancestor = _existing_ancestor(path)
    if not ancestor.is_dir():
        raise CtxmtError(f"{what} {path}: cannot be created because {ancestor} is a file, not a directory; "
                         "choose another path")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise CtxmtError(f"{what} {path}: cannot write in {ancestor} (permission denied); "
                         "choose another path or change its permissions")


def check_output_dir(path: Path, what: str, *, inputs=()) -> Path:
    """A directory a command will create or write into: not a file, not one of ``inputs`` nor inside an input
    folder, and writable (or creatable)."""
    path = Path(path)
    check_not_input(path, inputs, what, replaced=False)
    if path.exists() and not path.is_dir():
        raise CtxmtError(f"{what} {path} is a file, not a directory; give a directory (it is created if missing)")
    if path.is_dir():
        if not os.access(path, os.W_OK | os.X_OK):
            raise CtxmtError(f"{what} {path}: cannot write in it (permission denied); "
                             "choose another directory or change its permissions")
    else:
        _check_creatable(path, what)
    return path


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return False


def check_not_input(output: Path, inputs, what: str, *, replaced: bool = True) -> None:
    """The one check that an output never lands on an input, for every command that writes a file or a folder:
    ``output`` is none of ``inputs`` (as a file: same device and inode, so a hard link is caught; as a path:
    resolved, so a symbolic link, ``..`` or a trailing slash is too), does not lie inside an input folder, and,
    when it is a folder to be ``replaced``, holds no input. It need not exist yet. ``None`` inputs are skipped."""
    output = Path(output)
    real = Path(os.path.realpath(output))
    for source in inputs:
        if source is None or not (Path(source).exists() or Path(source).is_symlink()):
            continue
        source_real = Path(os.path.realpath(source))
        if real == source_real or _same_file(source, output):
            raise CtxmtError(f"{what} {output} is also an input ({source}); write the result somewhere else")
        if source_real in real.parents and source_real.is_dir():
            raise CtxmtError(f"{what} {output} lies inside the input folder {source}; ctxmt never writes into what "
                             "it reads: write the result somewhere else")
        if replaced and real in source_real.parents and real.is_dir():
            raise CtxmtError(f"{what} {output} holds the input {source}; replacing it would delete that input: "
                             "write the result somewhere else")


def _names_a_directory(path: str | Path) -> bool:
    """A path spelt as a folder (``out/``, ``out/.``, ``..``): a file cannot be created under that name."""
    text = os.fspath(path)
    return text.endswith(("/", os.sep)) or Path(text).name in ("", ".", "..") or text.endswith(("/.", "/.."))


def check_output_file(path: str | Path, what: str, *, force: bool | None, inputs: tuple = (),
                      make_parents: bool = False) -> Path:
    """A file a command will write: not a directory, not one of its ``inputs`` nor inside an input folder, in a
    writable directory. ``path`` as given (a ``str`` keeps a trailing slash, which names a folder).

    ``force=False`` refuses an existing file (``--force`` allows it); ``None``: the caller checked that already.
    ``make_parents``: the command creates missing directories above it.
    """
    if Path(path).is_dir():
        raise CtxmtError(f"{what} {path} is a directory; give a file name, e.g. {Path(path) / 'out'}")
    if _names_a_directory(path):
        raise CtxmtError(f"{what} {path} names a directory; give a file path, e.g. "
                         f"{os.path.join(os.fspath(path), 'out.txt')}")
    path = Path(path)
    check_not_input(path, inputs, what)
    if (path.exists() or path.is_symlink()) and force is False:
        raise CtxmtError(f"{what} {path} already exists; pass {option('force')} to overwrite it or choose another name")
    parent = path.parent
    if parent.is_dir():
        if not os.access(parent, os.W_OK | os.X_OK):
            raise CtxmtError(f"{what} {path}: cannot write in {parent} (permission denied); "
                             "choose another path or change its permissions")
    elif not parent.exists() and _existing_ancestor(parent).is_dir() and not make_parents:
        raise CtxmtError(f"{what} {path}: directory {parent} not found; create it first")
    else:
        _check_creatable(path, what)
    return path


def os_error_line(err: OSError) -> str:
    """One line for an OS error a user can fix: what failed, on which path, and what to do."""
    where = f": {err.filename}" if err.filename else ""
    if err.filename2:
        where += f" -> {err.filename2}"
    reason = err.strerror or os.strerror(err.errno or 0) or type(err).__name__
    hint = _HINTS.get(err.errno, "check the path")
    return f"{reason.lower()}{where}; {hint}"
