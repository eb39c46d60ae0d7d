"""Documents in as they arrive, translations out as they are done: what ``ctxmt translate`` streams.

A file's documents are read (and checked) before any model is loaded and translated ``batch_docs`` at a
time. Documents read from stdin are translated as they come: a background thread reads them, and each
batch takes the first document waiting plus those already read (at most ``batch_docs``). A document piped
in alone is translated before the next one arrives; a file piped in is still translated in full batches.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

from ctxmt_cli.decode.documents import input_lines, stream_documents
from ctxmt_cli.decode.jsonl import parse_documents
from ctxmt_cli.decode.records import Document
from ctxmt_cli.errors import CtxmtError, OptionError

#: ``ctxmt translate --input-format``: one sentence per line with blank lines between documents, or JSONL
INPUT_FORMATS = ("text", "jsonl")
T = TypeVar("T")


def read_input(path_or_dash: str | Path, fmt: str = "text") -> Iterable[Document]:
    """The documents of a ``text`` or ``jsonl`` input: a file's as a list (read and checked now), stdin's
    (``-``) one at a time as they arrive."""
    if fmt not in INPUT_FORMATS:
        raise OptionError("input_format", fmt, "choose text or jsonl")
    name = "<stdin>" if str(path_or_dash) == "-" else str(path_or_dash)
    lines = input_lines(path_or_dash)
    if fmt == "jsonl":
        docs = parse_documents(lines, name)
    else:
        docs = (Document(src=doc) for doc in stream_documents(lines))
    return docs if name == "<stdin>" else list(docs)


def _read_ahead(source: Iterable, box: queue.Queue) -> None:
    """Put every item of ``source`` on ``box``, then the end (or the error that stopped the reading)."""
    try:
        for item in source:
            box.put(("item", item))
        box.put(("end", None))
    except BaseException as err:  # noqa: BLE001 - handed to the consumer, which raises it in order
        box.put(("error", err))


def ready_chunks(source: Iterable[T], size: int) -> Iterator[list[T]]:
    """Chunks of at most ``size`` items of ``source``, in order, each as soon as one item is ready.

    A sequence is cut as it is. Any other iterable is read by a background thread: a chunk is the first item
    waiting and those read meanwhile, so a slow source (a pipe) never waits for ``size`` items. An error
    raised while reading comes after the items read before it.
    """
    if size < 1:
        raise CtxmtError(f"batch of {size} documents: give 1 or more")
    if isinstance(source, Sequence):
        for start in range(0, len(source), size):
            yield list(source[start:start + size])
        return
    box: queue.Queue = queue.Queue(maxsize=2 * size)                   # read ahead a little, not a whole stdin
    threading.Thread(target=_read_ahead, args=(source, box), daemon=True).start()
    while True:
        chunk, last = [], box.get()
        while last[0] == "item":
            chunk.append(last[1])
            if len(chunk) == size or box.empty():
                break
            last = box.get()
        if chunk:
            yield chunk
        if last[0] == "end":
            return
        if last[0] == "error":
            raise last[1]
