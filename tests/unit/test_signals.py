"""Stop signals take Ctrl-C's path (:mod:`ctxmt_cli.signals`), with real signals sent to this process: SIGTERM and
SIGHUP raise :class:`Interrupted` carrying their number inside :func:`stop_signals` (and nothing changes outside
it), a repeat while the first unwinds is ignored, :func:`deferred` records one for the loop to act on and raises a
second at once, and :func:`held` delays one until a rename sequence is whole."""

from __future__ import annotations

import os
import signal
import time

import pytest

from ctxmt_cli.signals import Interrupted, act_on_pending, deferred, held, pending, stop_signals


def _send(signum: int) -> None:
    os.kill(os.getpid(), signum)
    time.sleep(0.05)                        # the handler runs at the next bytecode; give it a moment


@pytest.mark.parametrize("signum,code,line", [(signal.SIGTERM, 143, "ctxmt: interrupted (SIGTERM)"),
                                              (signal.SIGHUP, 129, "ctxmt: interrupted (SIGHUP)"),
                                              (signal.SIGINT, 130, "ctxmt: interrupted")])
def test_a_stop_signal_raises_a_keyboard_interrupt_carrying_it(signum, code, line):
    before = signal.getsignal(signum)
    with pytest.raises(KeyboardInterrupt) as caught:
        with stop_signals():
            _send(signum)
    assert isinstance(caught.value, Interrupted)
    assert (caught.value.exit_code, caught.value.line()) == (code, line)
    assert signal.getsignal(signum) is before                 # the handler found is back


def test_a_repeat_while_unwinding_is_ignored():
    cleaned = []
    with pytest.raises(Interrupted) as caught:
        with stop_signals():
            try:
                _send(signal.SIGTERM)
            finally:
                _send(signal.SIGHUP)                           # e.g. Slurm's second signal: the cleanup goes on
                cleaned.append(True)
    assert cleaned == [True] and caught.value.signum == signal.SIGTERM


def test_deferred_records_one_signal_and_raises_a_second_at_once():
    with stop_signals():
        with pytest.raises(Interrupted) as caught:
            with deferred():
                _send(signal.SIGTERM)
                assert pending() == signal.SIGTERM             # recorded: the loop finishes its step
                _send(signal.SIGHUP)
        assert caught.value.signum == signal.SIGHUP
    with stop_signals():
        with pytest.raises(Interrupted, match="saved") as caught:
            with deferred():
                _send(signal.SIGHUP)
                act_on_pending("saved it")
        assert caught.value.line() == "ctxmt: interrupted (SIGHUP); saved it"


def test_a_signal_still_pending_when_the_block_ends_raises_then():
    with stop_signals():
        with pytest.raises(Interrupted):
            with deferred():
                _send(signal.SIGTERM)
        assert pending() is None


def test_held_delays_a_signal_until_the_block_is_whole():
    steps = []
    with pytest.raises(Interrupted):
        with stop_signals():
            with held():
                _send(signal.SIGTERM)
                steps.append("renamed")                        # not cut short
            steps.append("never")
    assert steps == ["renamed"]


def test_outside_a_command_nothing_changes():
    before = signal.getsignal(signal.SIGTERM)
    with deferred():
        assert signal.getsignal(signal.SIGTERM) is before and pending() is None
