"""``ctxmt serve``'s application over real HTTP on the loopback interface (uvicorn in a background thread, the
standard library's client), on tiny random checkpoints: documents sent interleaved, in pieces or by concurrent
clients translate as each document alone (the API, and `ctxmt translate`), requests are really batched, DELETE
and LRU eviction start documents anew, bad requests get one-line 4xx errors and a failing translation a 500, and
the server answers afterwards."""

from __future__ import annotations

import contextlib
import json
import threading
import urllib.error
import urllib.request

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from ctxmt_cli import api
from ctxmt_cli.cli import app as cli_app
from ctxmt_cli.serve.app import Limits, build_app, json_content_type
from ctxmt_cli.serve.documents import DocumentStore
from ctxmt_cli.serve.engine import Engine, keep_rule
from ctxmt_cli.serve.server import ServerThread
from tests.unit.test_api import write_checkpoint

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/unit/conftest.py

SPECS = {
    "sentence": {"family": "sentence"},
    "concat": {"family": "concat", "src_context_sentences": 2, "tgt_context_sentences": 2},   # s3to3: 2 kept
    "caching": {"family": "caching", "src_context_sentences": 2},
    "mbe": {"family": "mbe"},
    "hanoit": {"family": "hanoit", "encoder_layers": 2, "src_next_sentences": 1},             # offline: 1 + 1
    "bilingual": {"family": "hanoit", "bilingual": True, "encoder_layers": 2, "src_next_sentences": 1},
}


@pytest.fixture(scope="module")
def checkpoints(prepared, tmp_path_factory):
    root = tmp_path_factory.mktemp("serve")
    return {name: write_checkpoint(prepared, name, root / f"{name}.pt", spec) for name, spec in SPECS.items()}


@pytest.fixture(scope="module")
def documents(prepared) -> list[list[str]]:
    """Four documents of 5 sentences from the synthetic test split; the second holds an empty sentence."""
    docs = (prepared.parent / "raw" / "test.src").read_text(encoding="utf-8").strip().split("\n\n")
    out = [doc.splitlines()[:5] for doc in docs[:4]]
    out[1][2] = ""
    return out


class Client:
    """JSON over HTTP with urllib: every call returns (status, decoded body)."""

    def __init__(self, url: str):
        self.url = url

    def call(self, method: str, path: str, body=None) -> tuple[int, dict]:
        data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read())

    def translate(self, doc_id: str, sentences: list[str], **extra) -> dict:
        status, body = self.call("POST", "/translate", {"doc_id": doc_id, "sentences": sentences, **extra})
        assert status == 200, body
        return body


@contextlib.contextmanager
def serving(checkpoint, *, first_pass=None, group_sentences=None, max_documents=100, batch_wait_ms=5.0,
            limits=Limits(), model=None):
    """A server on a free loopback port; yields its client and its model."""
    model = model or api.load(checkpoint, device="cpu", first_pass=first_pass)
    store = DocumentStore(max_documents, keep_rule(model, group_sentences, None))
    engine = Engine(model, store, group_sentences=group_sentences)
    app = build_app(engine, limits=limits, max_batch_docs=8, batch_wait_ms=batch_wait_ms)
    with ServerThread(app) as server:
        yield Client(server.url), model


@pytest.mark.parametrize("family", ["sentence", "concat", "caching"])
def test_interleaved_documents_translate_as_each_document_alone(family, checkpoints, documents):
    one, two = documents[:2]
    with serving(checkpoints[family]) as (client, _):
        got = {"one": [], "two": []}
        contexts = []
        for j in range(len(one)):                                           # sentence by sentence, alternating
            for name, doc in (("one", one), ("two", two)):
                if j == 3 and name == "two":                                # and two sentences at once
                    continue
                sentences = doc[3:5] if j == 4 and name == "two" else [doc[j]]
                out = client.translate(name, sentences)
                got[name] += out["translations"]
                contexts.append((name, out["context"], out["context_sentences"]))
    reference = api.load(checkpoints[family], device="cpu")
    assert got["one"] == reference.translate([one])[0].translations
    assert got["two"] == reference.translate([two])[0].translations
    assert got["two"][2] == ""                                              # the empty sentence: no output
    kept = 2 if family != "sentence" else 0                                 # what the model reads is kept
    assert [c for n, *c in contexts if n == "one"] == [["new", 0]] + [["continued", min(j, kept)] for j in (1, 2, 3, 4)]
    # document two's empty sentence enters no window, so it is not kept either
    assert [c for n, *c in contexts if n == "two"] == [["new", 0], ["continued", min(1, kept)],
                                                       ["continued", min(2, kept)], ["continued", min(2, kept)]]


def test_the_concat_server_equals_ctxmt_translate(checkpoints, documents, tmp_path):
    with serving(checkpoints["concat"]) as (client, _):
        served = [[t for s in doc for t in client.translate(f"d{d}", [s])["translations"]]
                  for d, doc in enumerate(documents[2:])]
    src = tmp_path / "docs.txt"
    src.write_text("\n\n".join("\n".join(doc) for doc in documents[2:]) + "\n", encoding="utf-8")
    result = CliRunner().invoke(cli_app, ["translate", str(src), "-c", str(checkpoints["concat"]), "-o",
                                          str(tmp_path / "out.txt"), "--device", "cpu"])
    assert result.exit_code == 0, result.output
    written = (tmp_path / "out.txt").read_text(encoding="utf-8").rstrip("\n").split("\n\n")
    assert served == [doc.split("\n") for doc in written]


@pytest.mark.parametrize("family, group", [("mbe", None), ("mbe", 2), ("hanoit", None), ("bilingual", None)])
def test_each_response_is_the_tail_of_the_document_received_so_far(family, group, checkpoints, documents):
    """A model that reads its whole group or next sentences: each response is what translating the document
    received so far at once gives its last sentences (the next sentences of a request are those it holds)."""
    first_pass = checkpoints["sentence"] if family == "bilingual" else None
    doc, pieces = documents[0], [1, 2, 1, 1]
    got, sent = [], 0
    with serving(checkpoints[family], first_pass=first_pass, group_sentences=group) as (client, _):
        for size in pieces:
            out = client.translate("doc", doc[sent:sent + size], scores=True)
            got.append((out["translations"], out["scores"], out["context_sentences"]))
            sent += size
    reference = api.load(checkpoints[family], device="cpu", first_pass=first_pass)
    end = 0
    for size, (translations, scores, context) in zip(pieces, got, strict=True):
        end += size
        whole = reference.translate([doc[:end]], scores=True, group_sentences=group)[0]
        assert translations == whole.translations[-size:]
        assert scores == pytest.approx(whole.logprobs[-size:], abs=1e-4)
        kept = {"mbe": end - size if group is None else (end - size) % 2, "hanoit": min(end - size, 1)}
        assert context == kept.get(family, kept["hanoit"])


def test_concurrent_clients_equal_sequential_requests_and_are_batched(checkpoints, documents):
    barrier = threading.Barrier(len(documents))
    results, errors = {}, []

    def client_of(d: int, client: Client) -> None:
        try:
            results[d] = []
            for sentence in documents[d]:
                barrier.wait(30)                                            # every client sends at once
                results[d] += client.translate(f"doc-{d}", [sentence])["translations"]
        except Exception as err:  # noqa: BLE001 - reported below
            errors.append(err)

    with serving(checkpoints["concat"], batch_wait_ms=300) as (client, _):
        threads = [threading.Thread(target=client_of, args=(d, Client(client.url))) for d in range(len(documents))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        status, health = client.call("GET", "/health")
    assert not errors, errors
    reference = api.load(checkpoints["concat"], device="cpu")
    assert [results[d] for d in range(len(documents))] == [reference.translate([doc])[0].translations
                                                           for doc in documents]
    requests = sum(len(doc) for doc in documents)
    assert status == 200 and health["requests"] == requests and health["documents"] == len(documents)
    assert health["largest_batch"] >= 2 and health["batches"] < requests   # several documents per model call


def test_delete_and_eviction_start_a_document_anew(checkpoints, documents):
    doc = documents[0]
    reference = api.load(checkpoints["concat"], device="cpu")
    alone = reference.translate([[doc[2]]])[0].translations
    with serving(checkpoints["concat"], max_documents=1) as (client, _):
        client.translate("a", doc[:2])
        assert client.call("GET", "/documents")[1]["documents"] == ["a"]
        assert client.call("DELETE", "/documents/a") == (200, {"deleted": "a", "documents": 0})
        status, body = client.call("DELETE", "/documents/a")
        assert status == 404 and "no document 'a'" in body["error"]
        out = client.translate("a", [doc[2]])
        assert (out["context"], out["context_sentences"], out["translations"]) == ("new", 0, alone)
        client.translate("b", [doc[0]])                                     # evicts a (one document kept)
        assert client.call("GET", "/documents")[1]["documents"] == ["b"]
        out = client.translate("a", [doc[2]])
        assert (out["context"], out["context_sentences"], out["translations"]) == ("evicted", 0, alone)
        health = client.call("GET", "/health")[1]
    assert (health["documents"], health["max_documents"], health["evictions"]) == (1, 1, 2)


BAD = [  # (method, path, body, status, words of the message)
    ("POST", "/translate", b'{"doc_id": "a", ', 400, "malformed JSON"),
    ("POST", "/translate", b"\xff\xfe", 400, "not UTF-8"),
    ("POST", "/translate", b"[1, 2]", 422, "JSON array"),
    ("POST", "/translate", {"doc_id": "a", "sentences": ["x"], "beam": 4}, 422, "unknown field 'beam'"),
    ("POST", "/translate", {"doc_id": "a"}, 422, "missing field 'sentences'"),
    ("POST", "/translate", {"sentences": ["x"]}, 422, "missing field 'doc_id'"),
    ("POST", "/translate", {"doc_id": 7, "sentences": ["x"]}, 422, "doc_id must be a non-empty string"),
    ("POST", "/translate", {"doc_id": "", "sentences": ["x"]}, 422, "doc_id must be a non-empty string"),
    ("POST", "/translate", {"doc_id": "a", "sentences": "x"}, 422, "list of strings"),
    ("POST", "/translate", {"doc_id": "a", "sentences": []}, 422, "sentences is empty"),
    ("POST", "/translate", {"doc_id": "a", "sentences": ["x", 3]}, 422, "sentences[1] is a JSON number"),
    ("POST", "/translate", {"doc_id": "a", "sentences": ["x"], "scores": "yes"}, 422, "scores must be true or false"),
    ("POST", "/translate", {"doc_id": "a", "sentences": ["x"] * 5}, 413, "--max-sentences 4"),
    ("POST", "/translate", {"doc_id": "a", "sentences": ["x" * 51]}, 413, "--max-sentence-chars 50"),
    ("POST", "/translate", b"[" + b" " * 20000 + b"]", 413, "the body is larger than"),
    ("GET", "/nowhere", None, 404, "no route GET /nowhere"),
    ("GET", "/translate", None, 405, "GET is not allowed on /translate"),
    ("DELETE", "/documents/never", None, 404, "no document 'never'"),
]


def test_bad_requests_get_one_line_errors_and_the_server_goes_on(checkpoints):
    with serving(checkpoints["sentence"], limits=Limits(max_sentences=4, max_sentence_chars=50)) as (client, _):
        for method, path, body, status, words in BAD:
            got, answer = client.call(method, path, body)
            assert got == status and list(answer) == ["error"], (method, path, body, answer)
            assert words in answer["error"] and "\n" not in answer["error"] and "Traceback" not in answer["error"]
        assert client.call("GET", "/health")[0] == 200
        assert len(client.translate("a", ["x" * 50, "y"])["translations"]) == 2   # at the limits: fine
        assert client.call("GET", "/documents")[1]["documents"] == ["a"]         # the refused ones kept nothing


def test_a_failing_translation_is_a_500_and_other_requests_still_translate(checkpoints, documents):
    model = api.load(checkpoints["concat"], device="cpu")
    translate = model.translate

    def failing(docs, **options):                                           # a model error on one marked sentence
        if any("BOOM" in s for d in docs for s in d.src):
            raise RuntimeError("the model failed\non two lines")
        return translate(docs, **options)

    model.translate = failing
    answers = {}
    with serving(None, model=model, batch_wait_ms=300) as (client, _):
        threads = [threading.Thread(target=lambda n=n, s=s: answers.update({n: client.call("POST", "/translate", {
            "doc_id": n, "sentences": [s]})})) for n, s in (("bad", "BOOM"), ("good", documents[0][0]))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        after = client.translate("good", [documents[0][1]])
        ids = client.call("GET", "/documents")[1]["documents"]
    status, body = answers["bad"]
    assert status == 500 and body == {"error": "translation failed: RuntimeError: the model failed on two lines"}
    assert answers["good"][0] == 200 and after["context"] == "continued"       # tried alone, kept
    assert ids == ["good"]                                                   # the failed new document is not kept
    assert answers["good"][1]["translations"] + after["translations"] == translate([documents[0][:2]])[0].translations


# ---- only JSON is read: a property over generated Content-Type headers ------------------------------------------
MEDIA = st.sampled_from(["application/json", "APPLICATION/Json", "text/plain", "application/x-www-form-urlencoded",
                         "multipart/form-data", "application/jsonp", "application/json+x", "", "json"])
CHARSET = st.sampled_from([None, "utf-8", "UTF8", '"utf-8"', "latin-1", "utf-16", ""])


@given(media=MEDIA, charset=CHARSET, spaces=st.sampled_from(["", " ", "  "]), extra=st.booleans())
def test_only_a_json_content_type_in_utf_8_is_read(media, charset, spaces, extra):
    value = media + ("" if charset is None else f";{spaces}charset={charset}") + ("; boundary=x" if extra else "")
    json_kind = media.lower() == "application/json"
    utf8 = charset is None or charset.strip('"').lower() in ("utf-8", "utf8")
    assert json_content_type(value) == (json_kind and utf8), value
