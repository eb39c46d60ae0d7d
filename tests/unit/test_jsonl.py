"""JSONL documents of ``ctxmt translate --input-format jsonl``: parsing, one-line errors, output lines."""

import json

import pytest
from hypothesis import given

from ctxmt_cli.decode.jsonl import format_translation, parse_document, parse_documents
from ctxmt_cli.decode.records import Candidate, Document, DocumentTranslation, SentenceTranslation
from ctxmt_cli.errors import CtxmtError
from tests.hostile_inputs import jsonl_files


def test_documents_with_and_without_their_optional_fields():
    lines = ['{"doc_id": "talk-1", "src": ["a .", "b ."], "tgt_context": ["A ."]}', "", "  ",
             '{"src": []}', '{"doc_id": 12.5, "src": ["ü ."]}']
    assert list(parse_documents(lines, "in.jsonl")) == [
        Document(["a .", "b ."], ["A ."], "talk-1"), Document([], [], 4), Document(["ü ."], [], 12.5)]


@pytest.mark.parametrize("line, message", [
    ('{"src": ["a"]', "in.jsonl:3: not valid JSON"),
    ("42", "in.jsonl:3: a document is a JSON object, not a JSON number"),
    ('{"src": ["a"], "first_pass": ["b"]}', "in.jsonl:3: unknown field 'first_pass'"),
    ('{"doc_id": "x", "tgt_context": []}', 'in.jsonl:3: no "src"'),
    ('{"src": ["a", 1]}', "in.jsonl:3: src[1] is a JSON number; every sentence must be a string"),
    ('{"src": "a b"}', "in.jsonl:3: 'src' must be a list of strings (one per sentence), not a JSON string"),
    ('{"src": ["a"], "tgt_context": "b"}',
     "in.jsonl:3: 'tgt_context' must be a list of strings (one per sentence), not a JSON string"),
    ('{"src": ["a"], "tgt_context": ["b", "c"]}', "in.jsonl:3: 2 tgt_context sentences for 1 src sentences"),
    ('{"src": ["a"], "doc_id": [1]}', "in.jsonl:3: doc_id must be a non-empty string or a number"),
    ('{"src": ["a"], "doc_id": ""}', "in.jsonl:3: doc_id must be a non-empty string or a number"),
    ('{"src": ["a"], "doc_id": NaN}', "in.jsonl:3: NaN is not valid JSON"),
    ('{"src": ["a"], "doc_id": 1e999}', "in.jsonl:3: the number 1e999 is too large"),
    ('{"src": ["a", "\\ud800"]}', "in.jsonl:3: src[1] holds a lone surrogate \\ud800"),
    ('{"src": ["a\\u0000"]}', "in.jsonl:3: src[0] holds a NUL character"),
    ("[" * 200_000, "in.jsonl:3: arrays or objects nested deeper than 32 levels"),
])
def test_bad_lines_name_the_file_and_line(line, message):
    with pytest.raises(CtxmtError) as err:
        list(parse_documents(['{"src": ["ok"]}', "", line], "in.jsonl"))
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_output_lines_carry_what_was_asked_for():
    best, second = Candidate("Hallo ü .", -1.5, -0.9, (5, 6)), Candidate("Hallo .", -2.0, -1.2, (5,))
    result = DocumentTranslation("d", [SentenceTranslation("Hallo ü .", -1.5, [best, second]),
                                       SentenceTranslation("", None, [])])         # an empty source line
    line = format_translation(result)
    assert line.endswith("\n") and "ü" in line
    assert json.loads(line) == {"doc_id": "d", "translations": ["Hallo ü .", ""]}
    full = json.loads(format_translation(result, scores=True, nbest=True))
    assert full["scores"] == [-1.5, None]
    assert full["nbest"] == [[{"translation": "Hallo ü .", "logprob": -1.5, "score": -0.9},
                              {"translation": "Hallo .", "logprob": -2.0, "score": -1.2}], []]
    assert parse_document('{"src": ["x"]}', "f:1", 1) == Document(["x"], [], 1)


# ---- property: a hostile JSONL line is a document or a one-line refusal ------------------------------------------
@given(jsonl_files(["doc_id", "src", "tgt_context"], '{"doc_id": "d", "src": ["a ."], "tgt_context": []}'))
def test_any_jsonl_input_is_documents_or_one_line(data):
    lines = data.decode("utf-8", "replace").split("\n")
    try:
        docs = list(parse_documents(lines, "in.jsonl"))
    except CtxmtError as err:
        assert "\n" not in str(err) and str(err).startswith("in.jsonl:")
    else:
        assert all(isinstance(s, str) for doc in docs for s in doc.src)
