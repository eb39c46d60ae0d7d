"""The ContraPro reader on hand-made fixtures in the publisher's layouts, and evaluate.py equivalence.

Fixtures (tests/fixtures/contrapro, invented sentences): ``contrapro.json``; the
four files ``json2text_and_context.pl --source en --target de --context 1``
writes; ContraPro's ``documents/YEAR/YEAR_IMDB_ID.{en,de}``; and the OPUS Moses
download it is built from (``opus/OpenSubtitles2018.de-en.{ids,de,en}``, with a
distractor document between the two real ones).
"""

from __future__ import annotations

import json
import operator
import shutil
from collections import defaultdict
from pathlib import Path

import pytest

from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.evaluate.contrastive import decisions, summarize
from ctxmt_cli.evaluate.testsets import load_testsets, scores_lines
from ctxmt_cli.evaluate.testsets.contrapro import read_contrapro
from ctxmt_cli.synthetic import generate_benchmark

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "contrapro"
RECORDS = json.loads((FIXTURES / "contrapro.json").read_text(encoding="utf-8"))


# --- the publisher's rules, reimplemented -------------------------------------------------------

def evaluate_py(records: list[dict], score_lines: list[str], maximize: bool = False) -> list[bool]:
    """ContraPro evaluate.py: per record one score, then one per error; correct only if better than all."""
    better = operator.gt if maximize else operator.lt
    lines = iter(score_lines)
    out = []
    for record in records:
        score = float(next(lines))
        ok = True
        for _ in record["errors"]:
            if not better(score, float(next(lines))):
                ok = False
        out.append(ok)
    assert next(lines, None) is None, "scores file longer than the json needs"
    return out


def evaluate_py_by_distance(records: list[dict], correct: list[bool]) -> dict[str, float]:
    """evaluate.py's 'statistics by ante distance' (distances above 3 pooled as '>3')."""
    groups = defaultdict(list)
    for record, ok in zip(records, correct, strict=True):
        distance = record["ante distance"]
        groups[str(">3" if distance > 3 else distance)].append(ok)
    return {key: sum(oks) / len(oks) for key, oks in groups.items()}


def perl_extraction(records: list[dict], k: int) -> dict[str, list[str]]:
    """json2text_and_context.pl --context k (latest version) over the fixture's documents folder."""
    out = {"text.en": [], "text.de": [], "context.en": [], "context.de": []}
    for record in records:
        key = record["document id"][: -len(".de")]
        base = FIXTURES / "documents" / key.split("_")[0] / key
        en = (base.with_suffix(".en")).read_text(encoding="utf-8").splitlines()
        de = (base.with_suffix(".de")).read_text(encoding="utf-8").splitlines()
        seg = record["segment id"]
        for j in range(1 + len(record["errors"])):
            for c in range(k, 0, -1):
                out["context.en"].append(en[seg - c - 1] if seg - c >= 1 else "")
                out["context.de"].append(de[seg - c - 1] if seg - c >= 1 else "")
            out["text.en"].append(en[seg - 1])
            out["text.de"].append(de[seg - 1] if j == 0 else record["errors"][j - 1]["contrastive"])
    return out


# --- helpers ------------------------------------------------------------------------------------

def _read(path: Path = FIXTURES, **options):
    (testset,) = read_contrapro(path, **options)
    return testset


def _rows(testset) -> list[tuple]:
    return [(i.src_context, i.src, i.tgt_context, i.candidates) for i in testset.items]


def _copy(tmp_path: Path, *names: str) -> Path:
    for name in names:
        source = FIXTURES / name
        if source.is_dir():
            shutil.copytree(source, tmp_path / name)
        else:
            shutil.copy(source, tmp_path / name)
    return tmp_path


def _error(path: Path, **options) -> str:
    with pytest.raises(CtxmtError) as info:
        read_contrapro(path, **options)
    message = str(info.value)
    assert "\n" not in message
    return message


# --- reading ------------------------------------------------------------------------------------

def test_reads_the_extraction_files_in_json_order():
    testset = load_testsets("contrapro", FIXTURES)[0]
    assert (testset.name, testset.kind, testset.tie_rule) == ("contrapro", "contrapro", "strict")
    assert testset.groupings == ("distance", "pronoun")
    assert (testset.src_lang, testset.tgt_lang) == ("en", "de")
    assert len(testset.items) == len(RECORDS) == 5
    assert [i.tags["distance"] for i in testset.items] == [1, 0, 2, ">3", 1]
    assert [i.tags["pronoun"] for i in testset.items] == ["sie", "es", "er", "es", "es"]
    assert {i.tags["src_pronoun"] for i in testset.items} == {"it"}
    assert testset.items[0].tags["category"] == "it:sie"
    for item, record in zip(testset.items, RECORDS, strict=True):
        assert item.src == record["src segment"]
        assert item.candidates == [record["ref segment"]] + [e["contrastive"] for e in record["errors"]]
        assert item.correct == 0
    assert testset.items[0].src_context == ["The lamp stood in the corner."]
    assert testset.items[0].tgt_context == ["Die Lampe stand in der Ecke."]
    assert testset.items[1].src_context == testset.items[1].tgt_context == []  # first line: empty context line
    names = sorted(p.name for p in testset.files)
    assert names == ["contrapro.context.de", "contrapro.context.en", "contrapro.json",
                     "contrapro.text.de", "contrapro.text.en"]
    assert len(testset.checksums()) == 5


def test_fixture_files_are_what_the_perl_script_writes():
    expected = perl_extraction(RECORDS, 1)
    for name, lines in expected.items():
        assert (FIXTURES / f"contrapro.{name}").read_text(encoding="utf-8").split("\n")[:-1] == lines


@pytest.mark.parametrize("documents", ["documents", "opus", "opus/OpenSubtitles2018.de-en",
                                       "opus/OpenSubtitles2018.de-en.ids"])
def test_extraction_from_documents_equals_the_context_files(documents):
    from_documents = _read(documents=FIXTURES / documents)
    assert _rows(from_documents) == _rows(_read())
    assert [i.tags for i in from_documents.items] == [i.tags for i in _read().items]


def test_json_file_and_prefix_paths():
    for path in (FIXTURES / "contrapro.json", FIXTURES / "contrapro"):
        assert _rows(load_testsets(f"contrapro:{path}")[0]) == _rows(_read())


def test_documents_folder_is_used_when_the_text_files_are_absent(tmp_path):
    folder = _copy(tmp_path, "contrapro.json", "documents")
    testset = _read(folder)
    assert _rows(testset) == _rows(_read())
    assert any(p.name == "1999_1234_5678.de" for p in testset.files)


def test_context_k_from_documents_and_trimmed_text_files(tmp_path):
    three = _read(documents=FIXTURES / "opus", context=3)
    assert three.items[2].src_context == ["It was a gift from my sister.", "Where is the spoon?", "Look in the drawer."]
    assert three.items[0].src_context == ["The lamp stood in the corner."]  # lines before the document dropped
    assert three.items[1].src_context == []
    folder = _copy(tmp_path, "contrapro.json")
    for name, lines in perl_extraction(RECORDS, 3).items():
        (folder / f"contrapro.{name}").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    assert _rows(_read(folder)) == _rows(three)  # the files hold 3 lines per text line
    assert _rows(_read(folder, context=1)) == _rows(_read())  # newest line kept
    assert all(i.src_context == [] for i in _read(folder, context=0).items)


def test_documents_without_context_extract_as_many_sentences_as_the_model_reads():
    opus = FIXTURES / "opus"
    for k in (0, 1, 3):
        assert _rows(_read(documents=opus, model_context=k)) == _rows(_read(documents=opus, context=k))
        # the spec ctxmt contrastive passes: KIND:PATH, the documents and the model's context size
        (loaded,) = load_testsets(f"contrapro:{FIXTURES}", documents=opus, model_context=k)
        assert _rows(loaded) == _rows(_read(documents=opus, context=k))
    assert all(i.src_context == [] for i in _read(documents=opus, model_context=0).items)
    assert _rows(_read(documents=opus, model_context=3, context=1)) == _rows(_read())   # --context wins
    assert _rows(_read(documents=opus)) == _rows(_read())                                # no model known: 1


def test_src_tgt_suffixes_and_json_only(tmp_path):
    folder = _copy(tmp_path, "contrapro.json")
    for old, new in (("en", "src"), ("de", "tgt")):
        for kind in ("text", "context"):
            shutil.copy(FIXTURES / f"contrapro.{kind}.{old}", folder / f"contrapro.{kind}.{new}")
    assert _rows(_read(folder)) == _rows(_read())
    bare = tmp_path / "bare"
    bare.mkdir()
    items = _read(_copy(bare, "contrapro.json"), context=0).items
    assert [i.candidates[0] for i in items] == [r["ref segment"] for r in RECORDS]


# --- the synthetic benchmark's ContraPro copy -----------------------------------------------------

@pytest.fixture(scope="module")
def synthetic(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("syn") / "bench"
    generate_benchmark(out, seed=1, docs=41)
    return out / "contrastive"


def test_reads_the_synthetic_contrapro_copy(synthetic):
    testset = _read(synthetic / "contrapro")
    generic = [json.loads(line) for line in (synthetic / "items.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(testset.items) == len(generic) > 0
    for item, raw in zip(testset.items, generic, strict=True):
        assert (item.src_context, item.src, item.tgt_context, item.candidates) == (
            raw["src_context"], raw["src"], raw["tgt_context"], raw["candidates"])
        assert item.tags["distance"] == raw["tags"]["distance"]
        assert item.tags["phenomenon"] == raw["tags"]["phenomenon"]


# --- publisher-script equivalence -----------------------------------------------------------------

SCORES = [  # log-probabilities (higher = better), with ties
    [-1.5, -2.0, -3.0],    # wins
    [-2.0, -2.0, -3.0],    # ties the first contrastive: loses
    [-1.0, -0.5, -2.0],    # loses
    [-0.25, -0.75, -0.25],  # ties the second contrastive: loses
    [-0.5, -1.0, -1.25],   # wins
]


def test_scores_file_gives_evaluate_py_the_same_decisions(tmp_path):
    testset = _read()
    reference = [row[0] > max(row[1:]) for row in SCORES]
    assert reference == [True, False, False, False, True]
    path = tmp_path / "contrapro.scores"
    path.write_text("".join(line + "\n" for line in scores_lines(SCORES)), encoding="utf-8")
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == sum(1 + len(r["errors"]) for r in RECORDS)
    assert evaluate_py(RECORDS, lines) == reference
    assert evaluate_py(RECORDS, [str(-float(x)) for x in lines], maximize=True) == reference
    assert decisions(testset, SCORES) == reference
    by = summarize(testset, reference)["by"]["distance"]
    assert by == evaluate_py_by_distance(RECORDS, reference)


# --- bad input --------------------------------------------------------------------------------------

def test_malformed_json(tmp_path):
    folder = _copy(tmp_path, "contrapro.json")
    (folder / "contrapro.json").write_text('[{"src segment": "x",\n "errors": [}]', encoding="utf-8")
    assert "contrapro.json:2: malformed JSON" in _error(folder, context=0)
    (folder / "contrapro.json").write_text('{"records": []}', encoding="utf-8")
    assert "non-empty JSON list" in _error(folder, context=0)


def test_count_mismatch_names_file_and_line(tmp_path):
    folder = _copy(tmp_path, "contrapro.json", "contrapro.text.en", "contrapro.text.de",
                   "contrapro.context.en", "contrapro.context.de")
    lines = (folder / "contrapro.text.de").read_text(encoding="utf-8").splitlines()
    (folder / "contrapro.text.de").write_text("\n".join(lines[:-1]) + "\n", encoding="utf-8")
    message = _error(folder)
    assert "contrapro.text.de:15: 14 lines but contrapro.json (1 + errors per record) needs 15" in message
    (folder / "contrapro.text.de").write_text("\n".join(lines) + "\n", encoding="utf-8")
    ctx = (folder / "contrapro.context.en").read_text(encoding="utf-8")
    (folder / "contrapro.context.en").write_text(ctx + "extra\n", encoding="utf-8")
    assert "not a multiple of the 15 text lines" in _error(folder)


def test_source_mismatch_and_too_much_context(tmp_path):
    folder = _copy(tmp_path, "contrapro.json", "contrapro.text.en", "contrapro.text.de",
                   "contrapro.context.en", "contrapro.context.de")
    lines = (folder / "contrapro.text.en").read_text(encoding="utf-8").splitlines()
    lines[4] = "Something else entirely."
    (folder / "contrapro.text.en").write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert "contrapro.text.en:5: source differs from 'src segment' of json record 2" in _error(folder)
    assert len(_read(folder, check_source=False).items) == 5
    assert "holds 1 context line(s) per text line, 2 asked for" in _error(FIXTURES, context=2)


def test_missing_context_files_and_documents(tmp_path):
    folder = _copy(tmp_path, "contrapro.json", "contrapro.text.en", "contrapro.text.de")
    assert "missing context file" in _error(folder)
    assert len(_read(folder, context=0).items) == 5
    bare = tmp_path / "bare"
    bare.mkdir()
    _copy(bare, "contrapro.json")
    assert "missing context files" in _error(bare)
    assert "document 1999_1234_5678 not found" in _error(bare, documents=tmp_path / "nowhere")
    (tmp_path / "o").mkdir()
    opus = _copy(tmp_path / "o", "opus") / "opus"
    (opus / "OpenSubtitles2018.de-en.en").write_text("short\n", encoding="utf-8")
    assert "ends early" in _error(FIXTURES, documents=opus)
    assert "no contrapro.json" in _error(tmp_path / "o")
