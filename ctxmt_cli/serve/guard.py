"""Connections that cannot hold the server: read timeouts and a cap on open connections.

uvicorn reads a request for as long as its client takes, and keeps every connection it accepts: thousands of
stalled connections (or requests sent a byte a second) hold memory and sockets for ever. The HTTP protocol
here is uvicorn's own (h11) with three limits (:class:`ConnectionLimits`):

- the request line and headers must arrive within ``header_timeout`` seconds of the connection's start (or of
  the previous response, on a kept-alive connection), however the bytes trickle in;
- the body within ``body_timeout`` seconds of the end of the headers;
- at most ``max_connections`` connections are open at once: one more is answered 503 and closed at once.

A request too slow is answered 408 (a connection that sent nothing of its next request is just closed) and
closed; the application sees a client that went away (:func:`ctxmt_cli.serve.app._read_body`).
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ConnectionLimits:
    """How long a request may take to arrive (seconds) and how many connections may be open at once."""

    header_timeout: float = 10.0
    body_timeout: float = 60.0
    max_connections: int = 256

    def __post_init__(self):
        for name in ("header_timeout", "body_timeout"):
            value = getattr(self, name)
            if not (math.isfinite(value) and 0 < value <= 3600):
                raise ValueError(f"{name} must be a number of seconds in (0, 3600], not {value}")
        if not 1 <= self.max_connections <= 1_000_000:
            raise ValueError(f"max_connections must be in [1, 1000000], not {self.max_connections}")


def _raw_response(status: int, reason: str, message: str) -> bytes:
    """A whole HTTP/1.1 response closing the connection, ``{"error": message}`` its body (written outside h11:
    the request it answers may not have arrived)."""
    body = json.dumps({"error": message}).encode()
    head = (f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\nconnection: close\r\n"
            f"content-length: {len(body)}\r\n\r\n")
    return head.encode("ascii") + body


def guarded_protocol(limits: ConnectionLimits):
    """uvicorn's h11 protocol class with ``limits`` (passed to ``uvicorn.Config(http=...)``; uvicorn is imported
    here, not with the module, as the serve extra may be missing)."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    return type("GuardedH11Protocol", (_Guard, H11Protocol), {"limits": limits})


class _Guard:
    """Over uvicorn's H11Protocol (see :func:`guarded_protocol`): one connection, with a deadline per phase of its
    request (headers, then body) and none while it is answered."""

    limits: ConnectionLimits

    def connection_made(self, transport) -> None:
        over = len(self.connections) >= self.limits.max_connections
        super().connection_made(transport)
        self._timer, self._phase, self._heard = None, None, False
        if over:
            cap = self.limits.max_connections
            log.warning("refused a connection: %d are open (--max-connections)", cap)
            self._close(_raw_response(503, "Service Unavailable", f"the server holds {cap} connections "
                                      "(--max-connections); try again shortly"))
            return
        self._follow()

    def data_received(self, data: bytes) -> None:
        self._heard = True
        super().data_received(data)
        self._follow()

    def on_response_complete(self) -> None:
        self._phase, self._heard = None, False              # the next request's headers: a fresh deadline
        super().on_response_complete()
        self._follow()

    def connection_lost(self, exc) -> None:
        self._arm(None, 0.0)
        super().connection_lost(exc)

    def _follow(self) -> None:
        """Arm the deadline of the phase the client is in (kept while the phase lasts, however bytes trickle)."""
        import h11

        if self.transport is None or self.transport.is_closing():
            return
        state = self.conn.their_state
        if state is h11.IDLE:
            self._arm("headers", self.limits.header_timeout)
        elif state is h11.SEND_BODY:
            self._arm("body", self.limits.body_timeout)
        else:                                               # the request is in: the answer may take its time
            self._arm(None, 0.0)

    def _arm(self, phase, seconds: float) -> None:
        if phase == self._phase and (phase is None or self._timer is not None):
            return
        if self._timer is not None:
            self._timer.cancel()
        self._phase = phase
        self._timer = None if phase is None else self.loop.call_later(seconds, self._expired, phase)

    def _expired(self, phase: str) -> None:
        self._timer = None
        if self.transport.is_closing() or phase != self._phase:
            return
        seconds = self.limits.header_timeout if phase == "headers" else self.limits.body_timeout
        started = self.cycle is not None and self.cycle.response_started and phase == "body"
        if (phase == "headers" and not self._heard) or started:
            self._close(b"")                                # an idle kept-alive connection, or an answer under way
            return
        self._close(_raw_response(408, "Request Timeout", f"the request's {phase} did not arrive within {seconds:g} s "
                                  f"(--{phase.rstrip('s')}-timeout); send it whole, at once"))

    def _close(self, answer: bytes) -> None:
        if answer:
            self.transport.write(answer)
        self.transport.close()
