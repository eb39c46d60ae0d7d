"""Encoding chunks of documents in parallel worker processes, in order, with a bounded number in flight.

The main process reads and checks the corpus (the readers name file:line on any error) and hands chunks of
a few thousand sentence pairs to ``workers`` processes; each cleans (train split), encodes both sides with
SentencePiece (one thread each: the processes are the parallelism), truncates and returns flat id arrays,
which the main process writes straight into the memory-mapped layout. At most ``2 × workers + 1`` chunks
are in flight, so memory does not grow with the corpus. The result is the same for any number of workers.
"""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import chain, islice

import numpy as np

from ctxmt_cli.data.clean import CleanRules, clean_document, new_counts

#: one task: the documents of a chunk, each ``(pairs, source line numbers)``
Chunk = list[tuple[list[tuple[str, str]], list[int]]]


@dataclass(frozen=True)
class EncodeJob:
    """What every chunk of one split is encoded under."""

    source: str                    # the source file, for the location of the first truncated sentence
    max_tokens: int                # longer sentences are truncated to this many subwords
    clean: CleanRules = CleanRules()


@dataclass
class EncodedChunk:
    """One chunk encoded: its output documents' sizes, flat ids and lengths per side, and what it changed."""

    doc_sizes: list[int]
    ids: dict[str, np.ndarray]          # side -> (tokens,) int32
    lengths: dict[str, np.ndarray]      # side -> (sentences,) int64
    dropped: dict[str, int] = field(default_factory=new_counts)
    truncated: int = 0
    first_truncated: str | None = None


def default_workers() -> int:
    """The CPUs this process may run on (``--workers`` default)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:                    # not on Linux
        return max(1, os.cpu_count() or 1)


_TOKENIZER = None


def _init_worker(state: dict) -> None:
    global _TOKENIZER
    from ctxmt_cli.data.tokenize import Tokenizer

    _TOKENIZER = Tokenizer.from_state(state)


def _flat(ids: list[list[int]], limit: int) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Flat ids (int32), lengths (int64) and the indices of the sentences cut to ``limit`` tokens."""
    cut = [k for k, seq in enumerate(ids) if len(seq) > limit]
    for k in cut:
        ids[k] = ids[k][:limit]
    lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    flat = np.fromiter(chain.from_iterable(ids), dtype=np.int32, count=int(lengths.sum()))
    return flat, lengths, cut


def encode_chunk(job: EncodeJob, chunk: Chunk, tokenizer=None) -> EncodedChunk:
    """Clean (when ``job.clean`` is active), encode and truncate one chunk (in a worker: its tokenizer)."""
    tok = tokenizer or _TOKENIZER
    dropped = new_counts()
    pairs, lines, doc_sizes = [], [], []
    for doc, doc_lines in chunk:
        runs = clean_document(job.clean, doc, dropped) if job.clean.active else [range(len(doc))]
        for run in runs:
            pairs += [doc[k] for k in run]
            lines += [doc_lines[k] for k in run]
            doc_sizes.append(len(run))
    ids, lengths, cut = {}, {}, set()
    for k, side in enumerate(("src", "tgt")):
        encoded = tok.encode_batch([p[k] for p in pairs], side, num_threads=1)
        ids[side], lengths[side], side_cut = _flat(encoded, job.max_tokens)
        cut.update(side_cut)
    first = f"{job.source}:{lines[min(cut)]}" if cut else None
    return EncodedChunk(doc_sizes, ids, lengths, dropped, len(cut), first)


def _drain(items: list) -> Iterator:
    """The items of ``items``, each removed from the list as it is yielded."""
    while items:
        yield items.pop(0)


def encode_chunks(job: EncodeJob, chunks: Iterable[Chunk], tokenizer, workers: int) -> Iterator[EncodedChunk]:
    """``encode_chunk`` of every chunk, in order; ``workers`` > 1 runs them in that many processes (not for a
    split of one chunk, where starting processes would cost more than it saves)."""
    rest = iter(chunks)
    head = list(islice(rest, 2))
    chunks = chain(_drain(head), rest)            # the peeked chunks, released as they are consumed
    if workers <= 1 or len(head) < 2:
        for chunk in chunks:
            yield encode_chunk(job, chunk, tokenizer)
        return
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    pool = multiprocessing.get_context(method).Pool(workers, _init_worker, (tokenizer.to_state(),))
    done = False
    try:
        pending = deque()
        for chunk in chunks:
            pending.append(pool.apply_async(encode_chunk, (job, chunk)))
            if len(pending) > 2 * workers:
                yield pending.popleft().get()
        while pending:
            yield pending.popleft().get()
        pool.close()                               # every chunk done: the workers leave on their own
        pool.join()
        done = True
    finally:
        if not done:                               # an error or a stop: terminate (it can hang on idle workers
            pool.terminate()                       # blocked on the task queue's lock, so never on success)
            pool.join()
