"""CTranslate2 in a process of its own, for the benchmarks' CTranslate2 peer (``peer_ct2``).

Why a process: PyTorch and CTranslate2 each bring their own OpenMP runtime (two copies of libgomp in one process,
each with its own thread pool). Measured here (2 idle CPU threads, the decode benchmark's ``small`` model, greedy
over 32 sentences): ctxmt's call took 200-245 ms until CTranslate2 had run once in the same process, and 330-440
ms on every call after, with CTranslate2's threads idle; its layer norms, softmaxes and small products (PyTorch's
parallel regions) took 2-6x longer. Each engine alone in its process: ctxmt 200 ms, CTranslate2 290 ms. Timing
both in one process, round-robin, therefore measured PyTorch's runtime slowed by the other, not ctxmt.

The worker imports ``ctranslate2`` only (never PyTorch's kernels), loads the exported model folder, and answers
``translate_batch`` / ``score_batch`` requests over a pipe with plain lists (a few milliseconds of pickling per
call for the benchmarks' 32-sentence batches, counted in CTranslate2's time).
"""

from __future__ import annotations

import multiprocessing
import weakref


def serve(folder: str, device: str, compute_type: str, threads: int, conn) -> None:
    """The worker: a ``ctranslate2.Translator`` over ``folder`` answering requests on ``conn`` until ``None``."""
    import ctranslate2

    translator = ctranslate2.Translator(folder, device=device, compute_type=compute_type, intra_threads=threads,
                                        inter_threads=1)
    conn.send(ctranslate2.__version__)
    while (request := conn.recv()) is not None:
        method, args, kwargs = request
        try:
            results = getattr(translator, method)(*args, **kwargs)
            if method == "translate_batch":
                conn.send(("ok", [r.hypotheses[0] for r in results]))          # the best hypothesis, as tokens
            else:
                conn.send(("ok", [list(r.log_probs) for r in results]))       # score_batch: per-token log-probs
        except Exception as error:   # noqa: BLE001 - handed to the caller, which raises it in its own process
            conn.send(("error", f"{type(error).__name__}: {error}"))


class RemoteTranslator:
    """A ``ctranslate2.Translator`` in a spawned process (module docstring); the methods the peer uses."""

    def __init__(self, folder: str, *, device: str, compute_type: str, threads: int):
        context = multiprocessing.get_context("spawn")              # a fresh interpreter: no OpenMP pool inherited
        self._conn, child = context.Pipe()
        self._process = context.Process(target=serve, args=(folder, device, compute_type, threads, child),
                                        daemon=True, name="ctxmt-ct2-peer")
        self._process.start()
        child.close()
        self.version = self._conn.recv()
        weakref.finalize(self, _stop, self._conn, self._process)

    def _call(self, method: str, *args, **kwargs):
        self._conn.send((method, args, kwargs))
        status, value = self._conn.recv()
        if status != "ok":
            raise RuntimeError(f"CTranslate2 ({method}): {value}")
        return value

    def translate_batch(self, source: list[list[str]], **options) -> list[list[str]]:
        """The best hypothesis (tokens) of every source row."""
        return self._call("translate_batch", source, **options)

    def score_batch(self, source: list[list[str]], target: list[list[str]]) -> list[list[float]]:
        """The log-probability of every target token (and the ``</s>`` it appends) of every row."""
        return self._call("score_batch", source, target)


def _stop(conn, process) -> None:
    """Ask the worker to finish, then make sure it has."""
    try:
        conn.send(None)
    except (BrokenPipeError, OSError):
        pass
    process.join(timeout=10)
    if process.is_alive():
        process.kill()
