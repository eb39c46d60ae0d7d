"""``ctxmt serve``: the HTTP translation server that keeps document context (:mod:`ctxmt_cli.serve`).

Registered on the app by :func:`register` (:mod:`ctxmt_cli.cli.app` calls it). Starlette, uvicorn and torch are imported
inside the command, so ``--help`` stays instant and a missing server package is one line naming the extra.
"""

from __future__ import annotations

from pathlib import Path

import typer

from ctxmt_cli.cli.errors import user_errors
from ctxmt_cli.cli.options import (
    BATCH_DOCS,
    COUNT,
    SENTENCES,
    WAIT_MS,
    Beam,
    Device,
    Lenpen,
    LogFormat,
    Quantize,
)
from ctxmt_cli.errors import CtxmtError

#: --batch-wait-ms at most a minute: a longer wait would hold every answer past any client's patience
MAX_WAIT_MS = 60_000.0


def _finite(value: float) -> float:
    """A number of seconds or milliseconds: finite (click's range lets NaN through)."""
    if value != value or value in (float("inf"), float("-inf")):
        raise typer.BadParameter("give a finite number")
    return value


def _check_packages() -> None:
    """Starlette and uvicorn, or one line saying how to install them."""
    from ctxmt_cli.serve import INSTALL_HINT

    for name in ("starlette", "uvicorn"):
        try:
            __import__(name)
        except ImportError:
            raise CtxmtError(f"ctxmt serve needs {name}, which is not installed: {INSTALL_HINT}") from None


@user_errors
def serve(
    ctx: typer.Context,
    checkpoint: Path = typer.Option(..., "--checkpoint", "-c", help="model checkpoint"),
    host: str = typer.Option("127.0.0.1", help="address to listen on (0.0.0.0: every interface)"),
    port: int = typer.Option(8000, min=0, max=65535, help="port to listen on (0: a free one, printed)"),
    device: Device = "auto",
    quantize: Quantize = None,
    max_documents: int = typer.Option(1000, **COUNT, help="documents kept; a new one evicts the least recently used"),
    max_batch_docs: int = typer.Option(16, **BATCH_DOCS, help="requests (different documents) translated in one batch"),
    max_sentences: int = typer.Option(64, **SENTENCES, help="sentences per request"),
    max_sentence_chars: int = typer.Option(2000, **SENTENCES, help="characters per sentence"),
    batch_wait_ms: float = typer.Option(10.0, **WAIT_MS, callback=_finite,
                                        help="how long a batch waits for more requests after its first one"),
    header_timeout: float = typer.Option(10.0, min=0.001, max=3600.0, callback=_finite,
                                         help="seconds a request's line and headers may take to arrive (a stalled "
                                         "or trickling client is answered 408 and disconnected)"),
    body_timeout: float = typer.Option(60.0, min=0.001, max=3600.0, callback=_finite,
                                       help="seconds a request's body may take to arrive after its headers"),
    max_connections: int = typer.Option(256, min=1, max=1_000_000, help="connections open at once; one more is "
                                        "answered 503 and closed"),
    beam: Beam = None,
    lenpen: Lenpen = None,
    first_pass: Path | None = typer.Option(None, help="hanoit reading target context: "
                                              "the sentence-level checkpoint whose "
                                              "translations it reads as target context"),
    group_sentences: int | None = typer.Option(None, **SENTENCES, help="mbe: groups of N consecutive sentences (the "
                                                  "server keeps the unfinished group) [default: the whole document]"),
    max_document_sentences: int | None = typer.Option(None, **SENTENCES, help="mbe without --group-sentences: the "
                                                         "most sentences a document may hold (all are kept and "
                                                         "re-read) [default: 1024]"),
    log_format: LogFormat = None,
):
    """Serve translations over HTTP, keeping each document's context between requests.

    POST /translate {"doc_id": "d1", "sentences": [...]} continues a document as `ctxmt translate` would.

    DELETE /documents/ID forgets one; GET /health, GET /documents. Different documents are batched together.
    The requests answered so far go to stderr (a live count on a terminal, otherwise a line every 30 s while
    requests come).
    """
    _check_packages()
    from ctxmt_cli.logs import CountLog

    log = CountLog.periodic(log_format, "requests")
    try:
        _serve(ctx.params, log)
    finally:
        log.close()


def _serve(options: dict, log) -> None:
    """Bind, load and serve with ``options`` (the command's, by name) until a signal stops it; the listening line
    and the requests answered on ``log``."""
    from ctxmt_cli.serve.guard import ConnectionLimits
    from ctxmt_cli.serve.server import bind, serve_forever

    sock = bind(options["host"], options["port"])      # an address in use is refused before the model loads
    try:
        app, line = _build(options, lambda stats: log.update("serve", stats.requests, None))
    except BaseException:
        sock.close()
        raise
    connections = ConnectionLimits(options["header_timeout"], options["body_timeout"], options["max_connections"])
    serve_forever(app, sock, lambda url: log.message(f"ctxmt: serve: listening on {url} ({line}); Ctrl-C or SIGTERM "
                                                     "stops", url=url), connections)


def _build(options: dict, progress=None):
    """The application and the words of the listening line (``options``: the command's, by name; ``progress``:
    called with the batch counters after every batch)."""
    import sys

    from ctxmt_cli import api
    from ctxmt_cli.models.families import inputs_of
    from ctxmt_cli.serve.app import Limits, build_app
    from ctxmt_cli.serve.documents import DocumentStore
    from ctxmt_cli.serve.engine import Engine, keep_rule

    o = options
    checkpoint, first_pass, group_sentences = o["checkpoint"], o["first_pass"], o["group_sentences"]
    _refuse_exported_folder(checkpoint)
    model = api.load(checkpoint, device=o["device"], first_pass=first_pass, quantize=o["quantize"])
    model.warn = lambda text: print(f"ctxmt: warning: {text}", file=sys.stderr)
    if first_pass is None:
        inputs_of(model.loaded.recipe.model).check_first_pass([], None)   # a bilingual model needs --first-pass
    rule = keep_rule(model, group_sentences, o["max_document_sentences"])
    engine = Engine(model, DocumentStore(o["max_documents"], rule), beam=o["beam"], lenpen=o["lenpen"],
                    group_sentences=group_sentences)
    app = build_app(engine, limits=Limits(o["max_sentences"], o["max_sentence_chars"]),
                    max_batch_docs=o["max_batch_docs"], batch_wait_ms=o["batch_wait_ms"], progress=progress)
    weights = "" if o["quantize"] is None else f", {o['quantize']}"
    return app, (f"{model.family} model {checkpoint}{weights}; keeps {rule.describe()} of at most {o['max_documents']} "
                 "documents; POST /translate, GET /health")


def _refuse_exported_folder(checkpoint: Path) -> None:
    """A CTranslate2 export is refused with what does work (the server runs ctxmt's own torch model only)."""
    from ctxmt_cli.export.ct2_folder import META_FILE

    if (checkpoint / META_FILE).is_file():
        raise CtxmtError(f"{checkpoint} is a folder written by ctxmt export ctranslate2, which ctxmt serve does not "
                         "run (it serves ctxmt's own model): serve the .pt checkpoint it was exported from, "
                         f"ctxmt serve -c CHECKPOINT.pt, or translate the folder with ctxmt translate DOCS --engine "
                         f"ctranslate2 -c {checkpoint}")


def register(app: typer.Typer) -> None:
    """Add ``serve`` to the ``ctxmt`` command group."""
    app.command("serve")(serve)
