"""Gathering requests for different documents into batches, translated one batch at a time by a worker thread.

The model runs in this thread, never in the event loop, so the server keeps answering (``/health``, request
checks, other connections) while a batch is translated. A batch is what is queued ``wait_s`` after its first
request arrived (or as soon as ``max_docs`` documents are waiting), at most ``max_docs`` requests, never two of
the same document: a document's second request waits for the next batch, after the first one's translations
are kept, so each document's requests are translated in arrival order with the context of all earlier ones.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)
#: the longest a batch may wait for more requests (seconds): beyond it a request's answer would wait too long
MAX_WAIT_S = 60.0


class ShuttingDown(RuntimeError):
    """A job submitted while the batcher stops, or still queued when it stopped."""


class WorkerFailed(RuntimeError):
    """The worker thread stopped on an error of its own (not a translation's): every job gets this one."""


@dataclass
class Job:
    """One request: ``key`` its document, ``payload`` what the translate function reads, ``done(result)`` called
    from the worker thread with its result (or the exception that failed it). ``gone``: set (any thread) when
    nobody waits for the result any more (the client disconnected): a job still queued is then dropped, never
    translated, and ``done`` is not called."""

    key: Hashable
    payload: Any
    done: Callable[[Any], None]
    gone: bool = False


@dataclass
class BatchStats:
    """Counters the worker keeps (``/health`` shows them)."""

    batches: int = 0
    requests: int = 0
    largest_batch: int = 0
    dropped: int = 0            # jobs whose client went away before their turn

    def add(self, size: int) -> None:
        """Count a batch of ``size`` requests."""
        self.batches += 1
        self.requests += size
        self.largest_batch = max(self.largest_batch, size)


class Batcher:
    """A worker thread calling ``translate(payloads) -> results`` (one result or exception per payload, in order)
    on batches of submitted :class:`Job`; :meth:`start` and :meth:`stop` it around the server's life.
    ``progress(stats)``: called by the worker after every batch (a progress log)."""

    def __init__(self, translate: Callable[[list[Any]], list[Any]], *, max_docs: int, wait_s: float,
                 progress: Callable[[BatchStats], None] | None = None):
        if max_docs < 1 or not (math.isfinite(wait_s) and 0 <= wait_s <= MAX_WAIT_S):
            raise ValueError(f"max_docs must be >= 1 and wait_s in [0, {MAX_WAIT_S:g}]")
        self.translate, self.max_docs, self.wait_s, self.progress = translate, max_docs, wait_s, progress
        self.stats = BatchStats()
        self._pending: deque[Job] = deque()
        self._cond = threading.Condition()
        self._stopping = False
        self._failed: WorkerFailed | None = None
        self._current: list[Job] = []                 # the batch being translated, until each job is answered
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the worker thread."""
        self._stopping = False
        self._thread = threading.Thread(target=self._work, name="ctxmt-serve-batcher", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Let the worker finish its batch and stop; jobs still queued get a :class:`ShuttingDown`."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)
        with self._cond:
            left, self._pending = list(self._pending), deque()
        for job in left:
            job.done(ShuttingDown("the server is shutting down; send the request again once it is back"))

    def submit(self, job: Job) -> None:
        """Queue ``job`` (any thread); :class:`WorkerFailed` once the worker has stopped on an error."""
        with self._cond:
            if self._failed is not None:
                raise self._failed
            if self._stopping:
                raise ShuttingDown("the server is shutting down; send the request again once it is back")
            self._pending.append(job)
            self._cond.notify_all()

    @property
    def queued(self) -> int:
        """Requests waiting for a batch (not counting those whose client went away)."""
        with self._cond:
            return sum(not job.gone for job in self._pending)

    @property
    def failed(self) -> WorkerFailed | None:
        """Why the worker thread stopped on an error of its own, or None while it works."""
        return self._failed

    def _work(self) -> None:
        """The worker thread: batches until stopped. It never dies silently: an error of its own (not a
        translation's, which fails that batch only) fails every waiting job and every later submit with a
        :class:`WorkerFailed`, and is logged."""
        try:
            while self._one_batch():
                pass
        except BaseException as err:  # noqa: BLE001 - reported to every job, waiting or to come
            self._fail(err)

    def _one_batch(self) -> bool:
        """Translate the next batch and answer its jobs; False when stopping."""
        batch = self._next_batch()
        if batch is None:
            return False
        if not batch:                           # every waiting job was dropped
            return True
        self._current = list(batch)
        try:
            results = self.translate([job.payload for job in batch])
        except Exception as err:  # noqa: BLE001 - every job of the batch gets the error; the worker goes on
            results = [err] * len(batch)
        self.stats.add(len(batch))
        for job, result in zip(batch, results, strict=True):
            self._current.remove(job)
            try:
                job.done(result)
            except Exception as err:  # noqa: BLE001 - one answer that cannot be delivered stops no other
                log.warning("could not answer a request: %s: %s", type(err).__name__, err)
        if self.progress is not None:
            self.progress(self.stats)
        return True

    def _fail(self, err: BaseException) -> None:
        failed = WorkerFailed(f"the translation worker stopped on an error ({type(err).__name__}: "
                              f"{' '.join(str(err).split()) or 'no message'}); restart the server")
        log.error("%s", failed)
        with self._cond:
            self._failed, left, self._pending = failed, self._current + list(self._pending), deque()
            self._current = []
        for job in left:
            with contextlib.suppress(Exception):
                job.done(failed)

    def _next_batch(self) -> list[Job] | None:
        """Wait for a job, then up to ``wait_s`` for others (less once ``max_docs`` documents wait); take the
        first job of each of at most ``max_docs`` documents, in arrival order, dropping the jobs nobody waits
        for (possibly all: an empty batch). None when stopping."""
        with self._cond:
            while not self._pending and not self._stopping:
                self._cond.wait()
            if self._stopping:
                return None
            deadline = time.monotonic() + self.wait_s
            while len({job.key for job in self._pending}) < self.max_docs and not self._stopping:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            batch, keys, rest = [], set(), deque()
            for job in self._pending:
                if job.gone:
                    self.stats.dropped += 1
                elif job.key in keys or len(batch) >= self.max_docs:
                    rest.append(job)
                else:
                    keys.add(job.key)
                    batch.append(job)
            self._pending = rest
            return batch
