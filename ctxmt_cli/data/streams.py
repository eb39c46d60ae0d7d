"""Writing a first-pass stream beside a prepared split, chunk by chunk, so an interrupted run resumes.

The finished layout is described in :mod:`ctxmt_cli.data.store` (``{split}.{name}.stream.*``). While a stream
is written its files carry a ``.partial`` suffix and ``{split}.{name}.stream.partial.json`` records the *plan*
(what is translated, by which checkpoint, with which settings) and how far the files are valid: after every
chunk of documents the three files are appended and then that record is replaced atomically. A run that
finds a record with the same plan truncates the files to the recorded sizes and goes on from there; another
plan is refused without ``force``. Finishing renames the files into place and writes ``.stream.json`` last.
"""

from __future__ import annotations

import contextlib
import json
import os
from array import array
from collections.abc import Sequence
from pathlib import Path

from ctxmt_cli import ownership
from ctxmt_cli.data.store import _TYPECODES, STREAM_NAME
from ctxmt_cli.errors import CtxmtError, option
from ctxmt_cli.outputs import remove_stale, write_json

FILES = ("bin", "idx", "txt")


def check_stream_name(name: str) -> str:
    """A stream name is letters, digits, '-' and '_' (no '.', so ``{split}.{name}`` stays unambiguous)."""
    if not STREAM_NAME.match(name or ""):
        raise CtxmtError(f"{option('name')} {name!r}: use letters, digits, '-' and '_' (no dots), e.g. "
                         f"{option('name')} first-pass")
    return name


def _write_json(path: Path, value: dict) -> None:
    write_json(path, value)


class StreamWriter:
    """Appends translated documents to one stream; :meth:`start` says how many documents are already done."""

    def __init__(self, directory: Path, split: str, name: str, dtype: str, plan: dict):
        self.dir, self.split, self.name = Path(directory), split, check_stream_name(name)
        self.dtype, self.plan = dtype, plan
        stem = f"{split}.{name}.stream"
        self.final = {k: self.dir / f"{stem}.{k}" for k in FILES}
        self.partial = {k: self.dir / f"{stem}.{k}.partial" for k in FILES}
        self.info_path = self.dir / f"{stem}.json"
        self.progress_path = self.dir / f"{stem}.partial.json"
        self.progress = {"documents": 0, "sentences": 0, "tokens": 0, "text_bytes": 0}

    # ---- state on disk --------------------------------------------------------------------------
    def finished_info(self) -> dict | None:
        """The ``.stream.json`` of a finished stream of this name, or None."""
        if not self.info_path.is_file():
            return None
        try:
            return json.loads(self.info_path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            return {}

    def files(self) -> list[Path]:
        """Every file of this stream, finished or partial."""
        return [*self.final.values(), *self.partial.values(), self.info_path, self.progress_path]

    def remove(self) -> None:
        """Delete every file of this stream, finished or partial."""
        for path in self.files():
            path.unlink(missing_ok=True)

    def start(self, *, force: bool, reuse: bool = False) -> int | None:
        """Prepare to write: the number of documents already written (0 for a new stream), or None when a
        finished stream with the same plan exists and ``reuse`` is set (nothing to do).

        A finished stream is refused without ``force`` (unless reused); an unfinished one with another plan
        too; ``force`` deletes either and starts over.
        """
        remove_stale(self.dir)                                             # temps a killed run left here
        info = self.finished_info()
        if info is not None:
            if reuse and info.get("plan") == self.plan:
                return None
            if not force:
                what = "from other settings or another checkpoint" if reuse else "already"
                raise CtxmtError(f"first-pass stream {self.name!r} of split {self.split!r} exists {what} "
                                 f"({self.info_path}); pass {option('force')} to write it again")
            # only the files a first pass wrote, unchanged since (the dataset's manifest lists them)
            ownership.check_files_replaceable([*self.final.values(), self.info_path], "first-pass stream file", force)
            self.remove()
        if self.progress_path.is_file():
            try:
                record = json.loads(self.progress_path.read_text(encoding="utf-8"))
            except (json.JSONDecodeError, UnicodeDecodeError):
                record = {}
            if record.get("plan") == self.plan and all(p.is_file() for p in self.partial.values()):
                return self._resume(record)
            if not force:
                raise CtxmtError(f"an unfinished first-pass stream {self.name!r} of split {self.split!r} from other "
                                 f"settings or another checkpoint is in {self.dir} ({self.progress_path.name}); pass "
                                 f"{option('force')} to discard it, or re-run with its settings to resume")
            self.remove()
        self.remove()
        with self._nothing_left_on_failure(0):
            for key in ("bin", "txt"):
                self.partial[key].write_bytes(b"")
            with open(self.partial["idx"], "wb") as f:
                array("q", [0]).tofile(f)                                  # offsets start at 0: n+1 entries
            self._save()
        return 0

    @contextlib.contextmanager
    def _nothing_left_on_failure(self, done: int):
        """On any failure (a full disk, Ctrl-C, SIGTERM) while no document is recorded (``done`` 0), every file of
        the stream is removed: there is nothing to resume, and empty ``.partial`` files are only litter. Once
        documents are recorded the files stay, for the next run to resume from."""
        try:
            yield
        except BaseException as err:
            if done == 0:
                with contextlib.suppress(OSError):
                    self.remove()
            if isinstance(err, OSError) and err.errno is not None and err.filename is None:
                raise OSError(err.errno, err.strerror, str(self.dir)) from err     # a write names no file
            raise

    def _resume(self, record: dict) -> int:
        """Cut the partial files back to the sizes the record vouches for (a crash may have left more)."""
        self.progress = {k: int(record[k]) for k in self.progress}
        item = array(_TYPECODES[self.dtype]).itemsize
        sizes = {"bin": self.progress["tokens"] * item, "idx": (self.progress["sentences"] + 1) * 8,
                 "txt": self.progress["text_bytes"]}
        for key, size in sizes.items():
            if self.partial[key].stat().st_size < size:
                raise CtxmtError(f"{self.partial[key]} is shorter than {self.progress_path.name} says; pass "
                                 f"{option('force')} to discard the unfinished stream")
            os.truncate(self.partial[key], size)
        return self.progress["documents"]

    def _save(self) -> None:
        _write_json(self.progress_path, {"plan": self.plan, **self.progress})

    # ---- writing ------------------------------------------------------------------------------
    def append(self, ids: Sequence[Sequence[Sequence[int]]], texts: Sequence[Sequence[str]]) -> None:
        """Append documents: ``ids[d][s]`` token ids and ``texts[d][s]`` text of sentence s of document d."""
        tokens, offsets, total = array(_TYPECODES[self.dtype]), array("q"), self.progress["tokens"]
        parts = []
        for k, (doc_ids, doc_text) in enumerate(zip(ids, texts, strict=True)):
            if self.progress["documents"] + k:
                parts.append("\n")                                         # a blank line between documents
            for sentence, line in zip(doc_ids, doc_text, strict=True):
                tokens.extend(sentence)
                total += len(sentence)
                offsets.append(total)
                parts.append(" ".join(line.splitlines()) + "\n")
        text = "".join(parts).encode("utf-8")
        with self._nothing_left_on_failure(self.progress["documents"]):
            with open(self.partial["bin"], "ab") as f:
                tokens.tofile(f)
            with open(self.partial["idx"], "ab") as f:
                offsets.tofile(f)
            with open(self.partial["txt"], "ab") as f:
                f.write(text)
            self.progress["documents"] += len(ids)
            self.progress["sentences"] += len(offsets)
            self.progress["tokens"] = total
            self.progress["text_bytes"] += len(text)
            self._save()                                                   # only now do the appended bytes count

    def finish(self, info: dict) -> dict:
        """Rename the partial files into place and write ``.stream.json`` (last); returns what was written."""
        for key in FILES:
            os.replace(self.partial[key], self.final[key])
        record = {"plan": self.plan, **info, "documents": self.progress["documents"],
                  "sentences": self.progress["sentences"], "tokens": self.progress["tokens"]}
        try:
            _write_json(self.info_path, record)
        except BaseException:               # not finished after all (a full disk): the next run resumes it
            for key in FILES:
                os.replace(self.final[key], self.partial[key])
            raise
        self.progress_path.unlink(missing_ok=True)
        # listed in the dataset's manifest: a later --force (this one's, or prepare's) may replace exactly these
        ownership.record(self.dir, [*self.final.values(), self.info_path, self.progress_path])
        return record
