"""``ctxmt serve`` under hostile requests and at its edges, over real HTTP on the loopback interface: every route
answers hostile input with a 4xx and a one-line JSON error and then serves correctly; a request whose client
disconnected before its turn is never translated; a real server process stopped by SIGTERM or SIGHUP answers the
request in flight and exits 0; a CTranslate2 folder is refused with what works. Connections cannot hold the
server: a stalled or trickling request is answered 408 and closed after its read timeout, connections past the cap
get a 503; a POST that is not JSON gets a 415 (no web page can drive the server cross-site); the sentence limits
count characters of the decoded text; a worker thread that fails answers 503, never hangs."""

from __future__ import annotations

import contextlib
import json
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from ctxmt_cli import api
from ctxmt_cli.serve.app import MAX_DOC_ID, Limits, build_app
from ctxmt_cli.serve.documents import DocumentStore
from ctxmt_cli.serve.engine import Engine, keep_rule
from ctxmt_cli.serve.guard import ConnectionLimits
from ctxmt_cli.serve.server import ServerThread
from tests.integration.conftest import assert_user_error, run_cli
from tests.unit.test_api import write_checkpoint
from tests.unit.test_serve_app import Client, serving
from tests.unit.train_fixtures import prepared  # noqa: F401 (a session fixture: the tiny prepared corpus)

SENTENCES = ["a b c .", "d e ."]


@pytest.fixture(scope="module")
def checkpoint(prepared, tmp_path_factory):  # noqa: F811 - the fixture imported above
    """A tiny concatenation model (one previous sentence on each side) with random weights."""
    spec = {"family": "concat", "src_context_sentences": 1, "tgt_context_sentences": 1}
    return write_checkpoint(prepared, "concat", tmp_path_factory.mktemp("serve-safety") / "concat.pt", spec)


def body(**fields) -> bytes:
    """A good ``POST /translate`` body with ``fields`` replaced (NaN and Infinity written as Python writes them)."""
    return json.dumps({"doc_id": "d", "sentences": ["a ."], **fields}, allow_nan=True).encode()


HOSTILE = [  # (method, path, body, status, words of the one-line error)
    ("POST", "/translate", b"[" * 200_000, 400, "nested deeper than 32 levels"),
    ("POST", "/translate", b'{"doc_id": {"a": ' * 40 + b"1" + b"}" * 40, 400, "nested deeper than 32 levels"),
    ("POST", "/translate", body(doc_id=float("nan")), 400, "NaN is not valid JSON"),
    ("POST", "/translate", body(scores=float("inf")), 400, "Infinity is not valid JSON"),
    ("POST", "/translate", body(scores=float("-inf")), 400, "-Infinity is not valid JSON"),
    ("POST", "/translate", b'{"doc_id": "d", "sentences": ["a"], "scores": 1e400}', 400, "1e400 is too large"),
    ("POST", "/translate", b'{"doc_id": ' + b"9" * 5000 + b', "sentences": ["a"]}', 400, "thousands of digits"),
    ("POST", "/translate", body(doc_id="d\ud800"), 422, "doc_id holds a lone surrogate \\ud800"),
    ("POST", "/translate", body(sentences=["a .", "b \udfff ."]), 422, "sentences[1] holds a lone surrogate"),
    ("POST", "/translate", body(sentences=["a \x00 ."]), 422, "sentences[0] holds a NUL character"),
    ("POST", "/translate", body(doc_id="\x00"), 422, "doc_id holds a NUL character"),
    ("POST", "/translate", b'{"doc_id": "d", "sentences": ["a"], "\\ud800": 1}', 422, "a key holds a lone surrogate"),
    ("POST", "/translate", b'{"doc_id": "d", "sentences": ["a"], "sentences": ["b"]}', 400,
     'the key "sentences" appears twice'),
    ("POST", "/translate", b'{"doc_id": "d\x00", "sentences": ["a"]}', 400, "malformed JSON"),   # a raw NUL
    ("POST", "/translate", b'{"doc_id": "d", "sentences": ["caf\xe9"]}', 400, "not UTF-8"),
    ("POST", "/translate", b"", 400, "malformed JSON"),
    ("POST", "/translate", body(sentences="a b c ."), 422, "sentences must be a list of strings, not a JSON string"),
    ("POST", "/translate", body(sentences=[["a ."]]), 422, "sentences[0] is a JSON array"),
    ("POST", "/translate", body(sentences={"0": "a ."}), 422, "not a JSON object"),
    ("POST", "/translate", body(doc_id=None), 422, "not a JSON null"),
    ("POST", "/translate", body(doc_id=["d"]), 422, "not a JSON array"),
    ("POST", "/translate", body(doc_id=True), 422, "not a JSON boolean"),
    ("POST", "/translate", body(doc_id=""), 422, "doc_id must be a non-empty string"),
    ("POST", "/translate", body(doc_id="x" * (MAX_DOC_ID + 1)), 422, f"not {MAX_DOC_ID + 1} characters"),
    ("POST", "/translate", body(scores=1), 422, "scores must be true or false, not a JSON number"),
    ("DELETE", "/documents/" + "x" * (MAX_DOC_ID + 1), None, 422, f"not {MAX_DOC_ID + 1} characters"),
    ("DELETE", "/documents/a%00b", None, 422, "doc_id holds a NUL character"),
    ("DELETE", "/documents/%ED%A0%80", None, 404, "no document"),          # not UTF-8: decoded as U+FFFD
    ("DELETE", "/documents/never", None, 404, "no document 'never'"),
    ("GET", "/documents/d", None, 405, "GET is not allowed on /documents/d"),
    ("POST", "/documents", b"[[[[", 405, "POST is not allowed on /documents"),
    ("DELETE", "/health", None, 405, "DELETE is not allowed on /health"),
    ("GET", "/health/..%2F..%2Fetc", None, 404, "no route GET"),
]


def test_hostile_requests_get_one_line_4xx_and_the_server_serves_on(checkpoint):
    with serving(checkpoint, batch_wait_ms=1.0) as (client, model):
        for method, path, data, status, words in HOSTILE:
            got, answer = client.call(method, path, data)
            assert (got, list(answer)) == (status, ["error"]), (method, path, data[:80] if data else data, answer)
            assert words in answer["error"], answer
            assert "\n" not in answer["error"] and "Traceback" not in answer["error"]
        assert client.call("GET", "/documents", None) == (200, {"documents": [], "max_documents": 100})
        served = [t for s in SENTENCES for t in client.translate("doc", [s])["translations"]]
        status, health = client.call("GET", "/health?x=%5B%5B%5B", None)
        documents = client.call("GET", "/documents", None)[1]["documents"]
    assert served == model.translate([SENTENCES])[0].translations             # and translates correctly
    assert status == 200 and health["requests"] == len(SENTENCES) and documents == ["doc"]


def test_a_request_whose_client_left_before_its_turn_is_never_translated(checkpoint):
    model = api.load(checkpoint, device="cpu")
    translate, seen = model.translate, []
    busy, release = threading.Event(), threading.Event()

    def slow(docs, **options):                          # the model, held busy on document "busy"
        seen.extend(d.doc_id for d in docs)
        if any(d.doc_id == "busy" for d in docs):
            busy.set()
            assert release.wait(60)
        return translate(docs, **options)

    model.translate = slow
    with serving(None, model=model, batch_wait_ms=1.0) as (client, _):
        first = threading.Thread(target=lambda: client.translate("busy", SENTENCES[:1]))
        first.start()
        assert busy.wait(60)
        host, port = client.url.removeprefix("http://").split(":")
        request = body(doc_id="gone")
        with socket.create_connection((host, int(port)), timeout=60) as leaving:
            leaving.sendall(b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                            b"Content-Length: %d\r\n\r\n%s" % (len(request), request))
            wait_for(lambda: client.call("GET", "/health")[1]["queued"] == 1)
        wait_for(lambda: client.call("GET", "/health")[1]["queued"] == 0)  # the server saw the client go
        release.set()
        first.join(60)
        after = client.translate("after", SENTENCES[1:])
        health = client.call("GET", "/health")[1]
        documents = client.call("GET", "/documents")[1]["documents"]
    assert "gone" not in seen and seen == ["busy", "after"]
    assert (health["dropped"], health["requests"], documents) == (1, 2, ["busy", "after"])
    assert after["translations"] == translate([SENTENCES[1:]])[0].translations


def wait_for(condition, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_answers_the_request_in_flight_and_exits_0(signum, checkpoint):
    # --batch-wait-ms 3000: the request waits in the batcher, in flight, when SIGTERM arrives
    process = subprocess.Popen([sys.executable, "-m", "ctxmt_cli", "serve", "-c", str(checkpoint), "--port", "0",
                                "--device", "cpu", "--batch-wait-ms", "3000"], stderr=subprocess.PIPE, text=True)
    answer = {}
    try:
        line = process.stderr.readline()
        found = re.search(r"listening on (http://127\.0\.0\.1:\d+) ", line)
        assert found and "SIGTERM" in line, line
        url = found.group(1)
        def send() -> None:
            status, reply = Client(url).call("POST", "/translate", body(doc_id="d", sentences=SENTENCES))
            answer.update(status=status, body=reply)

        sender = threading.Thread(target=send)
        sender.start()
        wait_for(lambda: Client(url).call("GET", "/health", None)[1]["queued"] == 1)
        process.send_signal(signum)
        sender.join(60)
    finally:
        if process.poll() is None and not answer:
            process.kill()
        _, rest = process.communicate(timeout=60)
    assert answer.get("status") == 200 and len(answer["body"]["translations"]) == len(SENTENCES), answer
    assert process.returncode == 0, rest
    assert "Traceback" not in rest


def test_a_ctranslate2_folder_is_refused_with_what_works(tmp_path):
    folder = tmp_path / "ct2"
    folder.mkdir()
    (folder / "ctxmt.json").write_text("{}")
    message = assert_user_error(run_cli("serve", "-c", folder, "--port", 0), str(folder),
                                "written by ctxmt export ctranslate2", "ctxmt serve -c CHECKPOINT.pt")
    assert "serve --engine" not in message and "use --engine" not in message


# ---- connections that cannot hold the server ------------------------------------------------------------------
@pytest.fixture(scope="module")
def model(checkpoint):
    return api.load(checkpoint, device="cpu")


@contextlib.contextmanager
def guarded(model, connections: ConnectionLimits, limits: Limits = Limits()):
    """A server on a free loopback port with ``connections``' limits; yields (host, port, client)."""
    engine = Engine(model, DocumentStore(100, keep_rule(model, None, None)))
    with ServerThread(build_app(engine, limits=limits, batch_wait_ms=1.0), connections=connections) as server:
        host, port = server.url.removeprefix("http://").split(":")
        yield host, int(port), Client(server.url)


def answer_of(sock: socket.socket, timeout: float = 30.0) -> tuple[bytes, float]:
    """Everything the server sends until it closes the connection, and how long that took (seconds)."""
    start, data = time.monotonic(), b""
    sock.settimeout(timeout)
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except ConnectionResetError:
        pass
    return data, time.monotonic() - start


def trickle(sock: socket.socket, data: bytes, every: float = 0.05) -> None:
    """Send ``data`` a byte at a time, ``every`` seconds apart, until done or the server hangs up."""
    for i in range(len(data)):
        try:
            sock.sendall(data[i:i + 1])
        except OSError:
            return
        time.sleep(every)


SHORT = ConnectionLimits(header_timeout=0.5, body_timeout=0.5, max_connections=64)
REQUEST = b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
SLOW = [  # (what the client sends, a byte each 50 ms, then waits; what the server answers before it closes)
    (b"", b""),                                                           # stalled: nothing, closed
    (b"POST /translate HTTP/1.1\r\nHost: x\r\n", b"408 Request Timeout"),  # half the headers, then stalls
    (b"POST /translate HTTP/1.1\r\n" + b"X-Slow: " + b"a" * 4000, b"408 Request Timeout"),  # trickling headers
    (REQUEST % 4000 + b'{"doc_id": "d", "sentences": ["' + b"a" * 4000, b"408 Request Timeout"),  # trickling body
]


@pytest.mark.parametrize("sent,answer", SLOW, ids=["stalled", "half-headers", "trickling-headers", "trickling-body"])
def test_a_stalled_or_trickling_request_is_answered_408_and_closed(sent, answer, model):
    with guarded(model, SHORT) as (host, port, client):
        with socket.create_connection((host, port), timeout=30) as sock:
            sender = threading.Thread(target=trickle, args=(sock, sent), daemon=True)
            sender.start()
            got, took = answer_of(sock)
        assert answer in got and took < 20, (got, took)
        if answer:
            assert b'"error"' in got and b"did not arrive within 0.5 s" in got
        assert client.call("GET", "/health")[0] == 200                  # and the server serves on
        assert client.translate("d", SENTENCES[:1])["translations"]


def test_an_idle_kept_alive_connection_is_closed_and_a_prompt_one_is_served(model):
    with guarded(model, SHORT) as (host, port, _):
        with socket.create_connection((host, port), timeout=30) as sock:
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            got, took = answer_of(sock)
    assert got.startswith(b"HTTP/1.1 200") and b"408" not in got and took < 20, got


def test_connections_past_the_cap_get_503_and_the_server_serves_on(model):
    limits = ConnectionLimits(header_timeout=60, body_timeout=60, max_connections=4)
    with guarded(model, limits) as (host, port, client):
        held = [socket.create_connection((host, port), timeout=30) for _ in range(4)]
        try:
            wait_for(lambda: _refused(host, port))
            with socket.create_connection((host, port), timeout=30) as extra:
                got, took = answer_of(extra)
            assert got.startswith(b"HTTP/1.1 503") and b"4 connections" in got and took < 20, got
        finally:
            for sock in held:
                sock.close()
        wait_for(lambda: not _refused(host, port))
        assert client.translate("d", SENTENCES[:1])["translations"]


def _refused(host: str, port: int) -> bool:
    with socket.create_connection((host, port), timeout=30) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        return answer_of(sock)[0].startswith(b"HTTP/1.1 503")


NOT_JSON = [None, "text/plain", "text/plain; charset=utf-8", "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x", "application/json; charset=latin-1", "application/jsonx", ""]


def test_a_post_that_is_not_json_gets_415_whatever_its_route(model):
    good = json.dumps({"doc_id": "d", "sentences": SENTENCES[:1]}).encode()
    with guarded(model, SHORT) as (_, _, client):
        for kind in NOT_JSON:
            for path in ("/translate", "/documents", "/nowhere"):
                headers = {} if kind is None else {"Content-Type": kind}
                status, answer = _post(client.url + path, good, headers)
                assert status == 415 and "application/json" in answer["error"], (kind, path, answer)
        for kind in ("application/json", "Application/JSON; charset=\"UTF-8\"", "application/json;charset=utf8"):
            assert _post(client.url + "/translate", good, {"Content-Type": kind})[0] == 200, kind
        assert client.call("GET", "/documents")[1]["documents"] == ["d"]      # only the JSON ones were read


def _post(url: str, data: bytes, headers: dict) -> tuple[int, dict]:
    import urllib.error
    import urllib.request

    request = urllib.request.Request(url, data=data, method="POST", headers=headers)
    if "Content-Type" not in headers:
        request.remove_header("Content-type")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_the_sentence_limits_count_characters_of_the_decoded_text(model):
    """64 sentences of 2,000 emoji (JSON-escaped as surrogate pairs, 12 bytes each: 1.5 MB) are within the
    documented limits; one more character is a 413 naming the characters."""
    translate = model.translate
    short = lambda docs, **options: translate([api.Document(src=[s[:2] for s in d.src], doc_id=d.doc_id)  # noqa
                                               for d in docs], **options)
    limits = Limits()
    emoji = "\U0001F600" * limits.max_sentence_chars
    with guarded(model, SHORT, limits) as (_, _, client):
        model.translate = short                                     # translated cut short: the limits are the test
        try:
            body_ = json.dumps({"doc_id": "e", "sentences": [emoji] * limits.max_sentences}).encode()
            assert len(body_) > 12 * limits.max_sentences * limits.max_sentence_chars
            status, answer = client.call("POST", "/translate", body_)
            assert status == 200 and len(answer["translations"]) == limits.max_sentences, answer
            status, answer = client.call("POST", "/translate", {"doc_id": "f", "sentences": [emoji + "a"]})
        finally:
            model.translate = translate
    assert status == 413 and f"has {limits.max_sentence_chars + 1} characters" in answer["error"], answer


class Fatal(BaseException):
    """An error the worker's per-batch handling does not catch (as a bug in the worker itself would be)."""


def test_a_failed_worker_answers_503_and_the_server_still_stops(model):
    translate = model.translate

    def broken(docs, **options):
        raise Fatal("the worker broke")

    model.translate = broken
    try:
        with guarded(model, SHORT) as (_, _, client):
            first = client.call("POST", "/translate", {"doc_id": "d", "sentences": SENTENCES[:1]})
            later = client.call("POST", "/translate", {"doc_id": "e", "sentences": SENTENCES[:1]})
            health = client.call("GET", "/health")
            start = time.monotonic()
        stopped = time.monotonic() - start
    finally:
        model.translate = translate
    for status, answer in (first, later, health):
        assert status == 503 and "the translation worker stopped on an error (Fatal: the worker broke)" in \
            answer["error"], answer
    assert stopped < 20


@pytest.mark.parametrize("value", ["1e308", "inf", "nan", "60001", "-1"])
def test_serve_refuses_a_batch_wait_beyond_its_bound(value, checkpoint):
    assert_user_error(run_cli("serve", "-c", checkpoint, "--port", 0, "--batch-wait-ms", value), "--batch-wait-ms")


@pytest.mark.parametrize("option,value", [("--header-timeout", "0"), ("--body-timeout", "inf"),
                                          ("--header-timeout", "nan"), ("--max-connections", "0")])
def test_serve_refuses_timeouts_and_caps_beyond_their_bounds(option, value, checkpoint):
    assert_user_error(run_cli("serve", "-c", checkpoint, "--port", 0, option, value), option)
