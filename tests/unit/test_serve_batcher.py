"""The server's batcher: requests queued together become one batch of different documents, a document's requests
are translated in arrival order and never two in one batch, the batch size is capped, an error reaches every
request of its batch and the worker goes on, stopping fails what is still queued."""

from __future__ import annotations

import threading
import time

import pytest

from ctxmt_cli.serve.batcher import Batcher, Job


class Recorder:
    """A translate function that records its batches and can be held while requests queue up."""

    def __init__(self, fail_on: str | None = None):
        self.batches: list[list[str]] = []
        self.gate = threading.Event()
        self.gate.set()
        self.fail_on = fail_on

    def __call__(self, payloads: list[str]) -> list[str]:
        self.gate.wait(10)
        self.batches.append(list(payloads))
        if self.fail_on in payloads:
            raise ValueError(f"cannot translate {self.fail_on}")
        return [p.upper() for p in payloads]


def submit_all(batcher: Batcher, jobs: list[tuple[str, str]]) -> list[threading.Event]:
    """Submit (document, payload) jobs; each gets an event set when its result arrives (kept on the event)."""
    events = []
    for key, payload in jobs:
        event = threading.Event()
        event.result = None

        def done(result, event=event):
            event.result = result
            event.set()
        batcher.submit(Job(key, payload, done))
        events.append(event)
    return events


def test_queued_requests_are_batched_by_document_in_arrival_order():
    rec = Recorder()
    batcher = Batcher(rec, max_docs=3, wait_s=0.01)
    batcher.start()
    try:
        rec.gate.clear()                                                    # the worker holds its first batch
        first = submit_all(batcher, [("x", "x0")])
        time.sleep(0.1)
        events = submit_all(batcher, [("a", "a1"), ("a", "a2"), ("b", "b1"), ("c", "c1"), ("d", "d1"), ("a", "a3"),
                                      ("b", "b2")])
        rec.gate.set()
        assert all(e.wait(10) for e in first + events)
    finally:
        batcher.stop()
    assert rec.batches == [["x0"], ["a1", "b1", "c1"], ["a2", "d1", "b2"], ["a3"]]
    for batch in rec.batches:                                               # never one document twice
        assert len({p[0] for p in batch}) == len(batch)
    assert [e.result for e in events] == ["A1", "A2", "B1", "C1", "D1", "A3", "B2"]
    assert (batcher.stats.batches, batcher.stats.requests, batcher.stats.largest_batch) == (4, 8, 3)


def test_requests_arriving_within_the_wait_share_a_batch():
    rec = Recorder()
    batcher = Batcher(rec, max_docs=8, wait_s=0.3)
    batcher.start()
    try:
        events = []
        threads = [threading.Thread(target=lambda k=k: events.extend(submit_all(batcher, [(k, k)]))) for k in "abcd"]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert all(e.wait(10) for e in events)
    finally:
        batcher.stop()
    assert sorted(rec.batches[0]) == list("abcd") and len(rec.batches) == 1


def test_an_error_reaches_every_request_of_its_batch_and_the_worker_goes_on():
    rec = Recorder(fail_on="bad")
    batcher = Batcher(rec, max_docs=4, wait_s=0.2)
    batcher.start()
    try:
        failed = submit_all(batcher, [("a", "bad"), ("b", "fine")])
        assert all(e.wait(10) for e in failed)
        later = submit_all(batcher, [("c", "ok")])
        assert later[0].wait(10)
    finally:
        batcher.stop()
    assert all(isinstance(e.result, ValueError) for e in failed)
    assert later[0].result == "OK"


def test_stopping_fails_what_is_still_queued():
    rec = Recorder()
    batcher = Batcher(rec, max_docs=1, wait_s=0.0)
    batcher.start()
    rec.gate.clear()
    events = submit_all(batcher, [("a", "a1"), ("a", "a2")])
    time.sleep(0.1)
    threading.Timer(0.2, rec.gate.set).start()                              # the batch in flight finishes
    batcher.stop()
    assert events[0].result == "A1" and isinstance(events[1].result, RuntimeError)
    with pytest.raises(RuntimeError, match="shutting down"):
        submit_all(batcher, [("b", "b1")])
    with pytest.raises(ValueError):
        Batcher(rec, max_docs=0, wait_s=0.0)


def test_a_job_nobody_waits_for_is_dropped_before_its_turn():
    rec = Recorder()
    batcher = Batcher(rec, max_docs=4, wait_s=0.01)
    batcher.start()
    try:
        rec.gate.clear()                                                    # the worker holds its first batch
        first = submit_all(batcher, [("x", "x0")])
        time.sleep(0.1)
        gone = Job("g", "g1", lambda result: pytest.fail("a dropped job got a result"))
        batcher.submit(gone)
        kept = submit_all(batcher, [("k", "k1")])
        assert batcher.queued == 2
        gone.gone = True                                                    # its client disconnected
        assert batcher.queued == 1
        rec.gate.set()
        assert all(e.wait(10) for e in first + kept)
        lonely = Job("h", "h1", lambda result: pytest.fail("a dropped job got a result"), gone=True)
        batcher.submit(lonely)                                              # a batch of dropped jobs only:
        time.sleep(0.1)                                                     # the worker waits on
        assert all(e.wait(10) for e in submit_all(batcher, [("k", "k2")]))
    finally:
        batcher.stop()
    assert [p for batch in rec.batches for p in batch] == ["x0", "k1", "k2"]
    assert (batcher.stats.dropped, batcher.stats.requests) == (2, 3)


class Fatal(BaseException):
    """An error the per-batch handling does not catch (as a bug in the worker itself would be)."""


def test_a_worker_that_fails_answers_every_job_and_refuses_new_ones():
    from ctxmt_cli.serve.batcher import WorkerFailed

    def broken(payloads):
        raise Fatal("broken")

    batcher = Batcher(broken, max_docs=1, wait_s=0.05)
    events = submit_all(batcher, [("a", "x"), ("b", "y")])          # queued before the worker starts
    batcher.start()
    assert all(e.wait(10) for e in events)
    assert all(isinstance(e.result, WorkerFailed) and "Fatal: broken" in str(e.result) for e in events)
    with pytest.raises(WorkerFailed):
        batcher.submit(Job("c", "z", lambda result: None))
    assert isinstance(batcher.failed, WorkerFailed)
    batcher.stop(timeout=10)


@pytest.mark.parametrize("wait_s", [float("nan"), float("inf"), 1e305, -0.001, 60.001])
def test_a_wait_beyond_its_bound_is_refused(wait_s):
    with pytest.raises(ValueError, match="wait_s"):
        Batcher(lambda payloads: payloads, max_docs=1, wait_s=wait_s)


def test_progress_hears_the_counters_after_every_batch():
    """``ctxmt serve --log-format``: the worker reports its counters once per batch, after the batch's answers."""
    rec, heard = Recorder(), []
    batcher = Batcher(rec, max_docs=2, wait_s=0.0,
                      progress=lambda stats: heard.append((stats.batches, stats.requests)))
    batcher.start()
    try:
        for key in ("a", "b", "c"):
            assert all(e.wait(10) for e in submit_all(batcher, [(key, key)]))
    finally:
        batcher.stop()
    assert heard == [(1, 1), (2, 2), (3, 3)]
