"""The Lopes et al. (2020) En->Fr reader on hand-made fixtures in the publisher's layout.

Fixtures (tests/fixtures/lopes, invented sentences), laid out as the
publisher's repository: ``testset-en-fr.json`` (records pronoun by pronoun, as
``filter_examples.py`` writes them, so not grouped by document), ``documents/``
(as ``setup_opensubs.sh`` lays them out), and ``Tiny.current.{src,trg}`` +
``Tiny.c{1,2}.context.{src,trg}`` as ``extract_current_and_context.py -c N``
writes them: ``extracted/`` by the older script (documents in order of first
appearance), ``extracted-current/`` by the current one (documents sorted by id).
"""

from __future__ import annotations

import json
import logging
import shutil
from collections import Counter
from pathlib import Path

import pytest

from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.evaluate.contrastive import decisions, summarize
from ctxmt_cli.evaluate.testsets import load_testsets, scores_lines
from ctxmt_cli.evaluate.testsets.lopes import PRONOUNS, changed_pronoun, extraction_order, read_lopes

# the publisher's README scores with ContraPro's evaluate.py: one reimplementation serves both
from tests.unit.test_testsets_contrapro import evaluate_py

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "lopes"
EXTRACTED = FIXTURES / "extracted"
CURRENT = FIXTURES / "extracted-current"
RECORDS = json.loads((FIXTURES / "testset-en-fr.json").read_text(encoding="utf-8"))
REAL = Path(__file__).resolve().parents[3] / "shared" / "data" / "lopes" / "OpenSubs"


# --- the publisher's rules, reimplemented -------------------------------------------------------

def extract_order(records: list[dict], sort_documents: bool = False) -> list[int]:
    """extract_current_and_context.py's order: examples grouped by document id (json order inside one),
    documents by first appearance (older script) or sorted by id (current script)."""
    docs: dict = {}
    for index, record in enumerate(records):
        docs.setdefault(record["document id"], []).append(index)
    return [i for doc in (sorted(docs) if sort_documents else docs) for i in docs[doc]]


def extract(records: list[dict], documents: Path, folder: Path, sizes=(1, 2), sort_documents: bool = False) -> Path:
    """What ``extract_current_and_context.py JSON documents/ PREFIX -c N`` writes for each N in ``sizes``, named
    as the repository ships it: ``folder/Tiny.current.{src,trg}`` and ``folder/Tiny.cN.context.{src,trg}``.

    Per example the correct line then the contrastive one, each with the same N context lines of its
    document, oldest first; all N empty when ``segment id < N``.
    """
    folder.mkdir(parents=True, exist_ok=True)
    out: dict = {}
    for index in extract_order(records, sort_documents):
        record, seg = records[index], records[index]["segment id"]
        doc = record["document id"]
        en, fr = (_lines(documents / doc[:4] / f"{doc}.{lang}") for lang in ("en", "fr"))
        for target in (fr[seg], record["errors"][0]["contrastive"]):
            out.setdefault("current.src", []).append(en[seg])
            out.setdefault("current.trg", []).append(target)
            for n in sizes:
                window = [("", "")] * n if seg < n else [(en[i], fr[i]) for i in range(seg - n, seg)]
                out.setdefault(f"c{n}.context.src", []).extend(s for s, _ in window)
                out.setdefault(f"c{n}.context.trg", []).extend(t for _, t in window)
    for name, lines in out.items():
        _write(folder / f"Tiny.{name}", lines)
    return folder


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
    assert len(testset.items) == len(RECORDS) == 6
    assert [i.tags["pronoun"] for i in testset.items] == ["il", "elle", "elle", "ils", "ils", "elles"]
    assert [i.tags["distance"] for i in testset.items] == [1, 1, 0, 0, 2, 1]
    assert [i.tags["src_pronoun"] for i in testset.items] == ["it", "it", "it", "they", "they", "they"]
    current_trg = _lines(EXTRACTED / "Tiny.current.trg")
    for item, record in zip(testset.items, RECORDS, strict=True):  # json order, scored lines from the extracted files
        assert item.src == record["src segment"]
        assert item.candidates[1] == record["errors"][0]["contrastive"]
        assert item.candidates[0] in current_trg and item.candidates[0] != record["ref segment"]
    assert {p.name for p in testset.files} == {"testset-en-fr.json", "Tiny.current.src", "Tiny.current.trg",
                                               "Tiny.c2.context.src", "Tiny.c2.context.trg"}


def test_fixtures_are_what_both_script_versions_write(tmp_path):
    assert extraction_order(RECORDS) == extract_order(RECORDS) == [0, 1, 5, 2, 3, 4]
    assert extract_order(RECORDS, sort_documents=True) == [2, 3, 4, 0, 1, 5]  # 1961_... sorts before 1972_...
    for folder, sort in ((EXTRACTED, False), (CURRENT, True)):
        written = extract(RECORDS, FIXTURES / "documents", tmp_path / folder.name, sort_documents=sort)
        for path in folder.iterdir():
            assert _lines(path) == _lines(written / path.name), path
        current_src = _lines(folder / "Tiny.current.src")
        assert current_src[::2] == [RECORDS[i]["src segment"] for i in extract_order(RECORDS, sort)]
        assert current_src[::2] == current_src[1::2]


def _item_rows(testset) -> list[tuple]:
    return [(i.src_context, i.src, i.tgt_context, i.candidates, i.tags) for i in testset.items]


@pytest.mark.parametrize("context", [None, 1, 2, 0])
def test_both_script_orders_and_json_order_read_alike(tmp_path, context):
    """Files of the older script, of the current one (refused before: neither order it tried matched) and in
    json order give the same items, in json order."""
    older = _item_rows(_read(EXTRACTED, context=context))
    assert _item_rows(_read(CURRENT, context=context)) == older
    folder = tmp_path / "json-order" / "extracted"  # the same examples in json order, the json one folder up
    folder.mkdir(parents=True)
    shutil.copy(FIXTURES / "testset-en-fr.json", folder.parent)
    where = extract_order(RECORDS).index  # record index -> its example's place in the older script's files
    for path in EXTRACTED.iterdir():
        lines = _lines(path)
        size = len(lines) // len(RECORDS)  # lines per example: 2 current, 2N context
        in_json_order = [x for i in range(len(RECORDS)) for x in lines[size * where(i): size * (where(i) + 1)]]
        _write(folder / path.name, in_json_order)
    assert _lines(folder / "Tiny.current.src")[::2] == [r["src segment"] for r in RECORDS]
    assert _item_rows(_read(folder, context=context)) == older


def test_shared_lines_go_to_their_own_document(tmp_path):
    """Two records with the same source and contrastive line (in different documents, tagged apart) land on
    the examples of their own documents in either script's order."""
    documents = tmp_path / "documents"
    texts = {"2001_1_1": ["A one.", "Shared it.", "A two."], "1999_2_2": ["B one.", "Shared it.", "B two."]}
    for doc, lines in texts.items():
        (documents / doc[:4]).mkdir(parents=True, exist_ok=True)
        _write(documents / doc[:4] / f"{doc}.en", lines)
        _write(documents / doc[:4] / f"{doc}.fr", [f"FR {line}" for line in lines])

    def record(doc, seg, distance):
        return {"document id": doc, "segment id": seg, "src segment": texts[doc][seg], "ante distance": distance,
                "errors": [{"contrastive": "Elle partagée."}], "ref pronoun": "il", "src pronoun": "it"}
    records = [record("2001_1_1", 1, 1), record("1999_2_2", 2, 0), record("1999_2_2", 1, 3), record("2001_1_1", 2, 0),
               record("2001_1_1", 0, 0)]
    (tmp_path / "testset-en-fr.json").write_text(json.dumps(records), encoding="utf-8")
    for sort in (False, True):
        folder = extract(records, documents, tmp_path / f"sorted-{sort}", sort_documents=sort)
        testset = _read(folder, json=tmp_path / "testset-en-fr.json", context=1)
        assert [i.tags["distance"] for i in testset.items] == [1, 0, 3, 0, 0]
        assert testset.items[0].src_context == ["A one."] and testset.items[2].src_context == ["B one."]


def test_context_files_largest_by_default_and_the_publisher_padding():
    two, one = _read(), _read(context=1)
    assert two.items[1].src_context == ["It was built in 1900.", "The tower is newer."]
    assert two.items[0].src_context == []  # segment 1 < 2: the script writes two empty lines
    assert one.items[0].src_context == ["The bridge is old."]
    assert one.items[0].tgt_context == ["Le pont est vieux."]
    assert one.items[3].src_context == []  # first line of its document
    assert _read(context=2).items[4].tgt_context == ["Les garçons sont en retard et ils courent.",
                                                     "Nous avons attendu une heure."]
    assert all(i.src_context == [] for i in _read(context=0).items)
    assert "(only c1, c2)" in _error(EXTRACTED, context=3)


def test_model_context_picks_the_file_of_its_size():
    """Without --context, a model with N context sentences gets the cN file: the publisher blanks the whole
    window of an example fewer than N lines into its document, so a trimmed c2 file is not the c1 file."""
    by_model, by_option, default = _read(model_context=1), _read(context=1), _read()
    assert _item_rows(by_model) == _item_rows(by_option)
    assert {p.name for p in by_model.files} >= {"Tiny.c1.context.src", "Tiny.c1.context.trg"}
    trimmed = [i.src_context[-1:] for i in default.items]                 # the c2 file cut to one line
    differ = [n for n, (i, t) in enumerate(zip(by_model.items, trimmed, strict=True)) if i.src_context != t]
    assert differ == [n for n, r in enumerate(RECORDS) if 1 <= r["segment id"] < 2] == [0]
    assert by_model.items[0].src_context == ["The bridge is old."] and default.items[0].src_context == []
    assert _item_rows(_read(model_context=2)) == _item_rows(default)
    assert _item_rows(_read(model_context=3)) == _item_rows(default)      # wider than every file: the largest
    assert _item_rows(_read(context=2, model_context=1)) == _item_rows(default)  # --context wins
    sentence = _read(model_context=0)
    assert all(i.src_context == [] == i.tgt_context for i in sentence.items)
    assert not any("context" in p.name for p in sentence.files)


def test_a_json_found_is_announced_in_one_line(caplog, tmp_path):
    with caplog.at_level(logging.WARNING, logger="ctxmt_cli.evaluate.testsets.lopes"):
        _read()
    (line,) = [r.getMessage() for r in caplog.records]
    assert "testset-en-fr.json" in line and "one folder above" in line and "`json` none" in line
    assert "\n" not in line
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="ctxmt_cli.evaluate.testsets.lopes"):
        _read(json=FIXTURES / "testset-en-fr.json")
        _read(json="none")
    assert not caplog.records
    assert "`json`" in _error(EXTRACTED, json=tmp_path / "missing.json")


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
    # the campaign example changes an adjective before the pronoun: still tagged elle, no None group
    assert [i.tags["pronoun"] for i in testset.items] == ["il", "elle", "elles", "elle", "ils", "ils"]
    assert [i.tags["src_pronoun"] for i in testset.items] == ["it", "it", "they", "it", "they", "they"]
    for option in (False, "none", "None"):
        assert [i.src for i in _read(EXTRACTED, json=option).items] == [i.src for i in testset.items]
    by_record = {(r["src segment"], r["errors"][0]["contrastive"]): r["ref pronoun"].lower() for r in RECORDS}
    assert [i.tags["pronoun"] for i in testset.items] == [by_record[i.src, i.candidates[1]] for i in testset.items]


@pytest.mark.parametrize("correct, contrastive, pronoun", [
    ("Ces obligations sont-elles bidon ?", "Ces obligations sont-ils bidon ?", "elles"),
    ("S'ils l'attrapent, ils le tueront.", "S'ils l'attrapent, elles le tueront.", "ils"),
    ("Je crois qu'elle viendra.", "Je crois qu'il viendra.", "elle"),
    ("Le chat dort.", "Le chien dort.", None),
    # an agreeing adjective changed earlier in the sentence (the published set has such lines)
    ("La campagne a été longue et ardue, et elle s 'achève.", "La campagne a été long et ardue, et il s 'achève.",
     "elle"),
    ("Elles sont belles et elles dansent.", "Ils sont beaux et ils dansent.", "elles"),
])
def test_changed_pronoun(correct, contrastive, pronoun):
    assert changed_pronoun(correct, contrastive) == pronoun


def test_errors_as_a_single_object(tmp_path):
    folder = _copy_extracted(tmp_path)
    records = [dict(r, errors=r["errors"][0]) for r in RECORDS]
    (tmp_path / "testset-en-fr.json").write_text(json.dumps(records), encoding="utf-8")
    assert [i.candidates for i in _read(folder).items] == [i.candidates for i in _read().items]


# --- publisher-script equivalence -----------------------------------------------------------------

SCORES = [[-1.0, -2.0], [-0.5, -0.5], [-0.75, -1.5], [-3.0, -1.0], [-0.125, -0.25], [-2.0, -2.0]]  # two ties


def test_scores_file_gives_evaluate_py_the_same_decisions(tmp_path):
    testset = _read()
    reference = [row[0] > max(row[1:]) for row in SCORES]
    assert reference == [True, False, True, False, True, False]
    path = tmp_path / "Tiny.scores"
    _write(path, scores_lines(SCORES))
    lines = _lines(path)
    assert evaluate_py(RECORDS, lines) == reference
    assert evaluate_py(RECORDS, [str(-float(x)) for x in lines], maximize=True) == reference
    assert decisions(testset, SCORES) == reference
    assert summarize(testset, reference)["by"]["pronoun"] == {"elle": 0.5, "elles": 0.0, "il": 1.0, "ils": 0.5}


# --- bad input --------------------------------------------------------------------------------------

def test_malformed_json_and_record_count(tmp_path):
    folder = _copy_extracted(tmp_path)
    (tmp_path / "testset-en-fr.json").write_text('[\n{"segment id": 1,,}]', encoding="utf-8")
    assert "testset-en-fr.json:2: malformed JSON" in _error(folder)
    (tmp_path / "testset-en-fr.json").write_text(json.dumps(RECORDS + RECORDS[:1]), encoding="utf-8")
    message = _error(folder)
    assert "6 examples but testset-en-fr.json has 7 records" in message and "`json` PATH" in message


def test_json_from_another_extraction(tmp_path):
    folder = _copy_extracted(tmp_path)
    records = [dict(r) for r in RECORDS]
    records[1]["src segment"] = "Something else."
    (tmp_path / "testset-en-fr.json").write_text(json.dumps(records), encoding="utf-8")
    message = _error(folder)
    assert "Tiny.current.src:3: example 2 " in message and "matches no record of testset-en-fr.json" in message
    assert "`json` PATH" in message and "`json` none" in message
    assert "json=PATH" not in message and "check_source" not in message  # options the command line lacks
    assert len(_read(folder, check_source=False).items) == 6
    assert len(_read(folder, json="none").items) == 6


def test_line_counts_and_missing_context(tmp_path):
    folder = _copy_extracted(tmp_path, with_json=False)
    trg = _lines(folder / "Tiny.current.trg")
    _write(folder / "Tiny.current.trg", trg[:-1])
    assert "Tiny.current.trg:12: 11 lines but Tiny.current.src needs 12" in _error(folder)
    _write(folder / "Tiny.current.trg", trg)
    _write(folder / "Tiny.c2.context.src", _lines(folder / "Tiny.c2.context.src") + ["extra"])
    assert "not a multiple of the 12 current lines" in _error(folder)
    src = _lines(folder / "Tiny.current.src")
    _write(folder / "Tiny.current.src", src[:1] + ["Not the same."] + src[2:])
    assert "Tiny.current.src:2: source differs from the line before" in _error(folder)
    _write(folder / "Tiny.current.src", src)
    for path in folder.glob("Tiny.c*.context.*"):
        path.unlink()
    assert "missing context files" in _error(folder)
    assert len(_read(folder, context=0).items) == 6
    assert len(_read(folder, model_context=0).items) == 6  # a sentence-level model needs no context files
    assert "no *.current.src" in _error(tmp_path)


# --- the publisher's real files (outside the repository; skipped when absent) -------------------------

def _real(*parts: str) -> Path:
    path = REAL.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"the publisher's real Lopes files are not at {path} (put the repository's OpenSubs/ folder, "
                    "with testset-en-fr.json and extracted/, at ../shared/data/lopes/OpenSubs)")
    return path


def test_real_files_derived_pronouns_are_the_jsons():
    extracted = _real("extracted")
    testset = _read(extracted / "OpenSubs", json="none", context=0)
    counts = Counter(i.tags["pronoun"] for i in testset.items)
    print(f"real OpenSubs: {len(testset.items)} items, derived pronouns {dict(counts)}")
    assert None not in counts and set(counts) == set(PRONOUNS)
    assert len(set(counts.values())) == 1  # the published set is balanced: as many of each pronoun
    records = json.loads(_real("testset-en-fr.json").read_text(encoding="utf-8"))
    by_json = _read(extracted / "OpenSubs", json=REAL / "testset-en-fr.json", context=0)
    assert len(by_json.items) == len(records) == len(testset.items)
    derived = {(i.src, i.candidates[1]): i.tags["pronoun"] for i in testset.items}
    assert all(derived[i.src, i.candidates[1]] == i.tags["pronoun"] for i in by_json.items)


def test_real_files_c1_is_not_the_trimmed_c3():
    extracted, records = _real("extracted"), json.loads(_real("testset-en-fr.json").read_text(encoding="utf-8"))
    c1 = _read(extracted / "OpenSubs", json=REAL / "testset-en-fr.json", model_context=1)
    c3 = _read(extracted / "OpenSubs", json=REAL / "testset-en-fr.json", context=3)
    assert "OpenSubs.c1.context.src" in {p.name for p in c1.files}
    differ = {n for n, (a, b) in enumerate(zip(c1.items, c3.items, strict=True)) if a.src_context != b.src_context[-1:]}
    print(f"real OpenSubs: {len(differ)} items differ between c1 and the c3 file trimmed to 1")
    assert differ and all(1 <= records[n]["segment id"] < 3 for n in differ)


def test_real_files_in_the_current_scripts_order(tmp_path):
    """The older files reordered as the current script writes them (documents sorted by id) read alike."""
    extracted, records = _real("extracted"), json.loads(_real("testset-en-fr.json").read_text(encoding="utf-8"))
    older, current = extract_order(records), extract_order(records, sort_documents=True)
    assert older != current
    place = {index: k for k, index in enumerate(older)}  # record -> its example's place in the older files
    folder = tmp_path / "extracted"
    folder.mkdir()
    for name in ("current.src", "current.trg", "c1.context.src", "c1.context.trg"):
        lines = _lines(extracted / f"OpenSubs.{name}")
        size = len(lines) // len(records)
        _write(folder / f"OpenSubs.{name}", [x for i in current for x in lines[size * place[i]: size * (place[i] + 1)]])
    options = {"json": REAL / "testset-en-fr.json", "context": 1}
    assert _item_rows(_read(folder / "OpenSubs", **options)) == _item_rows(_read(extracted / "OpenSubs", **options))
