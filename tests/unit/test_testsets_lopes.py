"""The Lopes et al. (2020) En->Fr reader on hand-made fixtures in the publisher's layout.

Fixtures (tests/fixtures/lopes, invented sentences), laid out as the
publisher's repository: ``testset-en-fr.json`` (records pronoun by pronoun, as
``filter_examples.py`` writes them, so not grouped by document) and
``extracted/Tiny.current.{src,trg}`` + ``Tiny.c{1,2}.context.{src,trg}`` as
``extract_current_and_context.py -c N`` writes them (grouped by document).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.evaluate.contrastive import decisions, summarize
from ctxmt_cli.evaluate.testsets import load_testsets, scores_lines
from ctxmt_cli.evaluate.testsets.lopes import changed_pronoun, extraction_order, read_lopes

# the publisher's README scores with ContraPro's evaluate.py: one reimplementation serves both
from tests.unit.test_testsets_contrapro import evaluate_py

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "lopes"
EXTRACTED = FIXTURES / "extracted"
RECORDS = json.loads((FIXTURES / "testset-en-fr.json").read_text(encoding="utf-8"))


# --- the publisher's rules, reimplemented -------------------------------------------------------

def extract_order(records: list[dict]) -> list[int]:
    """extract_current_and_context.py's order: examples grouped by document id, first appearance first."""
    docs: dict = {}
    for index, record in enumerate(records):
        docs.setdefault(record["document id"], []).append(index)
    return [i for indices in docs.values() for i in indices]


# --- helpers ------------------------------------------------------------------------------------

def _read(path: Path = EXTRACTED, **options):
    (testset,) = read_lopes(path, **options)
    return testset


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split("\n")[:-1]


def _write(path: Path, lines: list[str]) -> None:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def _copy_extracted(tmp_path: Path, with_json: bool = True) -> Path:
    shutil.copytree(EXTRACTED, tmp_path / "extracted")
    if with_json:
        shutil.copy(FIXTURES / "testset-en-fr.json", tmp_path / "testset-en-fr.json")
    return tmp_path / "extracted"


def _error(path: Path, **options) -> str:
    with pytest.raises(CtxmtError) as info:
        read_lopes(path, **options)
    message = str(info.value)
    assert "\n" not in message
    return message


# --- reading ------------------------------------------------------------------------------------

def test_reads_the_extracted_files_with_the_json():
    testset = load_testsets("lopes", EXTRACTED)[0]
    assert (testset.name, testset.kind, testset.tie_rule) == ("Tiny", "lopes", "strict")
    assert (testset.src_lang, testset.tgt_lang) == ("en", "fr")
    assert testset.groupings == ("distance", "pronoun")
    assert len(testset.items) == len(RECORDS) == 5
    assert [i.tags["pronoun"] for i in testset.items] == ["il", "elle", "ils", "ils", "elles"]
    assert [i.tags["distance"] for i in testset.items] == [1, 1, 0, 2, 1]
    assert [i.tags["src_pronoun"] for i in testset.items] == ["it", "it", "they", "they", "they"]
    current_trg = _lines(EXTRACTED / "Tiny.current.trg")
    for item, record in zip(testset.items, RECORDS):  # json order, scored lines from the extracted files
        assert item.src == record["src segment"]
        assert item.candidates[1] == record["errors"][0]["contrastive"]
        assert item.candidates[0] in current_trg and item.candidates[0] != record["ref segment"]
    assert {p.name for p in testset.files} == {"testset-en-fr.json", "Tiny.current.src", "Tiny.current.trg",
                                               "Tiny.c2.context.src", "Tiny.c2.context.trg"}


def test_file_order_is_grouped_by_document():
    assert extraction_order(RECORDS) == extract_order(RECORDS) == [0, 1, 4, 2, 3]
    current_src = _lines(EXTRACTED / "Tiny.current.src")
    assert current_src[::2] == [RECORDS[i]["src segment"] for i in extract_order(RECORDS)]
    assert current_src[::2] == current_src[1::2]


def test_context_files_largest_by_default_and_the_publisher_padding():
    two, one = _read(), _read(context=1)
    assert two.items[1].src_context == ["It was built in 1900.", "The tower is newer."]
    assert two.items[0].src_context == []  # segment 1 < 2: the script writes two empty lines
    assert one.items[0].src_context == ["The bridge is old."]
    assert one.items[0].tgt_context == ["Le pont est vieux."]
    assert one.items[2].src_context == []  # first line of its document
    assert _read(context=2).items[3].tgt_context == ["Les garçons sont en retard et ils courent.",
                                                     "Nous avons attendu une heure."]
    assert all(i.src_context == [] for i in _read(context=0).items)
    assert "(only c1, c2)" in _error(EXTRACTED, context=3)


def test_numbered_context_files_win_over_the_plain_name(tmp_path):
    folder = _copy_extracted(tmp_path)  # the repository's folder also holds OpenSubs.context.* (one line each)
    for side in ("src", "trg"):
        shutil.copy(folder / f"Tiny.c1.context.{side}", folder / f"Tiny.context.{side}")
    assert [i.src_context for i in _read(folder).items] == [i.src_context for i in _read().items]
    (folder / "Tiny.c2.context.src").unlink()
    assert [i.src_context for i in _read(folder).items] == [i.src_context for i in _read(context=1).items]


def test_prefix_and_file_paths_and_the_plain_context_name(tmp_path):
    rows = [(i.src_context, i.src, i.tgt_context, i.candidates) for i in _read().items]
    for path in (EXTRACTED / "Tiny", EXTRACTED / "Tiny.current.trg"):
        assert [(i.src_context, i.src, i.tgt_context, i.candidates) for i in _read(path).items] == rows
    folder = tmp_path / "dataset" / "extracted"  # process.sh: testset.N.{current,context}.*
    folder.mkdir(parents=True)
    for side in ("src", "trg"):
        shutil.copy(EXTRACTED / f"Tiny.current.{side}", folder / f"testset.2.current.{side}")
        shutil.copy(EXTRACTED / f"Tiny.c2.context.{side}", folder / f"testset.2.context.{side}")
    shutil.copy(FIXTURES / "testset-en-fr.json", folder.parent / "testset-en-fr.json")
    testset = _read(folder)
    assert testset.name == "testset.2"
    assert [(i.src_context, i.src, i.tgt_context, i.candidates) for i in testset.items] == rows


def test_without_json_file_order_and_derived_pronouns(tmp_path):
    folder = _copy_extracted(tmp_path, with_json=False)
    testset = _read(folder, context=1)
    assert testset.groupings == ("pronoun",)
    assert [i.src for i in testset.items] == _lines(EXTRACTED / "Tiny.current.src")[::2]
    assert [i.tags["pronoun"] for i in testset.items] == ["il", "elle", "elles", "ils", "ils"]
    assert [i.tags["src_pronoun"] for i in testset.items] == ["it", "it", "they", "they", "they"]
    assert [i.src for i in _read(EXTRACTED, json=False).items] == [i.src for i in testset.items]


@pytest.mark.parametrize("correct, contrastive, pronoun", [
    ("Ces obligations sont-elles bidon ?", "Ces obligations sont-ils bidon ?", "elles"),
    ("S'ils l'attrapent, ils le tueront.", "S'ils l'attrapent, elles le tueront.", "ils"),
    ("Je crois qu'elle viendra.", "Je crois qu'il viendra.", "elle"),
    ("Le chat dort.", "Le chien dort.", None),
])
def test_changed_pronoun(correct, contrastive, pronoun):
    assert changed_pronoun(correct, contrastive) == pronoun


def test_errors_as_a_single_object(tmp_path):
    folder = _copy_extracted(tmp_path)
    records = [dict(r, errors=r["errors"][0]) for r in RECORDS]
    (tmp_path / "testset-en-fr.json").write_text(json.dumps(records), encoding="utf-8")
    assert [i.candidates for i in _read(folder).items] == [i.candidates for i in _read().items]


# --- publisher-script equivalence -----------------------------------------------------------------

SCORES = [[-1.0, -2.0], [-0.5, -0.5], [-3.0, -1.0], [-0.125, -0.25], [-2.0, -2.0]]  # log-probs, two ties


def test_scores_file_gives_evaluate_py_the_same_decisions(tmp_path):
    testset = _read()
    reference = [row[0] > max(row[1:]) for row in SCORES]
    assert reference == [True, False, False, True, False]
    path = tmp_path / "Tiny.scores"
    _write(path, scores_lines(SCORES))
    lines = _lines(path)
    assert evaluate_py(RECORDS, lines) == reference
    assert evaluate_py(RECORDS, [str(-float(x)) for x in lines], maximize=True) == reference
    assert decisions(testset, SCORES) == reference
    assert summarize(testset, reference)["by"]["pronoun"] == {"elle": 0.0, "elles": 0.0, "il": 1.0, "ils": 0.5}


# --- bad input --------------------------------------------------------------------------------------

def test_malformed_json_and_record_count(tmp_path):
    folder = _copy_extracted(tmp_path)
    (tmp_path / "testset-en-fr.json").write_text('[\n{"segment id": 1,,}]', encoding="utf-8")
    assert "testset-en-fr.json:2: malformed JSON" in _error(folder)
    (tmp_path / "testset-en-fr.json").write_text(json.dumps(RECORDS + RECORDS[:1]), encoding="utf-8")
    assert "5 examples but testset-en-fr.json has 6 records" in _error(folder)


def test_json_from_another_extraction(tmp_path):
    folder = _copy_extracted(tmp_path)
    records = [dict(r) for r in RECORDS]
    records[1]["src segment"] = "Something else."
    (tmp_path / "testset-en-fr.json").write_text(json.dumps(records), encoding="utf-8")
    assert "Tiny.current.src:3: source differs from 'src segment' of testset-en-fr.json record 2" in _error(folder)
    assert len(_read(folder, check_source=False).items) == 5


def test_line_counts_and_missing_context(tmp_path):
    folder = _copy_extracted(tmp_path, with_json=False)
    trg = _lines(folder / "Tiny.current.trg")
    _write(folder / "Tiny.current.trg", trg[:-1])
    assert "Tiny.current.trg:10: 9 lines but Tiny.current.src needs 10" in _error(folder)
    _write(folder / "Tiny.current.trg", trg)
    _write(folder / "Tiny.c2.context.src", _lines(folder / "Tiny.c2.context.src") + ["extra"])
    assert "not a multiple of the 10 current lines" in _error(folder)
    src = _lines(folder / "Tiny.current.src")
    _write(folder / "Tiny.current.src", src[:1] + ["Not the same."] + src[2:])
    assert "Tiny.current.src:2: source differs from the line before" in _error(folder)
    _write(folder / "Tiny.current.src", src)
    for path in folder.glob("Tiny.c*.context.*"):
        path.unlink()
    assert "missing context files" in _error(folder)
    assert len(_read(folder, context=0).items) == 5
    assert "no *.current.src" in _error(tmp_path)
