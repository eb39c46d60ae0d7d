"""Hostile text and JSON through every reader of user files: one line naming the file, line and field, exit 2,
no traceback, every input byte-identical and no output left (:func:`check_bad_input`).

Each row is (the hostile line or bytes, fragments the error line must hold). The hostile line is the second line
of the file (after a good one, so a reader that streams has begun), except where a row gives the whole file.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from hypothesis import given, settings

from tests.hostile_inputs import jsonl_files, text_files, xml_files
from tests.integration import test_bad_inputs
from tests.integration.conftest import QUICKSTART, TINY_SETS, run_cli
from tests.integration.test_bad_inputs import check_bad_input, placeholders, snapshot

ws = test_bad_inputs.ws          # the fixture: a scratch working directory with files of every wrong kind

DEEP = "[" * 200_000                                         # RecursionError in json.loads, unbounded
UTF16 = "Hello.".encode("utf-16-le")                         # valid UTF-8 bytes, NUL every other one
HUGE_INT = "1" * 5000                                        # more digits than Python converts to an int


def write(path, first: str, hostile) -> None:
    """``path``: the good line ``first``, then the hostile line (text or bytes)."""
    tail = hostile if isinstance(hostile, bytes) else hostile.encode("utf-8")
    path.write_bytes(first.encode("utf-8") + b"\n" + tail + b"\n")


# ---- ctxmt prepare jsonl: {"doc_id", "src", "tgt"} per line ------------------------------------------------
PREPARE_JSONL = [
    (DEEP, ["c.jsonl:2", "nested deeper than 32 levels"]),
    ('{"doc_id": NaN, "src": "a", "tgt": "b"}', ["c.jsonl:2", "NaN is not valid JSON"]),
    ('{"doc_id": -Infinity, "src": "a", "tgt": "b"}', ["c.jsonl:2", "-Infinity is not valid JSON"]),
    ('{"doc_id": 1e400, "src": "a", "tgt": "b"}', ["c.jsonl:2", "1e400 is too large"]),
    ('{"doc_id": ' + HUGE_INT + ', "src": "a", "tgt": "b"}', ["c.jsonl:2", "thousands of digits"]),
    ('{"doc_id": "d\\ud800", "src": "a", "tgt": "b"}', ["c.jsonl:2", "doc_id holds a lone surrogate \\ud800"]),
    ('{"doc_id": "d", "src": "a", "tgt": "b\\udfff c"}', ["c.jsonl:2", "tgt holds a lone surrogate \\udfff"]),
    ('{"doc_id": "d", "src": "a\\u0000", "tgt": "b"}', ["c.jsonl:2", "src holds a NUL character"]),
    ('{"doc_id": "d", "src\\ud800": "a", "tgt": "b"}', ["c.jsonl:2", "a key holds a lone surrogate"]),
    ('{"doc_id": "d", "src": ["a", "b"], "tgt": "c"}', ["c.jsonl:2", '"src" is not a string']),
    ('{"doc_id": "d", "src": "a", "tgt": 7}', ["c.jsonl:2", '"tgt" is not a string']),
    ('{"doc_id": ["d"], "src": "a", "tgt": "b"}', ["c.jsonl:2", '"doc_id" is ["d"]', "non-empty string"]),
    ('{"doc_id": true, "src": "a", "tgt": "b"}', ["c.jsonl:2", '"doc_id" is true']),
    ('{"doc_id": "", "src": "a", "tgt": "b"}', ["c.jsonl:2", '"doc_id" is ""']),
    ('{"doc_id": null, "src": "a", "tgt": "b"}', ["c.jsonl:2", '"doc_id" is null']),
    ("42", ["c.jsonl:2", "not an object"]),
    ('{"doc_id": "d", "src": "a"}', ["c.jsonl:2", "missing key(s) tgt"]),
    (b'{"doc_id": "d", "src": "caf\xe9", "tgt": "b"}', ["c.jsonl:2", "not valid UTF-8", "0xe9"]),
    (b'{"doc_id": "d", "src": "a", "tgt": "b"}\x00', ["c.jsonl:2", "NUL character", "UTF-16"]),
    ('{"doc_id": "d", "src": "a", "tgt": "b", "src": "c"}', ["c.jsonl:2", 'the key "src" appears twice', "column 41"]),
    ('{"doc_id": "d", "doc_id": "e", "src": "a", "tgt": "b"}', ["c.jsonl:2", 'the key "doc_id" appears twice']),
]


@pytest.mark.parametrize("hostile,needles", PREPARE_JSONL, ids=range(len(PREPARE_JSONL)))
def test_prepare_jsonl_refuses_hostile_lines(hostile, needles, ws):
    write(ws / "c.jsonl", '{"doc_id": "d0", "src": "a b", "tgt": "c d"}', hostile)
    check_bad_input(["prepare", "jsonl", "--train", "c.jsonl", "--out", "p"], needles, ws, placeholders())


# ---- ctxmt prepare text: one sentence per line, the same line on each side ------------------------------------
PREPARE_TEXT = [
    ("en", "a \x00 b", ["small.en:2", "NUL character at column 3", "iconv -f UTF-16"]),
    ("de", b"aus zwei Zeilen \xff", ["small.de:2", "not valid UTF-8", "0xff"]),
    ("en", UTF16, ["small.en:2", "NUL character", "UTF-16"]),
]


@pytest.mark.parametrize("side,hostile,needles", PREPARE_TEXT, ids=range(len(PREPARE_TEXT)))
def test_prepare_text_refuses_text_that_is_not_text(side, hostile, needles, ws):
    write(ws / f"small.{side}", "a first line", hostile)
    check_bad_input(["prepare", "text", "--train", "small", "--src-lang", "en", "--tgt-lang", "de", "--out", "p"],
                    needles, ws, placeholders())


# ---- ctxmt translate --input-format jsonl: {"doc_id", "src": [...], "tgt_context": [...]} ------------------------
TRANSLATE_JSONL = [
    (DEEP, ["in.jsonl:2", "nested deeper than 32 levels"]),
    ('{"doc_id": NaN, "src": ["a ."]}', ["in.jsonl:2", "NaN is not valid JSON"]),
    ('{"doc_id": Infinity, "src": ["a ."]}', ["in.jsonl:2", "Infinity is not valid JSON"]),
    ('{"doc_id": -1e999, "src": ["a ."]}', ["in.jsonl:2", "-1e999 is too large"]),
    ('{"doc_id": ' + HUGE_INT + ', "src": ["a ."]}', ["in.jsonl:2", "thousands of digits"]),
    ('{"doc_id": "d\\ud800", "src": ["a ."]}', ["in.jsonl:2", "doc_id holds a lone surrogate"]),
    ('{"src": ["a .", "b \\udc00 ."]}', ["in.jsonl:2", "src[1] holds a lone surrogate \\udc00"]),
    ('{"src": ["a .", "b ."], "tgt_context": ["\\u0000"]}', ["in.jsonl:2", "tgt_context[0] holds a NUL"]),
    ('{"src": "a b ."}', ["in.jsonl:2", "'src' must be a list of strings", "not a JSON string"]),
    ('{"src": ["a ."], "tgt_context": "A ."}',
     ["in.jsonl:2", "'tgt_context' must be a list of strings", "not a JSON string"]),
    ('{"src": [["a ."]]}', ["in.jsonl:2", "src[0] is a JSON array"]),
    ('{"src": [null]}', ["in.jsonl:2", "src[0] is a JSON null"]),
    ('{"src": {"0": "a ."}}', ["in.jsonl:2", "'src' must be a list", "not a JSON object"]),
    ('{"src": ["a ."], "doc_id": {"id": 1}}', ["in.jsonl:2", "doc_id must be a non-empty string or a number"]),
    ('{"src": ["a ."], "doc_id": ""}', ["in.jsonl:2", "doc_id must be a non-empty string", "line number"]),
    ('{"src": ["a ."], "doc_id": false}', ["in.jsonl:2", "doc_id must be"]),
    ('"a ."', ["in.jsonl:2", "not a JSON string"]),
    (b'{"src": ["caf\xe9 ."]}', ["in.jsonl:2", "not valid UTF-8"]),
    (b'{"src": ["a ."]}\x00', ["in.jsonl:2", "NUL character"]),
    ('{"src": ["a ."], "src": ["b ."]}', ["in.jsonl:2", 'the key "src" appears twice', "remove one of them"]),
    ('{"src": ["a ."], "tgt_context": [], "tgt_context": ["A ."]}', ["in.jsonl:2", 'key "tgt_context" appears twice']),
]


@pytest.mark.parametrize("hostile,needles", TRANSLATE_JSONL, ids=range(len(TRANSLATE_JSONL)))
def test_translate_jsonl_refuses_hostile_lines(hostile, needles, ws, concat_checkpoint):
    write(ws / "in.jsonl", '{"doc_id": "ok", "src": ["a b ."]}', hostile)
    check_bad_input(["translate", "in.jsonl", "-c", "{ckpt}", "--input-format", "jsonl", "-o", "out.jsonl",
                     "--device", "cpu"], needles, ws, placeholders(ckpt=concat_checkpoint))


# ---- ctxmt translate: plain text documents ------------------------------------------------------------------
TRANSLATE_TEXT = [
    (b"a \x00 b .", ["in.txt:2", "NUL character at column 3", "UTF-16"]),
    (b"caf\xe9 .", ["in.txt:2", "not valid UTF-8", "0xe9"]),
    (b"\xed\xa0\x80 .", ["in.txt:2", "not valid UTF-8", "0xed"]),        # a surrogate encoded as UTF-8
    (UTF16, ["in.txt:2", "NUL character"]),
]


@pytest.mark.parametrize("hostile,needles", TRANSLATE_TEXT, ids=range(len(TRANSLATE_TEXT)))
def test_translate_text_refuses_text_that_is_not_text(hostile, needles, ws, concat_checkpoint):
    write(ws / "in.txt", "a b .", hostile)
    check_bad_input(["translate", "in.txt", "-c", "{ckpt}", "-o", "out.txt", "--device", "cpu"], needles, ws,
                    placeholders(ckpt=concat_checkpoint))


# ---- ctxmt contrastive jsonl:FILE: {"src", "candidates": [...], "correct", ...} -------------------------------
GOOD_ITEM = {"src_context": ["a ."], "src": "b .", "tgt_context": ["A ."], "candidates": ["B .", "C ."],
             "correct": 0, "tags": {"distance": 1}}


def item(**fields) -> str:
    """A good item with ``fields`` replaced (a value of None: the field removed)."""
    out = {**GOOD_ITEM, **fields}
    return json.dumps({k: v for k, v in out.items() if v is not None}, allow_nan=True)


CONTRASTIVE_JSONL = [
    (DEEP, ["items.jsonl:2", "nested deeper than 32 levels"]),
    (item(candidates="BC"), ["items.jsonl:2", "'candidates' is a JSON string", "list of strings"]),
    (item(src_context="a ."), ["items.jsonl:2", "'src_context' is a JSON string"]),
    (item(tgt_context="A ."), ["items.jsonl:2", "'tgt_context' is a JSON string"]),
    (item(src=["b ."]), ["items.jsonl:2", "'src' is a JSON array", "a string"]),
    (item(candidates=["B .", 3]), ["items.jsonl:2", "'candidates[1]' is a JSON number"]),
    (item(correct=True), ["items.jsonl:2", "'correct' is a JSON boolean"]),
    (item(correct=0.5), ["items.jsonl:2", "'correct' is a JSON number", "whole number"]),
    (item(correct=float("nan")), ["items.jsonl:2", "NaN is not valid JSON"]),
    (item(tags={"distance": float("inf")}), ["items.jsonl:2", "Infinity is not valid JSON"]),
    (item(tags="pronoun"), ["items.jsonl:2", "'tags' is a JSON string"]),
    (item(tags={"distance": [1]}), ["items.jsonl:2", "tags.distance is a JSON array"]),
    (item(candidate_contexts="A ."), ["items.jsonl:2", "'candidate_contexts' needs one list per candidate"]),
    (item(candidate_contexts=["A .", "A ."]), ["items.jsonl:2", "'candidate_contexts[0]' is a JSON string"]),
    (item(candidates=["B .", "C \ud800 ."]), ["items.jsonl:2", "candidates[1] holds a lone surrogate"]),
    (item(src="b \x00 ."), ["items.jsonl:2", "src holds a NUL character"]),
    (b'{"src": "caf\xe9", "candidates": ["a", "b"]}', ["items.jsonl:2", "not valid UTF-8"]),
    (item()[:-1] + ', "correct": 1}', ["items.jsonl:2", 'the key "correct" appears twice']),
    (item(tags={"distance": 1})[:-2] + ', "distance": 2}}', ["items.jsonl:2", 'the key "distance" appears twice']),
]


@pytest.mark.parametrize("hostile,needles", CONTRASTIVE_JSONL, ids=range(len(CONTRASTIVE_JSONL)))
def test_contrastive_jsonl_refuses_hostile_items(hostile, needles, ws, concat_checkpoint):
    write(ws / "items.jsonl", item(), hostile)
    check_bad_input(["contrastive", "jsonl:items.jsonl", "-c", "{ckpt}", "--out", "res", "--device", "cpu"],
                    needles, ws, placeholders(ckpt=concat_checkpoint))


# ---- ctxmt contrastive voita:FILE: one JSON list of groups -----------------------------------------------------
VOITA = [
    (DEEP, ["deixis_test.json", "nested deeper than 32 levels"]),
    ('[{"src": "a", "dst": ["b", "c"], "true_ind": 0, "ctx_dist": NaN}]', ["deixis_test.json", "NaN is not valid"]),
    ('[{"src": "a \\ud800", "dst": ["b", "c"], "true_ind": 0, "ctx_dist": 1}]',
     ["deixis_test.json", "[0].src holds a lone surrogate"]),
    ('[{"src": "a", "dst": ["b", "c"], "true_ind": 0, "ctx_dist": 1},\n {"src": "a", "dst": ["b", "c"], '
     '"true_ind": 0, "true_ind": 1, "ctx_dist": 1}]', ["deixis_test.json", 'the key "true_ind" appears twice',
                                                      "at line 2, column 49"]),
    ('[{"src": "a", "dst": "bc", "true_ind": 0, "ctx_dist": 1}]', ["deixis_test.json", '"dst" a list of strings']),
]


@pytest.mark.parametrize("text,needles", VOITA, ids=range(len(VOITA)))
def test_contrastive_voita_refuses_hostile_json(text, needles, ws, concat_checkpoint):
    (ws / "deixis_test.json").write_text(text, encoding="utf-8")
    check_bad_input(["contrastive", "voita:deixis_test.json", "-c", "{ckpt}", "--out", "res", "--device", "cpu"],
                    needles, ws, placeholders(ckpt=concat_checkpoint))


# ---- ctxmt contrastive scat:FILE: the publisher's line-aligned text files ------------------------------------------
def test_contrastive_scat_refuses_text_that_is_not_text(ws, concat_checkpoint):
    (ws / "highlighted.test.en").write_bytes(b"It is <p>big</p> .\nI \x00 saw it .\n")
    check_bad_input(["contrastive", "scat:highlighted.test.en", "-c", "{ckpt}", "--out", "res", "--device", "cpu"],
                    ["highlighted.test.en:2", "NUL character"], ws, placeholders(ckpt=concat_checkpoint))


# ---- ctxmt contrastive compare RUN_A RUN_B: the runs' SET.decisions.jsonl ------------------------------------------
COMPARE = [
    (DEEP, ["ra/s.decisions.jsonl:2", "nested deeper than 32 levels"]),
    ('{"correct": NaN, "tags": {}}', ["ra/s.decisions.jsonl:2", "NaN is not valid JSON"]),
    ('{"correct": "yes", "tags": {}}', ["ra/s.decisions.jsonl:2", '"correct": true or false']),
    ('{"correct": true, "tags": "pronoun"}', ["ra/s.decisions.jsonl:2", "not a decision"]),
    ("garbage", ["ra/s.decisions.jsonl:2", "not a decision", "Expecting value"]),
    (b'{"correct": true, "tags": {"x": "\xff"}}', ["ra/s.decisions.jsonl:2", "not valid UTF-8"]),
    ('{"correct": true, "tags": {}, "correct": false}', ["ra/s.decisions.jsonl:2", 'key "correct" appears twice']),
]


@pytest.mark.parametrize("hostile,needles", COMPARE, ids=range(len(COMPARE)))
def test_contrastive_compare_refuses_hostile_decisions(hostile, needles, ws):
    good = '{"correct": true, "tags": {"distance": 1}}'
    for run in ("ra", "rb"):
        (ws / run).mkdir()
        write(ws / run / "s.decisions.jsonl", good, hostile if run == "ra" else good)
    check_bad_input(["contrastive", "compare", "ra", "rb"], needles, ws, placeholders())


# ---- ctxmt prepare iwslt-xml: a <seg> nested in another --------------------------------------------------------
XML = [
    ('<seg id="1">a <seg id="2">b</seg> c</seg>', ["x.en.xml:3", "<seg> inside <seg id=1>"]),
    ('<seg id="1">a\n<seg id="2">b</seg>\n</seg>', ["x.en.xml:3", "<seg> inside <seg id=1>"]),
    ('<seg id="1">a</seg> c</seg>', ["x.en.xml:3", "</seg> without an opening <seg>"]),
    ('<seg id="1">a <doc docid="2"> b</seg>', ["x.en.xml:3", "<doc> inside <seg id=1>"]),
]


@pytest.mark.parametrize("body,needles", XML, ids=range(len(XML)))
def test_prepare_xml_refuses_a_seg_nested_in_another(body, needles, ws):
    (ws / "x.en.xml").write_text(f'<doc docid="1">\n<seg id="0">a first one</seg>\n{body}\n</doc>\n')
    (ws / "x.de.xml").write_text('<doc docid="1">\n<seg id="0">x</seg>\n<seg id="1">y</seg>\n<seg id="2">z</seg>\n'
                                 '</doc>\n')
    check_bad_input(["prepare", "iwslt-xml", "--train", "x", "--src-lang", "en", "--tgt-lang", "de", "--out", "p"],
                    needles, ws, placeholders())


# ---- compressed files: the hint of the file's own compression, never an encoding hint ---------------------------
def _gzip(text: str) -> bytes:
    import gzip

    return gzip.compress(text.encode("utf-8"), mtime=0)


COMPRESSED = [
    # a damaged gzip file: tested with gzip, on its own name (not `xz -t c.en.gz:1`)
    (["prepare", "text", "--train", "c", "--src-lang", "en", "--tgt-lang", "de", "--out", "p"],
     {"c.en.gz": _gzip("a b\n" * 400)[:-30], "c.de": "x y\n" * 400},
     ["c.en.gz:1: cannot decompress", "(test it with `gzip -t c.en.gz`)"]),
    (["prepare", "text", "--train", "c", "--src-lang", "en", "--tgt-lang", "de", "--out", "p"],
     {"c.en.bz2": b"BZh91AY&SY" + b"\x00" * 40, "c.de": "x y\n"},
     ["c.en.bz2:1: cannot decompress", "`bzip2 -t c.en.bz2`"]),
    # named .gz but not gzip: damaged or misnamed, not an encoding problem
    (["prepare", "text", "--train", "c", "--src-lang", "en", "--tgt-lang", "de", "--out", "p"],
     {"c.en.gz": b"\x00\x9a\xff\x01", "c.de": "x\n"}, ["c.en.gz:1", "its name says gzip but it does not start like"]),
    (["translate", "in.txt.gz", "-c", "{ckpt}", "-o", "out.txt"], {"in.txt.gz": b"\x00\x9a\xff\x01\n"},
     ["in.txt.gz:1", "its name says gzip but it does not start like a gzip file"]),
    (["translate", "in.txt.gz", "-c", "{ckpt}", "-o", "out.txt"], {"in.txt.gz": _gzip("a b .\n" * 400)[:-30]},
     ["in.txt.gz:1: cannot decompress", "`gzip -t in.txt.gz`"]),
    (["evaluate", "--hyp", "h.txt.bz2", "--ref", "doc.txt"], {"h.txt.bz2": b"\xff\xfe a b\n"},
     ["h.txt.bz2", "its name says bzip2 but it does not start like a bzip2 file"]),
]


@pytest.mark.parametrize("args,files,needles", COMPRESSED, ids=range(len(COMPRESSED)))
def test_compressed_inputs_get_the_right_hint(args, files, needles, ws, concat_checkpoint):
    for name, content in files.items():
        (ws / name).write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    check_bad_input(args, needles, ws, placeholders(ckpt=concat_checkpoint))


def test_translate_and_evaluate_read_gzip_and_bzip2_inputs(ws, concat_checkpoint):
    import bz2

    (ws / "doc.txt.gz").write_bytes(_gzip((ws / "doc.txt").read_text()))
    (ws / "doc.txt.bz2").write_bytes(bz2.compress((ws / "doc.txt").read_bytes()))
    outputs = {}
    for name in ("doc.txt", "doc.txt.gz", "doc.txt.bz2"):
        result = run_cli("translate", name, "-c", concat_checkpoint, "-o", f"{name}.out", "--device", "cpu")
        assert result.exit_code == 0, result.output
        outputs[name] = (ws / f"{name}.out").read_text()
    assert outputs["doc.txt"] == outputs["doc.txt.gz"] == outputs["doc.txt.bz2"]
    result = run_cli("evaluate", "--hyp", "doc.txt.out", "--ref", "doc.txt.gz")
    assert result.exit_code == 0, result.output


# ---- a prepared dataset changed since ctxmt prepare wrote it: one line naming the file --------------------------
def _poke(name: str, index: int, value: int, dtype: str = "int64"):
    def change(data):
        array = np.fromfile(data / name, dtype=dtype)
        array[index] = value
        array.tofile(data / name)
    return change


def _meta(**fields):
    def change(data):
        meta = json.loads((data / "meta.json").read_text())
        meta.update(fields)
        (data / "meta.json").write_text(json.dumps(meta))
    return change


def _flip_spm(data):
    model = bytearray((data / "spm.model").read_bytes())
    model[8:24] = bytes(b ^ 0xFF for b in model[8:24])
    (data / "spm.model").write_bytes(bytes(model))


TAMPERED = {
    "spm": (_flip_spm, ["pd/spm.model: SentencePiece cannot read it", "prepare the dataset again"]),
    "spm_cut": (lambda d: (d / "spm.model").write_bytes((d / "spm.model").read_bytes()[:200]),
                ["pd/spm.model: SentencePiece cannot read it"]),
    "docs": (_poke("test.docs", 2, 1), ["pd/test.docs: document 2 starts at sentence 1", "every document"]),
    "docs_end": (_poke("test.docs", -1, 10 ** 6), ["pd/test.docs: its documents end at sentence 1000000"]),
    "dtype": (_meta(dtype="float64"), ["pd/meta.json: 'dtype' is 'float64', not one of uint16, int32"]),
    "dtype_int64": (_meta(dtype="int64"), ["pd/meta.json: 'dtype' is 'int64'"]),
    "idx_2_62": (_poke("test.src.idx", 3, 2 ** 62), ["pd/test.src.idx: offset 3 is 4611686018427387904, beyond"]),
    "idx_down": (_poke("test.tgt.idx", 3, 0), ["pd/test.tgt.idx: offset 3 (0) is below offset 2"]),
    "idx_cut": (lambda d: (d / "test.src.idx").write_bytes((d / "test.src.idx").read_bytes()[:-5]),
                ["pd/test.src.idx", "not a whole number of 8-byte entries"]),
    "bin_id": (_poke("test.tgt.bin", 5, 65000, "uint16"), ["pd/test.tgt.bin: token 5 has id 65000, outside"]),
    "meta_list": (lambda d: (d / "meta.json").write_text("[]"), ["pd/meta.json: it holds a JSON list"]),
    "spm_path": (_meta(spm={"src": "/etc/hostname", "tgt": "spm.model"}), ["pd/meta.json: 'spm' is"]),
}
#: readers of a prepared dataset's test split (and its tokenizer)
DATA_READERS = {
    "cxmi": ["cxmi", "-c", "{ckpt}", "--data", "pd", "--out", "c.json", "--device", "cpu"],
    "evaluate": ["evaluate", "-c", "{ckpt}", "--data", "pd", "--out", "s.json", "--device", "cpu"],
    "first-pass": ["first-pass", "-c", "{ckpt}", "--data", "pd", "--split", "test", "--name", "fp", "--device", "cpu"],
}


#: every change through cxmi; three through every other reader (each opens the data through the same checks)
TAMPER_MATRIX = [(name, "cxmi") for name in TAMPERED] + \
    [(name, reader) for reader in DATA_READERS if reader != "cxmi" for name in ("spm", "idx_2_62", "dtype")]


@pytest.mark.parametrize("name,reader", TAMPER_MATRIX, ids=[f"{n}-{r}" for n, r in TAMPER_MATRIX])
def test_a_tampered_prepared_dataset_is_one_line(name, reader, ws, synthetic_dir, concat_checkpoint):
    data = shutil.copytree(synthetic_dir, ws / "pd", ignore=shutil.ignore_patterns("raw"))
    TAMPERED[name][0](data)
    check_bad_input(DATA_READERS[reader], TAMPERED[name][1], ws, placeholders(ckpt=concat_checkpoint))


def test_train_refuses_a_tampered_dataset(ws, synthetic_dir):
    data = shutil.copytree(synthetic_dir, ws / "pd", ignore=shutil.ignore_patterns("raw"))
    _poke("train.src.idx", 2, 2 ** 62)(data)
    sets = [a for s in ("data.path=pd", "train.save_dir=run", *TINY_SETS) for a in ("--set", s)]
    check_bad_input(["train", str(QUICKSTART), *sets], ["pd/train.src.idx: offset 2 is 4611686018427387904"], ws,
                    placeholders())


# ---- properties: generated hostile files through the CLI -------------------------------------------------------
def reads_or_refuses(args: list[str], files: dict[str, bytes], ws) -> None:
    """``ctxmt ARGS`` on ``files`` (written into a fresh ``case/`` folder): exit 0, or exit 2 with one line and the
    folder exactly as it was (no litter); never a traceback; the input files byte-identical either way."""
    case = ws / "case"
    shutil.rmtree(case, ignore_errors=True)
    case.mkdir()
    for name, content in files.items():
        (case / name).parent.mkdir(parents=True, exist_ok=True)
        (case / name).write_bytes(content)
    before = snapshot(case)
    result = run_cli(*args)
    assert result.exit_code in (0, 2) and "Traceback" not in result.output, (result.output, result.exception)
    if result.exit_code == 2:
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert snapshot(case) == before
    assert all((case / name).read_bytes() == content for name, content in files.items())


@settings(max_examples=10)
@given(data=jsonl_files(["doc_id", "src", "tgt_context"], '{"doc_id": "d", "src": ["a b ."], "tgt_context": []}'))
def test_translate_jsonl_property(data, ws, concat_checkpoint):
    reads_or_refuses(["translate", "case/in.jsonl", "-c", concat_checkpoint, "--input-format", "jsonl", "-o",
                      "case/out.jsonl", "--device", "cpu"], {"in.jsonl": data}, ws)


@settings(max_examples=10)
@given(data=text_files())
def test_translate_text_property(data, ws, concat_checkpoint):
    reads_or_refuses(["translate", "case/in.txt", "-c", concat_checkpoint, "-o", "case/out.txt", "--device", "cpu"],
                     {"in.txt": data}, ws)


@settings(max_examples=10)
@given(data=jsonl_files(["src_context", "src", "tgt_context", "candidates", "correct", "tags"], item()))
def test_contrastive_jsonl_property(data, ws, concat_checkpoint):
    reads_or_refuses(["contrastive", "jsonl:case/items.jsonl", "-c", concat_checkpoint, "--out", "case/res",
                      "--device", "cpu"], {"items.jsonl": data}, ws)


@settings(max_examples=8)
@given(data=jsonl_files(["doc_id", "src", "tgt"], '{"doc_id": "d0", "src": "a b", "tgt": "c d"}'))
def test_prepare_jsonl_property(data, ws):
    reads_or_refuses(["prepare", "jsonl", "--train", "case/c.jsonl", "--out", "case/p", "--vocab-size", "40"],
                     {"c.jsonl": data}, ws)


@settings(max_examples=8)
@given(pair=xml_files())
def test_prepare_xml_property(pair, ws):
    reads_or_refuses(["prepare", "iwslt-xml", "--train", "case/x", "--src-lang", "en", "--tgt-lang", "de", "--out",
                      "case/p", "--vocab-size", "40"], {"x.en.xml": pair[0], "x.de.xml": pair[1]}, ws)


@given(hyp=text_files(), ref=text_files())
def test_evaluate_text_property(hyp, ref, ws):
    reads_or_refuses(["evaluate", "--hyp", "case/h.txt", "--ref", "case/r.txt", "--out", "case/s.json"],
                     {"h.txt": hyp, "r.txt": ref}, ws)


@given(data=jsonl_files(["correct", "tags"], '{"correct": true, "tags": {"distance": 1}}'))
def test_contrastive_compare_property(data, ws):
    good = b'{"correct": true, "tags": {"distance": 1}}\n' * max(1, data.count(b"\n"))
    reads_or_refuses(["contrastive", "compare", "case/ra", "case/rb"],
                     {"ra/s.decisions.jsonl": data, "rb/s.decisions.jsonl": good}, ws)
