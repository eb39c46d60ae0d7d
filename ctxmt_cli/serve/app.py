"""The HTTP layer of ``ctxmt serve``: a Starlette application over an :class:`~ctxmt_cli.serve.engine.Engine`.

Routes:

- ``POST /translate`` ``{"doc_id": "talk-1", "sentences": ["...", ...], "scores": false}`` →
  ``{"doc_id", "translations", "context", "context_sentences"[, "scores"]}``: the sentences translated after the
  document's earlier ones (``context``: ``new``, ``evicted`` or ``continued``; see :mod:`~ctxmt_cli.serve.documents`);
- ``DELETE /documents/{doc_id}`` forgets a document (404 when it is not kept); ``GET /documents`` lists the kept
  ids, least recently used first; ``GET /health`` the model family, the documents kept and the batch counters.

Every error is ``{"error": "one line"}``: 400 malformed or non-standard JSON (NaN, Infinity, nested deeper than
:data:`~ctxmt_cli.data.text_input.MAX_DEPTH`), 422 a body of the wrong shape (not an object, unknown or missing
fields, wrong types, an empty list, a string that is not text: a NUL or a lone surrogate), 413 too many sentences,
too long a sentence or too big a body (sentences are counted in characters of the decoded text), 415 a POST that
is not ``application/json`` (:class:`JsonOnly`), 404 an unknown route or document, 405 a method a route does not
take, 500 a translation that failed (the server goes on), 503 a server stopping or whose worker stopped on an
error (then ``/health`` too); 408 and 503 also come from the connection limits (:mod:`~ctxmt_cli.serve.guard`).
Requests are queued to the
:class:`~ctxmt_cli.serve.batcher.Batcher`, whose worker thread runs the model, so the event loop never waits for
it; a request whose client disconnects while it waits is dropped from the queue, never translated (``/health``
counts it as ``dropped``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass

from ctxmt_cli.data.text_input import JsonInputError, json_kind, load_json, text_problem
from ctxmt_cli.serve.batcher import Batcher, BatchStats, Job, ShuttingDown, WorkerFailed
from ctxmt_cli.serve.engine import Engine, RequestRefused, TranslateRequest

log = logging.getLogger(__name__)
FIELDS = ("doc_id", "sentences", "scores")
ROUTES = "POST /translate, DELETE /documents/{doc_id}, GET /documents, GET /health"
MAX_DOC_ID = 256


@dataclass(frozen=True)
class Limits:
    """What one request may hold: ``max_sentences`` sentences of at most ``max_sentence_chars`` characters."""

    max_sentences: int = 64
    max_sentence_chars: int = 2000

    @property
    def max_body_bytes(self) -> int:
        """The largest body such sentences make: every character escaped as a surrogate pair (``\\ud83d\\ude00``,
        12 bytes: what JSON writers that escape all non-ASCII write for an emoji), some whitespace around each,
        and the other fields. The limits themselves are counted in characters of the decoded text."""
        return self.max_sentences * (12 * self.max_sentence_chars + 64) + 12 * MAX_DOC_ID + 4096


def build_app(engine: Engine, *, limits: Limits = Limits(), max_batch_docs: int = 16, batch_wait_ms: float = 10.0,
              progress: Callable[[BatchStats], None] | None = None):
    """The Starlette application; its lifespan starts and stops the batch worker (``app.state.batcher``);
    ``progress(stats)`` after every batch (``ctxmt serve --log-format``)."""
    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException
    from starlette.routing import Route

    batcher = Batcher(engine.translate, max_docs=max_batch_docs, wait_s=batch_wait_ms / 1000, progress=progress)
    handlers = _Handlers(engine, batcher, limits)
    routes = [Route("/translate", handlers.translate, methods=["POST"]),
              Route("/documents", handlers.documents, methods=["GET"]),
              Route("/documents/{doc_id:path}", handlers.delete, methods=["DELETE"]),
              Route("/health", handlers.health, methods=["GET"])]
    from starlette.middleware import Middleware

    app = Starlette(routes=routes, lifespan=handlers.lifespan, middleware=[Middleware(JsonOnly)], exception_handlers={
        HTTPException: handlers.http_error, RequestRefused: handlers.refused, Exception: handlers.crashed})
    app.state.batcher, app.state.engine = handlers.batcher, engine
    return app


class _Handlers:
    """The routes, the error handlers and the lifespan of one application."""

    def __init__(self, engine: Engine, batcher: Batcher, limits: Limits):
        self.engine, self.batcher, self.limits = engine, batcher, limits

    @contextlib.asynccontextmanager
    async def lifespan(self, app):
        self.batcher.start()
        try:
            yield
        finally:                                    # the batch in flight finishes; queued requests get a 503
            await asyncio.get_running_loop().run_in_executor(None, self.batcher.stop)

    async def translate(self, request):
        """``POST /translate``: checked, queued to the batcher, answered when its batch is done."""
        job = _parse_request(await _read_body(request, self.limits.max_body_bytes), self.limits)
        loop = asyncio.get_running_loop()
        future = loop.create_future()

        def settle(result) -> None:                    # called on the batcher's thread
            loop.call_soon_threadsafe(_settle, future, result)

        queued = Job(job.doc_id, job, settle)
        try:
            self.batcher.submit(queued)
        except (ShuttingDown, WorkerFailed) as err:
            return _error(503, str(err))
        if not await _answered_before_disconnect(request, future):
            queued.gone = True                      # still queued: the batcher drops it, nothing is translated
            return _error(499, "the client closed the connection before the request was translated")
        result = future.result()
        if isinstance(result, RequestRefused):
            return _error(result.status, str(result))
        if isinstance(result, (ShuttingDown, WorkerFailed)):
            return _error(503, str(result))
        if isinstance(result, Exception):
            log.warning("translating document %r failed: %s", job.doc_id, _one_line(result))
            return _error(500, f"translation failed: {_one_line(result)}")
        return _json(result.to_json())

    async def delete(self, request):
        """``DELETE /documents/{doc_id}``."""
        doc_id = request.path_params["doc_id"]
        _check_doc_id(doc_id)
        if not self.engine.store.delete(doc_id):
            return _error(404, f"no document {doc_id!r} is kept (never translated, deleted or evicted)")
        return _json({"deleted": doc_id, "documents": len(self.engine.store)})

    async def documents(self, request):
        """``GET /documents``: the kept ids, least recently used first."""
        return _json({"documents": self.engine.store.ids(), "max_documents": self.engine.store.max_documents})

    async def health(self, request):
        """``GET /health``: the model, the documents kept and the batch counters."""
        store, stats = self.engine.store, self.batcher.stats
        if self.batcher.failed is not None:
            return _error(503, str(self.batcher.failed))
        model = self.engine.model
        return _json({"status": "ok", "family": model.family, "checkpoint": str(model.checkpoint),
                      "documents": len(store), "max_documents": store.max_documents, "keeps": store.rule.describe(),
                      "evictions": store.evictions, "batches": stats.batches, "requests": stats.requests,
                      "largest_batch": stats.largest_batch, "dropped": stats.dropped,
                      "queued": self.batcher.queued})

    async def http_error(self, request, exc):
        """Starlette's 404 and 405 (and any other HTTP error) as one JSON line."""
        if exc.status_code == 404:
            return _error(404, f"no route {request.method} {request.url.path}; the routes are {ROUTES}")
        if exc.status_code == 405:
            allowed = (exc.headers or {}).get("Allow", "")
            return _error(405, f"{request.method} is not allowed on {request.url.path}; use {allowed}",
                          headers={"Allow": allowed})
        return _error(exc.status_code, str(exc.detail))

    async def refused(self, request, exc: RequestRefused):
        return _error(exc.status, str(exc))

    async def crashed(self, request, exc: Exception):
        log.warning("%s %s failed: %s", request.method, request.url.path, _one_line(exc))
        return _error(500, f"internal error: {_one_line(exc)}")


class JsonOnly:
    """ASGI middleware: a POST whose Content-Type is not ``application/json`` (UTF-8) gets a 415 before anything
    reads it. A web page can send another site a ``text/plain`` or form POST without asking; a JSON one needs
    the browser's CORS preflight, which this server never grants, so no page can drive it cross-site."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["method"] == "POST":
            given = dict(scope["headers"]).get(b"content-type", b"").decode("latin-1")
            if not json_content_type(given):
                shown = repr(given) if given else "none"
                response = _error(415, f"POST needs Content-Type: application/json (UTF-8), not {shown}; send the "
                                  "body as JSON with that header")
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def json_content_type(value: str) -> bool:
    """Whether a Content-Type header says JSON: ``application/json``, with no charset or UTF-8's."""
    kind, *params = [part.strip() for part in value.split(";")]
    if kind.lower() != "application/json":
        return False
    for param in params:
        name, _, given = param.partition("=")
        if name.strip().lower() == "charset" and given.strip().strip('"').lower() not in ("utf-8", "utf8"):
            return False
    return True


def _settle(future: asyncio.Future, result) -> None:
    if not future.done():                       # a client that went away cancelled its future
        future.set_result(result)


async def _answered_before_disconnect(request, future: asyncio.Future) -> bool:
    """Wait for ``future``; False as soon as the client disconnects first (nobody would read the answer)."""
    watcher = asyncio.ensure_future(_disconnect(request))
    try:
        await asyncio.wait({future, watcher}, return_when=asyncio.FIRST_COMPLETED)
        if not future.done() and watcher.exception() is not None:     # cannot tell: wait for the answer
            await future
    finally:
        watcher.cancel()
    return future.done()


async def _disconnect(request) -> None:
    """Return once the server reports the client gone (the body is read: what comes next is the disconnect)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split()) or "no message"
    return f"{type(err).__name__}: {text}"


def _json(content: dict, status: int = 200, headers=None):
    from starlette.responses import JSONResponse

    return JSONResponse(content, status_code=status, headers=headers)


def _error(status: int, message: str, headers=None):
    return _json({"error": message}, status, headers)


async def _read_body(request, limit: int) -> bytes:
    """The request body; 413 once it grows past ``limit`` bytes (checked as it arrives, not after)."""
    too_big = RequestRefused(413, f"the body is larger than {limit} bytes, more than --max-sentences sentences of "
                             "--max-sentence-chars characters can take; send fewer or shorter sentences per request")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise too_big
    from starlette.requests import ClientDisconnect

    chunks, size = [], 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise too_big
            chunks.append(chunk)
    except ClientDisconnect:                    # nobody reads the answer; not a server error
        raise RequestRefused(400, "the client closed the connection before sending the whole body") from None
    return b"".join(chunks)


def _parse_request(body: bytes, limits: Limits) -> TranslateRequest:
    """The checked body of ``POST /translate``; :class:`RequestRefused` (400, 413 or 422) with one line if not."""
    try:
        data = load_json(body.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise RequestRefused(400, f"the body is not UTF-8 text (byte {err.start})") from None
    except json.JSONDecodeError as err:
        raise RequestRefused(400, f"malformed JSON: {err.msg} at line {err.lineno} column {err.colno}") from None
    except JsonInputError as err:               # a string that is not text: the field is named (422)
        raise RequestRefused(400 if err.field is None else 422, str(err)) from None
    if not isinstance(data, dict):
        raise RequestRefused(422, f'the body is a JSON {json_kind(data)}; send an object {{"doc_id": "...", '
                             '"sentences": ["...", ...]}')
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise RequestRefused(422, f"unknown field{'s' * (len(unknown) > 1)} {', '.join(map(repr, unknown))}; "
                             f"the fields are {', '.join(FIELDS)}")
    for name in ("doc_id", "sentences"):
        if name not in data:
            raise RequestRefused(422, f"missing field {name!r}; send {{\"doc_id\": \"...\", \"sentences\": [...]}}")
    doc_id, sentences, scores = data["doc_id"], data["sentences"], data.get("scores", False)
    _check_doc_id(doc_id)
    if not isinstance(scores, bool):
        raise RequestRefused(422, f"scores must be true or false, not a JSON {json_kind(scores)}")
    _check_sentences(sentences, limits)
    return TranslateRequest(doc_id, list(sentences), scores)


def _check_doc_id(doc_id) -> None:
    """A document id: a non-empty string of at most :data:`MAX_DOC_ID` characters, text (422 if not)."""
    if not isinstance(doc_id, str) or not doc_id or len(doc_id) > MAX_DOC_ID:
        given = f"{len(doc_id)} characters" if isinstance(doc_id, str) else f"a JSON {json_kind(doc_id)}"
        raise RequestRefused(422, f"doc_id must be a non-empty string of at most {MAX_DOC_ID} characters, not "
                             f"{given}")
    problem = text_problem(doc_id)
    if problem is not None:
        raise RequestRefused(422, f"doc_id holds {problem}; give a text id")


def _check_sentences(sentences, limits: Limits) -> None:
    if not isinstance(sentences, list):
        raise RequestRefused(422, f"sentences must be a list of strings, not a JSON {json_kind(sentences)}")
    if not sentences:
        raise RequestRefused(422, "sentences is empty; send at least one sentence")
    if len(sentences) > limits.max_sentences:
        raise RequestRefused(413, f"{len(sentences)} sentences in one request, more than --max-sentences "
                             f"{limits.max_sentences}; send the document in several requests (its context is kept)")
    for i, sentence in enumerate(sentences):
        if not isinstance(sentence, str):
            raise RequestRefused(422, f"sentences[{i}] is a JSON {json_kind(sentence)}; every sentence must be a "
                                 "string")
        if len(sentence) > limits.max_sentence_chars:
            raise RequestRefused(413, f"sentences[{i}] has {len(sentence)} characters, more than "
                                 f"--max-sentence-chars {limits.max_sentence_chars}; split it")
