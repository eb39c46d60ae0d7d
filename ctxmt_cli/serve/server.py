"""Running the application with uvicorn on a socket bound here, in the foreground or in a background thread.

Binding the socket ourselves turns an address in use or a bad host into one :class:`CtxmtError` line before
uvicorn starts (uvicorn would log the error and exit with its own code), and gives the port a ``--port 0``
asked the system for.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import threading
import time
from collections.abc import Callable

from ctxmt_cli.errors import OptionError
from ctxmt_cli.serve.guard import ConnectionLimits, guarded_protocol

#: the signals that stop the server gracefully (the requests in flight answered, then exit 0): uvicorn's own
#: (SIGINT, SIGTERM) and SIGHUP, which a closing terminal sends
STOPPING = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host``:``port`` (0: a free port); a one-line error when it cannot be had."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as err:
        raise OptionError("host", host, f"not an address of this machine ({err.strerror}); use 127.0.0.1, 0.0.0.0 "
                          "or a name that resolves") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as err:
        sock.close()
        raise OptionError("port", port, f"cannot listen on {host}:{port}: {err.strerror or err}; choose another port "
                          "(or host), or stop the program using it") from None
    sock.setblocking(False)
    return sock


def url_of(sock: socket.socket) -> str:
    """``http://HOST:PORT`` of a bound socket (an IPv6 host in brackets)."""
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def make_server(app, log_level: str = "warning", connections: ConnectionLimits = ConnectionLimits()):
    """A uvicorn server for ``app`` (no access log; uvicorn's own warnings and errors only) whose connections
    keep ``connections``' read timeouts and cap (:mod:`ctxmt_cli.serve.guard`)."""
    import uvicorn

    return uvicorn.Server(uvicorn.Config(app, log_level=log_level, access_log=False, lifespan="on",
                                         http=guarded_protocol(connections)))


def serve_forever(app, sock: socket.socket, announce: Callable[[str], None],
                  connections: ConnectionLimits = ConnectionLimits()) -> None:
    """Serve ``app`` on ``sock`` until Ctrl-C, SIGTERM or SIGHUP (a graceful stop: the requests in flight are
    answered, then the process exits with status 0); ``announce(url)`` once it is listening."""
    server = make_server(app, connections=connections)

    async def run() -> None:
        task = asyncio.ensure_future(server.serve(sockets=[sock]))
        while not server.started and not task.done():
            await asyncio.sleep(0.02)
        if server.started:
            announce(url_of(sock))
        await task

    try:
        with _sigterm_stops(server):
            asyncio.run(run())
    except KeyboardInterrupt:        # uvicorn re-raises the Ctrl-C it turned into a graceful stop
        pass
    finally:
        sock.close()


@contextlib.contextmanager
def _sigterm_stops(server):
    """SIGTERM and SIGHUP stop ``server`` gracefully and the process then exits with status 0.

    uvicorn catches SIGTERM to stop gracefully (in-flight requests finish), then restores the handler it found
    and raises the signal again: with the default handler found, that kills the process (status -15) after the
    clean stop. So the handler it finds is this one, which asks the server to stop (also before uvicorn's own
    is installed) and is harmless when raised again after the stop. SIGHUP, which uvicorn leaves alone, does
    the same."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, lambda signum, frame: setattr(server, "should_exit", True))
                for signum in STOPPING}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


class ServerThread:
    """``app`` served on ``host``:``port`` (0: a free one) by uvicorn in a background thread, for tests and
    embedding: ``with ServerThread(app) as server: urlopen(server.url + "/health")``."""

    def __init__(self, app, host: str = "127.0.0.1", port: int = 0, connections: ConnectionLimits = ConnectionLimits()):
        self.sock = bind(host, port)
        self.url = url_of(self.sock)
        self.server = make_server(app, connections=connections)
        self._thread = threading.Thread(target=self._run, name="ctxmt-serve", daemon=True)
        self._error: BaseException | None = None

    def _run(self) -> None:
        try:
            asyncio.run(self.server.serve(sockets=[self.sock]))
        except BaseException as err:  # noqa: BLE001 - handed to start()/stop()
            self._error = err

    def start(self, timeout: float = 30.0) -> ServerThread:
        """Start serving; returns once the server listens."""
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if self._error is not None or not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the server did not start: {self._error!r}")
            time.sleep(0.01)
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Stop gracefully and wait for the thread."""
        self.server.should_exit = True
        self._thread.join(timeout)
        self.sock.close()

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
