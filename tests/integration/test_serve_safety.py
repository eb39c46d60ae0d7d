"""``ctxmt serve`` under hostile requests and at its edges, over real HTTP on the loopback interface: every route
answers hostile input with a 4xx and a one-line JSON error and then serves correctly; a request whose client
disconnected before its turn is never translated; a real server process stopped by SIGTERM answers the request
in flight and exits 0; a CTranslate2 folder is refused with what works."""

from __future__ import annotations

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
from ctxmt_cli.serve.app import MAX_DOC_ID
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


def test_sigterm_answers_the_request_in_flight_and_exits_0(checkpoint):
    # --batch-wait-ms 3000: the request waits in the batcher, in flight, when SIGTERM arrives
    process = subprocess.Popen([sys.executable, "-m", "ctxmt_cli", "serve", "-c", str(checkpoint), "--port", "0",
                                "--device", "cpu", "--batch-wait-ms", "3000"], stderr=subprocess.PIPE, text=True)
    answer = {}
    try:
        line = process.stderr.readline()
        found = re.search(r"listening on (http://127\.0\.0\.1:\d+) ", line)
        assert found and "SIGTERM" in line, line
        url = found.group(1)
        sender = threading.Thread(target=lambda: answer.update(
            zip(("status", "body"), Client(url).call("POST", "/translate", body(doc_id="d", sentences=SENTENCES)))))
        sender.start()
        wait_for(lambda: Client(url).call("GET", "/health", None)[1]["queued"] == 1)
        process.send_signal(signal.SIGTERM)
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
