"""Streaming corpus readers: every format on a faithful fixture, and every user error."""

from __future__ import annotations

import html
import re
import tarfile
from pathlib import Path

import pytest
from hypothesis import given

from ctxmt_cli.data.formats import (
    count_lines,
    iter_parallel_documents,
    iter_parallel_located,
    iter_source_documents,
)
from ctxmt_cli.errors import CtxmtError
from tests.hostile_inputs import jsonl_files, text_files, xml_files

FIX = Path(__file__).parents[1] / "fixtures" / "corpora"
SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data"


def write(path: Path, text: str | bytes) -> Path:
    if isinstance(text, str):
        text = text.encode("utf-8")
    path.write_bytes(text)
    return path


# -- readers ------------------------------------------------------------------------------


def test_text_blank_lines_separate_documents():
    docs = list(iter_parallel_documents("text", FIX / "text/news.en", FIX / "text/news.de"))
    assert [len(d) for d in docs] == [3, 2, 1]
    assert docs[1][0] == ("A storm hit the coast last night.",
                          "Ein Sturm traf letzte Nacht die Küste.")
    src_only = list(iter_source_documents("text", FIX / "text/news.en"))
    assert src_only == [[s for s, _ in d] for d in docs]


def test_text_docids_boundaries_on_id_change():
    located = list(iter_parallel_located("text", FIX / "text/talks.en", FIX / "text/talks.de",
                                         FIX / "text/talks.docids"))
    # bees-001 x3, goats-002 x2, bees-001 again: a new document at every change
    assert [lines for _, lines in located] == [[1, 2, 3], [4, 5], [6]]
    assert located[2][0] == [("Thank you.", "Danke.")]


def test_text_docids_blank_line_is_not_a_separator(tmp_path):
    src = write(tmp_path / "a.en", "one\n\ntwo\n")
    tgt = write(tmp_path / "a.de", "eins\nzwei\ndrei\n")
    ids = write(tmp_path / "a.docids", "d\nd\nd\n")
    with pytest.raises(CtxmtError, match=r"a\.en:2: empty sentence"):
        list(iter_parallel_documents("text", src, tgt, ids))


def test_jsonl_documents_by_doc_id():
    path = FIX / "jsonl/corpus.jsonl"
    docs = list(iter_parallel_documents("jsonl", path, path))
    assert [len(d) for d in docs] == [2, 3, 1]
    assert docs[1][2] == ('She lived in "Lyon" & Paris.', "Elle vivait à « Lyon » et à Paris.")
    assert list(iter_source_documents("jsonl", path))[0] == ["I bought a new car.", "It is red."]


def test_iwslt_tags_talks_and_tag_lines_skipped():
    en, de = FIX / "iwslt/train.tags.en-de.en", FIX / "iwslt/train.tags.en-de.de"
    located = list(iter_parallel_located("iwslt-tags", en, de))
    assert [len(d) for d, _ in located] == [3, 2]
    assert located[1][0][1] == ("What do you hear?", "Was hören Sie?")
    assert located[0][1] == [7, 8, 9]  # source line numbers after the tag block
    assert all("<" not in s for d, _ in located for pair in d for s in pair)
    assert len(list(iter_source_documents("iwslt-tags", de))) == 2


def test_iwslt_xml_matched_by_docid_and_seg_id(tmp_path):
    en = FIX / "iwslt/IWSLT17.TED.dev2010.en-de.en.xml"
    de = FIX / "iwslt/IWSLT17.TED.dev2010.en-de.de.xml"
    docs = list(iter_parallel_documents("iwslt-xml", en, de))
    assert [len(d) for d in docs] == [3, 2]
    assert docs[0][0][0] == "Bees & flowers evolved together."
    assert docs[0][1][0] == "They said: \"We can't live without them.\""
    assert docs[0][2] == ("Is 3 < 5? Yes.", "Ist 3 < 5? Ja.")
    assert docs[1][0][0] == "Close your eyes  for a moment."          # as published: only the ends stripped
    # seg order on the target side does not matter: segs are matched by id
    lines = de.read_text(encoding="utf-8").splitlines()
    i, j = (k for k, line in enumerate(lines) if line.startswith('<seg id="1"> Sch')
            or line.startswith('<seg id="2"> Was'))
    lines[i], lines[j] = lines[j], lines[i]
    swapped = write(tmp_path / "de.xml", "\n".join(lines) + "\n")
    assert list(iter_parallel_documents("iwslt-xml", en, swapped)) == docs


def test_iwslt_xml_real_archive(tmp_path):
    archive = SHARED / "iwslt17" / "IWSLT17.TED.test.en-de.tgz"
    if not archive.is_file():
        pytest.skip(f"real IWSLT17 archive not available at {archive}")
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if m.name.endswith(".en.xml")]
        safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        tar.extractall(tmp_path, members=members, **safe)
    files, doubled = sorted(tmp_path.rglob("*.en.xml")), []
    assert {f.name for f in files} >= {"IWSLT17.TED.tst2016.en-de.en.xml",
                                       "IWSLT17.TED.tst2017.en-de.en.xml"}
    for f in files:
        text = f.read_text(encoding="utf-8")
        docs = list(iter_source_documents("iwslt-xml", f))
        assert len(docs) == text.count("<doc ")
        assert sum(len(d) for d in docs) == text.count("<seg ")
        sents = [s for d in docs for s in d]
        assert all(s and s == s.strip() and "<" not in s for s in sents)
        assert not any("&amp;" in s or "&quot;" in s for s in sents)
        # every segment as the publisher wrote it: only the whitespace around it stripped (runs of spaces
        # inside some segments stay; collapsing them changed references)
        published = [html.unescape(t).strip() for t in re.findall(r"<seg[^>]*>(.*?)</seg>", text)]
        assert sents == published
        doubled.extend(s for s in sents if "  " in s)
    assert doubled, "the real files hold segments with inner double spaces (the case this test guards)"


def test_iwslt_xml_keeps_a_segments_inner_spaces(tmp_path):
    en = write(tmp_path / "a.en.xml", '<doc docid="1">\n<seg id="1">  Two  spaces &amp;  more\t</seg>\n'
               '<seg id="2"> spans\nlines </seg>\n</doc>\n')
    assert list(iter_source_documents("iwslt-xml", en)) == [["Two  spaces &  more", "spans lines"]]


def test_voita_groups():
    docs = list(iter_parallel_documents("voita", FIX / "voita/train.en", FIX / "voita/train.ru"))
    assert [len(d) for d in docs] == [4, 4]
    assert docs[0][3] == ("no .", "нет .")
    assert list(iter_source_documents("voita", FIX / "voita/train.en"))[1][0] == "i found the book ."


def test_count_lines(tmp_path):
    assert count_lines(write(tmp_path / "a", "x\ny\n")) == 2
    assert count_lines(write(tmp_path / "b", "x\ny")) == 2
    assert count_lines(write(tmp_path / "c", "")) == 0


# -- errors -------------------------------------------------------------------------------


def test_missing_file_names_path(tmp_path):
    with pytest.raises(CtxmtError, match=r"target file not found: .*nope\.de"):
        list(iter_parallel_documents("text", FIX / "text/news.en", tmp_path / "nope.de"))


def test_unknown_format():
    with pytest.raises(CtxmtError, match="unknown corpus format 'tsv'"):
        list(iter_source_documents("tsv", FIX / "text/news.en"))


def test_line_count_mismatch(tmp_path):
    src = write(tmp_path / "a.en", "one\ntwo\nthree\n")
    tgt = write(tmp_path / "a.de", "eins\nzwei\n")
    with pytest.raises(CtxmtError) as e:
        list(iter_parallel_documents("text", src, tgt))
    msg = str(e.value)
    assert "a.en has 3 lines" in msg and "a.de has 2 lines" in msg and "line is 3" in msg
    assert "\n" not in msg


def test_text_structure_mismatch(tmp_path):
    src = write(tmp_path / "a.en", "one\n\ntwo\n")
    tgt = write(tmp_path / "a.de", "eins\nzwei\ndrei\n")
    with pytest.raises(CtxmtError, match=r"structure differs at line 2: .*a\.en has a blank"):
        list(iter_parallel_documents("text", src, tgt))


def test_non_utf8_gives_file_line_and_iconv_hint(tmp_path):
    src = write(tmp_path / "a.en", b"fine\ncaf\xe9 au lait\n")
    tgt = write(tmp_path / "a.de", "gut\nKaffee\n")
    with pytest.raises(CtxmtError, match=r"a\.en:2: not valid UTF-8.*iconv -f LATIN1 -t UTF-8"):
        list(iter_parallel_documents("text", src, tgt))


def test_jsonl_empty_src_and_bad_json(tmp_path):
    bad = write(tmp_path / "c.jsonl", '{"doc_id": 1, "src": "a", "tgt": "b"}\n'
                                      '{"doc_id": 1, "src": "  ", "tgt": "b"}\n')
    with pytest.raises(CtxmtError, match=r'c\.jsonl:2: empty "src"'):
        list(iter_parallel_documents("jsonl", bad, bad))
    broken = write(tmp_path / "d.jsonl", '{"doc_id": 1, "src": "a", "tgt": "b"\n')
    with pytest.raises(CtxmtError, match=r"d\.jsonl:1: invalid JSON"):
        list(iter_source_documents("jsonl", broken))
    missing = write(tmp_path / "e.jsonl", '{"doc_id": 1, "src": "a"}\n')
    with pytest.raises(CtxmtError, match=r'e\.jsonl:1: missing key\(s\) tgt'):
        list(iter_parallel_documents("jsonl", missing, missing))


def test_iwslt_tags_misaligned_talk(tmp_path):
    en = FIX / "iwslt/train.tags.en-de.en"
    lines = (FIX / "iwslt/train.tags.en-de.de").read_text(encoding="utf-8").splitlines()
    del lines[lines.index("Was hören Sie?")]
    de = write(tmp_path / "train.tags.en-de.de", "\n".join(lines) + "\n")
    with pytest.raises(CtxmtError) as e:
        list(iter_parallel_documents("iwslt-tags", en, de))
    msg = str(e.value)
    assert "has 2 segments" in msg and "has 1" in msg
    assert f"{en}:10" in msg and f"{de}:12" in msg  # both talks' first lines


def test_iwslt_xml_doc_without_segs_and_docid_mismatch(tmp_path):
    en = write(tmp_path / "a.en.xml", '<doc docid="1">\n<seg id="1"> a </seg>\n</doc>\n'
                                      '<doc docid="2">\n<talkid>2</talkid>\n</doc>\n')
    with pytest.raises(CtxmtError, match=r"a\.en\.xml:4: empty document \(doc 2 has no <seg>\)"):
        list(iter_source_documents("iwslt-xml", en))
    en2 = write(tmp_path / "b.en.xml", '<doc docid="1">\n<seg id="1"> a </seg>\n</doc>\n')
    de2 = write(tmp_path / "b.de.xml", '<doc docid="7">\n<seg id="1"> b </seg>\n</doc>\n')
    with pytest.raises(CtxmtError, match=r"b\.en\.xml:1 is doc 1 but .*b\.de\.xml:1 is doc 7"):
        list(iter_parallel_documents("iwslt-xml", en2, de2))
    de3 = write(tmp_path / "c.de.xml", '<doc docid="1">\n<seg id="9"> b </seg>\n</doc>\n')
    with pytest.raises(CtxmtError, match=r"b\.en\.xml:2 has seg id 1"):
        list(iter_parallel_documents("iwslt-xml", en2, de3))


def test_voita_empty_sentence_and_group_mismatch(tmp_path):
    en = write(tmp_path / "t.en", "a . _eos b .\nc . _eos  _eos d .\n")
    ru = write(tmp_path / "t.ru", "а . _eos б .\nв . _eos г . _eos д .\n")
    with pytest.raises(CtxmtError, match=r"t\.en:2: empty sentence"):
        list(iter_parallel_documents("voita", en, ru))
    en2 = write(tmp_path / "u.en", "a . _eos b .\nc . _eos d .\n")
    ru2 = write(tmp_path / "u.ru", "а . _eos б .\nв . _eos г . _eos д .\n")
    with pytest.raises(CtxmtError, match=r"at line 2: .*u\.en has 2 but .*u\.ru has 3"):
        list(iter_parallel_documents("voita", en2, ru2))


# -- maruf (Maruf, Martins and Haffari 2019: a <d> line before each document) ---------------

MARUF = FIX / "maruf"
MARUF_EN, MARUF_DE = MARUF / "concatenated_en2de_train_en.txt", MARUF / "concatenated_en2de_train_de.txt"
# the real files' sentence and document counts (the <d> lines are not sentences: each file has
# sentences + documents lines, e.g. IWSLT 2017 dev 8967 + 93 = 9060)
MARUF_REAL = {("IWSLT2017", "dev"): (8967, 93), ("IWSLT2017", "test"): (2271, 23),
              ("Europarl7", "dev"): (3587, 240), ("Europarl7", "test"): (5134, 360)}


def maruf_pair(tmp_path: Path, en: list[str], de: list[str]) -> tuple[Path, Path]:
    return (write(tmp_path / "m_en.txt", "".join(s + "\n" for s in en)),
            write(tmp_path / "m_de.txt", "".join(s + "\n" for s in de)))


def test_maruf_documents_start_at_d_lines():
    located = list(iter_parallel_located("maruf", MARUF_EN, MARUF_DE))
    assert [len(d) for d, _ in located] == [3, 2, 1]
    assert [lines for _, lines in located] == [[2, 3, 4], [6, 7], [9]]   # <d> lines 1, 5, 8 are no sentences
    # CRLF line ends and the publisher's stray edge spaces are gone; inner spaces are SentencePiece's business
    assert located[0][0][0] == ("Last spring I planted a small garden.",
                                "Letzten Frühling habe ich einen kleinen Garten angelegt.")
    assert located[0][0][1][0] == "The tomatoes grew  faster than I expected."
    assert located[1][0] == [("Thank you.", "Vielen Dank."), ("(Applause)", "(Applaus)")]
    assert list(iter_source_documents("maruf", MARUF_DE)) == [[t for _, t in d] for d, _ in located]


def test_maruf_error_d_on_one_side_only(tmp_path):
    en, de = maruf_pair(tmp_path, ["<d>", "a", "<d>", "b"], ["<d>", "x", "y", "z"])
    with pytest.raises(CtxmtError) as e:
        list(iter_parallel_documents("maruf", en, de))
    msg = str(e.value)
    assert f"at line 3: {en} has a <d> line (document start) but {de} has a sentence" in msg
    assert "put the <d> lines at the same lines on both sides" in msg and "\n" not in msg


def test_maruf_error_line_counts_differ(tmp_path):
    en, de = maruf_pair(tmp_path, ["<d>", "a", "b"], ["<d>", "x"])
    with pytest.raises(CtxmtError) as e:
        list(iter_parallel_documents("maruf", en, de))
    msg = str(e.value)
    assert "m_en.txt has 3 lines" in msg and "m_de.txt has 2 lines" in msg and "first unmatched line is 3" in msg


@pytest.mark.parametrize("side", [0, 1])
def test_maruf_error_empty_sentence(tmp_path, side):
    lines = [["<d>", "a", "b"], ["<d>", "x", "y"]]
    lines[side][2] = "   "
    en, de = maruf_pair(tmp_path, *lines)
    with pytest.raises(CtxmtError, match=rf"{(en, de)[side]}:3: empty sentence; fill it in or remove the line"):
        list(iter_parallel_documents("maruf", en, de))


def test_maruf_error_file_does_not_start_with_d(tmp_path):
    en, de = maruf_pair(tmp_path, ["a", "<d>", "b"], ["x", "<d>", "y"])
    with pytest.raises(CtxmtError, match=rf"{en}:1: the file does not start with a <d> line .*put a line holding "
                                         r"only <d> before each document"):
        list(iter_parallel_documents("maruf", en, de))
    with pytest.raises(CtxmtError, match=rf"{en}:1: the file does not start"):   # a source file alone too
        list(iter_source_documents("maruf", en))


def test_maruf_error_empty_document(tmp_path):
    en, de = maruf_pair(tmp_path, ["<d>", "a", "<d>", "<d>", "b"], ["<d>", "x", "<d>", "<d>", "y"])
    with pytest.raises(CtxmtError, match=rf"{en}:3: empty document .*remove this <d> line from both sides"):
        list(iter_parallel_documents("maruf", en, de))
    en, de = maruf_pair(tmp_path, ["<d>", "a", "<d>"], ["<d>", "x", "<d>"])       # a trailing <d>
    with pytest.raises(CtxmtError, match=rf"{en}:3: empty document"):
        list(iter_parallel_documents("maruf", en, de))


@pytest.mark.parametrize("corpus,split", sorted(MARUF_REAL))
def test_maruf_real_files_counts(corpus, split):
    folder = SHARED / "maruf2019" / corpus
    en, de = (folder / f"concatenated_en2de_{split}_{lang}.txt" for lang in ("en", "de"))
    if not (en.is_file() and de.is_file()):
        pytest.skip(f"Maruf et al. 2019 files not available at {folder} (see ../shared/data/README.md)")
    docs = list(iter_parallel_documents("maruf", en, de))
    sentences, documents = MARUF_REAL[corpus, split]
    assert (sum(len(d) for d in docs), len(docs)) == (sentences, documents)
    assert count_lines(en) == count_lines(de) == sentences + documents
    assert all(s and s == s.strip() and s != "<d>" for d in docs for pair in d for s in pair)


@pytest.mark.parametrize("ids, src, needle", [
    (b"d\nd\n\nd\n", "one\ntwo\nthree\nfour\n", "a.docids:3: empty document id"),
    (b"d\n\xff\nd\n", "one\ntwo\nthree\n", "a.docids:2: not valid UTF-8"),
    (b"d\nd\nd\n", "one\n\nthree\n", "a.en:2: empty sentence (blank lines do not separate documents"),
])
def test_an_error_the_docids_file_causes_says_where_it_came_from(tmp_path, ids, src, needle):
    en = write(tmp_path / "a.en", src)
    de = write(tmp_path / "a.de", src)
    docids = write(tmp_path / "a.docids", ids)
    with pytest.raises(CtxmtError) as err:
        list(iter_parallel_documents("text", en, de, docids))
    assert needle in str(err.value), str(err.value)
    assert f"{docids} was picked up automatically" in str(err.value) and "rename or move it" in str(err.value)


def test_an_error_of_the_text_itself_does_not_blame_the_docids(tmp_path):
    en = write(tmp_path / "a.en", b"one\n\xfftwo\n")
    de = write(tmp_path / "a.de", "eins\nzwei\n")
    docids = write(tmp_path / "a.docids", "d\nd\n")
    with pytest.raises(CtxmtError, match=r"a\.en:2: not valid UTF-8") as err:
        list(iter_parallel_documents("text", en, de, docids))
    assert "docids" not in str(err.value)


@pytest.mark.parametrize("body, words", [
    ('<seg id="1">a <seg id="2">b</seg> c</seg>', r'x\.xml:2: <seg> inside <seg id=1>'),
    ('<seg id="1">a\n<seg id="2">b</seg>\n</seg>', r'x\.xml:2: <seg> inside <seg id=1>'),
    ('<seg id="1">a</seg> c</seg>', r'x\.xml:2: </seg> without an opening <seg>'),
    ('<seg id="1">a</seg>\n</seg>', r'x\.xml:3: </seg> without an opening <seg>'),
    ('<seg id="1">a </doc> b</seg>', r'x\.xml:2: </doc> inside <seg id=1>'),
])
def test_iwslt_xml_refuses_a_seg_nested_in_another(tmp_path, body, words):
    """The scanner would take an inner <seg>'s text into the outer one and drop the rest without a word."""
    en = write(tmp_path / "x.xml", f'<doc docid="1">\n{body}\n</doc>\n')
    with pytest.raises(CtxmtError, match=words):
        list(iter_source_documents("iwslt-xml", en))


# ---- properties: every reader reads a hostile file or refuses it in one line, and never changes it -------------
def reads_or_refuses(read, *paths: Path) -> None:
    """``read()`` consumes every document or raises a one-line CtxmtError; the files are byte-identical after."""
    before = [p.read_bytes() for p in paths]
    try:
        for _ in read():
            pass
    except CtxmtError as err:
        assert "\n" not in str(err) and str(err).strip()
    assert [p.read_bytes() for p in paths] == before


@given(jsonl_files(["doc_id", "src", "tgt"], '{"doc_id": "d", "src": "a b", "tgt": "c d"}'))
def test_prepare_jsonl_reader_property(tmp_path_factory, data):
    path = write(tmp_path_factory.mktemp("p") / "c.jsonl", data)
    reads_or_refuses(lambda: iter_parallel_documents("jsonl", path, path), path)


@given(text_files(), text_files())
def test_prepare_text_reader_property(tmp_path_factory, src, tgt):
    folder = tmp_path_factory.mktemp("p")
    en, de = write(folder / "c.en", src), write(folder / "c.de", tgt)
    reads_or_refuses(lambda: iter_parallel_documents("text", en, de), en, de)


@given(xml_files())
def test_prepare_xml_reader_property(tmp_path_factory, pair):
    folder = tmp_path_factory.mktemp("p")
    en, de = write(folder / "x.en.xml", pair[0]), write(folder / "x.de.xml", pair[1])
    reads_or_refuses(lambda: iter_parallel_documents("iwslt-xml", en, de), en, de)
