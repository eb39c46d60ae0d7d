"""SIGTERM and SIGHUP take Ctrl-C's path: the signals ``timeout``, Slurm, Docker and a closed terminal send.

While a command runs (:func:`stop_signals`, installed once by the command line for every command), SIGINT,
SIGTERM and SIGHUP raise :class:`Interrupted`, a :class:`KeyboardInterrupt` carrying the signal's number. So every
cleanup that a Ctrl-C runs runs for them too: the temp files of :mod:`ctxmt_cli.outputs` are removed, an output
set aside is put back, and the command line prints one line and exits with ``128 + signal`` (130, 143, 129).

A repeated signal while the first one unwinds is ignored, so a second SIGTERM or SIGHUP (Slurm and a closing
terminal may send two) cannot cut a cleanup short; kill -9 still stops at once (the next run removes what it
left, :func:`ctxmt_cli.outputs.remove_stale`). A loop that must finish a step first (training saves a resumable
checkpoint, as Slurm's preemption expects) runs under :func:`deferred`: a signal is then only recorded
(:func:`pending`) until the loop asks, and a second one raises at once.

A process forked from the command (the encoding pool's workers) keeps the signals' default actions: the pool
stops its workers with SIGTERM, which must end them, not raise in them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator

#: the signals that stop a command as Ctrl-C does (SIGHUP only where the platform has it)
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


class Interrupted(KeyboardInterrupt):
    """A command stopped by ``signum`` (SIGINT: Ctrl-C); ``note``: what was kept (e.g. a resumable checkpoint)."""

    def __init__(self, signum: int = signal.SIGINT, note: str = ""):
        super().__init__(signum)
        self.signum, self.note = int(signum), note

    @property
    def exit_code(self) -> int:
        """The shell's convention for a process a signal stopped: 128 + its number."""
        return 128 + self.signum

    def line(self) -> str:
        """The one line the command line prints: ``ctxmt: interrupted`` (SIGINT) or ``... (SIGTERM)``."""
        name = "" if self.signum == signal.SIGINT else f" ({signal.Signals(self.signum).name})"
        return f"ctxmt: interrupted{name}" + (f"; {self.note}" if self.note else "")

    def __str__(self) -> str:
        return self.line()

    def __reduce__(self):
        return type(self), (self.signum, self.note)


def interruption(err: KeyboardInterrupt) -> Interrupted:
    """``err`` as an :class:`Interrupted` (a plain KeyboardInterrupt is Ctrl-C's)."""
    return err if isinstance(err, Interrupted) else Interrupted(signal.SIGINT)


class _State:
    """What the handler knows: the process that installed it, whether a signal is unwinding or deferred."""

    def __init__(self, pid: int = -1):
        self.pid = pid
        self.unwinding: int | None = None          # the signal being handled: repeats are ignored
        self.deferring = 0                            # depth of :func:`deferred` blocks
        self.pending: int | None = None            # a signal recorded under :func:`deferred`
        self.holding = 0                              # depth of :func:`held` blocks
        self.held: int | None = None               # a signal that arrived under :func:`held`


_state = _State()


def _default_action(signum: int) -> None:
    """What the signal would have done without ctxmt's handler (in a forked worker)."""
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _handle(signum: int, frame) -> None:
    if os.getpid() != _state.pid:                      # a forked worker: not the command's process
        _default_action(signum)
        return
    if _state.unwinding is not None:                   # a repeat while the first one cleans up
        return
    if _state.deferring and _state.pending is None:    # the loop saves first, then raises
        _state.pending = signum
        return
    if _state.holding:                                 # raised once the renames are whole
        _state.held = _state.held or signum
        return
    _state.unwinding = signum
    raise Interrupted(signum)


@contextlib.contextmanager
def stop_signals() -> Iterator[None]:
    """While the block runs, SIGINT, SIGTERM and SIGHUP raise :class:`Interrupted` (the handlers found before are
    restored after; nested blocks and threads other than the main one change nothing)."""
    global _state
    if threading.current_thread() is not threading.main_thread() or _state.pid == os.getpid():
        yield
        return
    previous = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    _state = _State(os.getpid())
    try:
        for signum in STOP_SIGNALS:
            signal.signal(signum, _handle)
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
        _state = _State()


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Within the block a stop signal is recorded, not raised (:func:`pending` tells the loop, which acts on it
    with :func:`act_on_pending`); a second one raises at once, and one still pending when the block ends raises
    then. Outside :func:`stop_signals` (the library) nothing changes."""
    _state.deferring += 1
    try:
        yield
    finally:
        _state.deferring -= 1
    act_on_pending()


def pending() -> int | None:
    """The stop signal received under :func:`deferred` and not yet acted on, or None."""
    return _state.pending


def act_on_pending(note: str = "", fallback: int | None = None) -> None:
    """Raise the :class:`Interrupted` of the pending signal (with ``note``), if there is one, else of ``fallback``
    if given (a training job's rank that the signal missed stops with the others)."""
    signum = _state.pending if _state.pending is not None else fallback
    if signum is not None:
        _state.pending, _state.unwinding = None, signum
        raise Interrupted(signum, note)


@contextlib.contextmanager
def held() -> Iterator[None]:
    """A stop signal waits while the block runs and takes effect right after it: for a few renames that must not
    be cut in two (an output set aside and its replacement put in place). (Blocking the signal would not do: the
    kernel hands a process's signal to any thread that does not block it.)"""
    _state.holding += 1
    try:
        yield
    finally:
        _state.holding -= 1
    signum = _state.held
    if signum is not None and not _state.holding:
        _state.held, _state.unwinding = None, signum
        raise Interrupted(signum)
