"""The one strict JSON reader and text check every reader and the server share: bounded nesting, standard
JSON only, strings that are text, errors that name the field."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxmt_cli.data.text_input import MAX_DEPTH, JsonInputError, json_kind, load_json, text_problem
from tests.hostile_inputs import jsonl_files


def test_standard_json_within_the_depth_reads_as_json_loads_does():
    text = json.dumps({"doc_id": "d", "src": ["ü 😀 .", "[{not nested}]"], "n": [1, 2.5, -3e10],
                       "deep": [[[[[]]]]], "none": None, "yes": True})
    assert load_json(text) == json.loads(text)
    nested = "[" * MAX_DEPTH + "]" * MAX_DEPTH                       # exactly the limit
    assert load_json(nested) == json.loads(nested)
    assert load_json('"' + "[" * 1000 + '"') == "[" * 1000           # brackets inside a string are text
    assert load_json('{"a": {"a": 1}, "b": [{"a": 2}, {"a": 3}]}')["b"][1] == {"a": 3}   # equal keys, other objects


@pytest.mark.parametrize("text, words, field", [
    ("[" * 200_000, f"nested deeper than {MAX_DEPTH} levels (at column {MAX_DEPTH + 1})", None),
    ('{"a": ' * (MAX_DEPTH + 1) + "1" + "}" * (MAX_DEPTH + 1), "nested deeper", None),
    ("[NaN]", "NaN is not valid JSON", None),
    ('{"x": Infinity}', "Infinity is not valid JSON", None),
    ("-Infinity", "-Infinity is not valid JSON", None),
    ("[1e400]", "1e400 is too large for a 64-bit float", None),
    ("1" * 5000, "thousands of digits", None),
    ('{"src": ["a", "b\\ud800"]}', "src[1] holds a lone surrogate \\ud800 at column 2", "src[1]"),
    ('{"doc_id": "\\udfff"}', "doc_id holds a lone surrogate \\udfff", "doc_id"),
    ('{"tags": {"x": "a\\u0000"}}', "tags.x holds a NUL character at column 2", "tags.x"),
    ('{"\\ud800": 1}', "a key holds a lone surrogate", "a key"),
    ('{"a\\nb": ["\\u0000"]}', '"a\\nb"[0] holds a NUL character', '"a\\nb"[0]'),
    ('"\\ud800"', "the value holds a lone surrogate", None),
    ('{"src": ["a"], "src": ["b"]}', 'the key "src" appears twice in one object (at column 16)', None),
    ('{"tags": {"x": 1, "y": 2, "x": 3}}', 'the key "x" appears twice in one object (at column 27)', None),
    ('[{"a": 1},\n {"b": {"a": 1}, "\\u0062": 2}]', 'the key "b" appears twice in one object (at line 2, column 18)',
     None),
])
def test_what_is_not_standard_json_text_is_one_line_naming_the_field(text, words, field):
    with pytest.raises(JsonInputError) as err:
        load_json(text)
    assert words in str(err.value) and "\n" not in str(err.value)
    assert err.value.field == field


def test_malformed_json_is_left_to_each_reader_to_word():
    with pytest.raises(json.JSONDecodeError):
        load_json('{"src": [')


def test_text_problem_names_the_character_and_its_column():
    assert text_problem("plain text, ü, 😀") is None
    assert text_problem("ab\x00") == "a NUL character at column 3"
    assert text_problem("\ud83d") == "a lone surrogate \\ud83d at column 1, which is not a character"


def test_json_kind_uses_json_words():
    assert [json_kind(v) for v in ({}, [], "", 1, 1.5, True, None)] == [
        "object", "array", "string", "number", "number", "boolean", "null"]


# ---- property: any line either reads as json.loads reads it, or is refused in one line -------------------------
@given(jsonl_files(["doc_id", "src", "tgt", "tags"], '{"doc_id": "d", "src": "a", "tgt": "b"}'))
def test_any_line_reads_as_json_or_is_refused_in_one_line(data):
    for line in data.decode("utf-8", "replace").split("\n"):
        try:
            value = load_json(line)
        except JsonInputError as err:
            assert "\n" not in str(err)
            continue
        except json.JSONDecodeError:
            continue                                    # each reader words malformed JSON its own way
        assert value == json.loads(line)                # what is accepted means what Python's json means


@given(st.lists(st.sampled_from(["a", "b", "src"]), min_size=2, max_size=5))
def test_a_repeated_key_is_always_refused(keys):
    text = "{" + ", ".join(f'"{k}": {i}' for i, k in enumerate(keys)) + "}"
    if len(set(keys)) == len(keys):
        assert load_json(text) == {k: i for i, k in enumerate(keys)}
    else:
        with pytest.raises(JsonInputError, match="appears twice in one object"):
            load_json(text)
