"""Document-aware input and output through the CLI: ``translate --input-format jsonl`` with ``--scores`` and
``--nbest``, its one-line refusals, streaming from stdin (a real process fed one document at a time) and
``ctxmt translate | ctxmt evaluate --hyp -`` as a real pipe."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading

import pytest

from tests.integration.conftest import assert_user_error, run_cli

CTXMT = [sys.executable, "-m", "ctxmt_cli"]
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}
WAIT = 240                                                     # seconds; the machine may be busy


@pytest.fixture
def docs(synthetic_dir) -> tuple[list[list[str]], list[list[str]]]:
    """Three short source documents of the test split and their references."""
    def read(side):
        text = (synthetic_dir / "raw" / f"test.{side}").read_text(encoding="utf-8").strip().split("\n\n")
        return [doc.splitlines()[:n] for doc, n in zip(text, (3, 2, 4), strict=False)]
    return read("src"), read("tgt")


def write_jsonl(path, rows):
    path.write_text("".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows),
                    encoding="utf-8")
    return path


def write_text(path, documents):
    path.write_text("\n\n".join("\n".join(doc) for doc in documents) + "\n", encoding="utf-8")
    return path


def test_jsonl_documents_in_and_out(concat_checkpoint, docs, tmp_path):
    src, ref = docs
    path = write_jsonl(tmp_path / "docs.jsonl", [{"doc_id": "a", "src": src[0]}, "",
                                                  {"src": src[2], "tgt_context": ref[2][:1]}, {"doc_id": 7, "src": []}])
    out = tmp_path / "out.jsonl"
    result = run_cli("translate", path, "-c", concat_checkpoint, "--input-format", "jsonl", "-o", out, "--scores",
                     "--nbest", 2, "--beam", 2, "--device", "cpu")
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["doc_id"] for r in rows] == ["a", 3, 7]                     # no doc_id: its line number
    assert [len(r["translations"]) for r in rows] == [3, 3, 0]            # the given sentence is not translated
    for row in rows:
        assert set(row) == {"doc_id", "translations", "scores", "nbest"}
        for text, score, nbest in zip(row["translations"], row["scores"], row["nbest"], strict=True):
            assert score < 0 and len(nbest) == 2 and nbest[0]["translation"] == text
            assert nbest[0]["logprob"] == score and nbest[0]["score"] >= nbest[1]["score"]
    plain = tmp_path / "plain.txt"
    result = run_cli("translate", write_text(tmp_path / "a.txt", [src[0]]), "-c", concat_checkpoint, "-o", plain,
                     "--beam", 2, "--device", "cpu")
    assert result.exit_code == 0, result.output
    assert plain.read_text(encoding="utf-8").splitlines() == rows[0]["translations"]   # text and JSONL agree
    bare = run_cli("translate", path, "-c", concat_checkpoint, "--input-format", "jsonl", "--beam", 2,
                   "--device", "cpu")
    assert bare.exit_code == 0, bare.output
    assert [json.loads(line) for line in bare.stdout.splitlines()] == \
        [{"doc_id": r["doc_id"], "translations": r["translations"]} for r in rows]      # no fields unasked


@pytest.mark.parametrize("line, needles", [
    ('{"src": ["a b ."], }', ["docs.jsonl:2", "not valid JSON"]),
    ('{"doc_id": "x", "src": ["a ."], "tgt": ["b ."]}', ["docs.jsonl:2", "unknown field 'tgt'"]),
    ('{"doc_id": "x"}', ["docs.jsonl:2", 'no "src"']),
    ('{"src": "a b ."}', ["docs.jsonl:2", "'src' must be a list of strings"]),
    ('{"src": ["a ."], "tgt_context": ["b .", "c ."]}', ["docs.jsonl:2", "2 tgt_context sentences for 1 src"]),
    ('["a ."]', ["docs.jsonl:2", "JSON object"]),
])
def test_bad_jsonl_lines_are_one_line_errors(line, needles, concat_checkpoint, tmp_path):
    path = write_jsonl(tmp_path / "docs.jsonl", [{"src": ["a b ."]}, line])
    out = tmp_path / "out.jsonl"
    result = run_cli("translate", path, "-c", concat_checkpoint, "--input-format", "jsonl", "-o", out)
    assert_user_error(result, *needles)
    assert not out.exists() and not list(tmp_path.glob(".out.jsonl.tmp*"))


def test_nbest_and_scores_refusals(concat_checkpoint, docs, tmp_path):
    path = write_jsonl(tmp_path / "docs.jsonl", [{"src": docs[0][0]}])
    result = run_cli("translate", path, "-c", concat_checkpoint, "--input-format", "jsonl", "--nbest", 3,
                     "--beam", 2, "--device", "cpu")
    assert_user_error(result, "--nbest 3", "beam of 3")
    text = write_text(tmp_path / "docs.txt", docs[0][:1])
    assert_user_error(run_cli("translate", text, "-c", concat_checkpoint, "--scores"), "--input-format jsonl")
    assert_user_error(run_cli("translate", text, "-c", concat_checkpoint, "--nbest", 2), "--input-format jsonl")


class Lines:
    """The output lines of a process, read by a thread so a test can wait for one with a timeout."""

    def __init__(self, stream):
        self.box: queue.Queue = queue.Queue()
        threading.Thread(target=lambda: [self.box.put(line) for line in stream], daemon=True).start()

    def next(self) -> str:
        try:
            return self.box.get(timeout=WAIT)
        except queue.Empty:
            raise AssertionError(f"no output line within {WAIT} s") from None


def translate_process(checkpoint, *options):
    return subprocess.Popen([*CTXMT, "translate", "-", "-c", str(checkpoint), "--device", "cpu", *options],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)


def test_documents_from_stdin_are_translated_as_they_arrive(concat_checkpoint, docs, tmp_path):
    src = docs[0]
    proc = translate_process(concat_checkpoint, "--input-format", "jsonl")
    try:
        out = Lines(proc.stdout)
        got = []
        for i, doc in enumerate(src):
            proc.stdin.write(json.dumps({"doc_id": f"d{i}", "src": doc}) + "\n")
            proc.stdin.flush()                               # stdin stays open: the answer must come before the next
            got.append(json.loads(out.next()))
            assert got[-1]["doc_id"] == f"d{i}"
        proc.stdin.close()
        assert proc.wait(timeout=WAIT) == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
    whole = run_cli("translate", write_jsonl(tmp_path / "all.jsonl", [{"doc_id": f"d{i}", "src": d}
                                                                       for i, d in enumerate(src)]),
                    "-c", concat_checkpoint, "--input-format", "jsonl", "--device", "cpu")
    assert whole.exit_code == 0, whole.output
    assert got == [json.loads(line) for line in whole.stdout.splitlines()]    # streaming changes nothing


def test_text_documents_from_stdin_are_translated_at_each_blank_line(concat_checkpoint, docs):
    src = docs[0]
    proc = translate_process(concat_checkpoint)
    try:
        out = Lines(proc.stdout)
        proc.stdin.write("\n".join(src[0]) + "\n\n")         # a blank line ends the first document
        proc.stdin.flush()
        first = [out.next() for _ in src[0]]
        proc.stdin.write("\n".join(src[1]) + "\n")
        proc.stdin.close()
        rest = [out.next() for _ in range(len(src[1]) + 1)]
        assert proc.wait(timeout=WAIT) == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert all(line.strip() for line in first) and rest[0] == "\n" and all(line.strip() for line in rest[1:])


def test_translate_pipes_into_evaluate(concat_checkpoint, docs, tmp_path):
    src, ref = write_text(tmp_path / "src.txt", docs[0]), write_text(tmp_path / "ref.txt", docs[1])
    translate = subprocess.Popen([*CTXMT, "translate", str(src), "-c", str(concat_checkpoint), "--device", "cpu"],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=ENV)
    evaluate = subprocess.Popen([*CTXMT, "evaluate", "--hyp", "-", "--ref", str(ref)], stdin=translate.stdout,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    translate.stdout.close()                                 # evaluate alone reads the pipe
    piped, err = evaluate.communicate(timeout=2 * WAIT)
    assert translate.wait(timeout=WAIT) == 0 and evaluate.returncode == 0, err
    hyp = tmp_path / "hyp.txt"
    assert run_cli("translate", src, "-c", concat_checkpoint, "-o", hyp, "--device", "cpu").exit_code == 0
    from_file = run_cli("evaluate", "--hyp", hyp, "--ref", ref)
    assert from_file.exit_code == 0, from_file.output
    assert piped.strip() == from_file.stdout.strip() and piped.startswith("BLEU = ")


def test_evaluate_reads_one_file_from_stdin(docs, tmp_path):
    ref = write_text(tmp_path / "ref.txt", docs[1])
    result = run_cli("evaluate", "--hyp", "-", "--ref", ref, input=ref.read_text(encoding="utf-8"))
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("BLEU = 100.00")
    assert_user_error(run_cli("evaluate", "--hyp", "-", "--ref", "-", input=""), "--hyp and --ref", "stdin")
