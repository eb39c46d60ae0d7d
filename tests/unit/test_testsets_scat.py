"""SCAT (Yin et al., 2021) En->Fr: the reader on the real files, marker stripping,
the pronoun swap (case, elision, markers inside words, several markers), the
examples left out, the one-line context, and bad input.

The real files live outside the repository (``../shared/data/scat``); tests that
need them skip with the reason when the folder is absent.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.evaluate.contrastive_classes import class_accuracy
from ctxmt_cli.evaluate.testsets import load_testsets
from ctxmt_cli.evaluate.testsets.scat import ScatTestSet, has_highlight, read_scat, strip_markers, swap_pronouns

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
SCAT = DATA / "scat"
LINES = {"train": 11471, "valid": 145, "test": 1000}
SKIPPED = {"train": 65, "valid": 0, "test": 3}
SWAPS = {("il", "elle"), ("elle", "il"), ("ils", "elles"), ("elles", "ils"), ("s", "si"), ("si", "s")}


@pytest.fixture(scope="module")
def scat():
    """Every real split by name (skips when the data folder is absent)."""
    if not SCAT.is_dir():
        pytest.skip(f"real SCAT files not found at {SCAT} (see ../shared/data/README.md)")
    return {split: read_scat(SCAT, split=split)[0] for split in LINES}


def _lines(path: Path) -> list[str]:
    lines = path.read_text(encoding="utf-8").split("\n")
    assert lines[-1] == ""
    return lines[:-1]


# --- the real files ------------------------------------------------------------------------------

def test_file_sizes_match_the_readme(scat):
    for split, n in LINES.items():
        for suffix in ("en", "fr", "context.en", "context.fr"):
            assert len(_lines(SCAT / f"highlighted.{split}.{suffix}")) == n, (split, suffix)


def test_counts_and_left_out_examples(scat):
    for split, s in scat.items():
        assert isinstance(s, ScatTestSet)
        assert len(s.skipped) == SKIPPED[split], split
        assert len(s.items) + len(s.skipped) == LINES[split], split
        assert all(set(x) == {"line", "reason", "fr"} for x in s.skipped)
    assert [x["line"] for x in scat["test"].skipped] == [62, 288, 596]
    assert "<" not in "".join(x["fr"] for x in scat["train"].skipped)


def test_metadata(scat):
    s = scat["test"]
    assert (s.name, s.kind, s.tie_rule, s.groupings) == ("scat_test", "scat", "strict", ("pronoun",))
    assert (s.src_lang, s.tgt_lang, s.pretokenized) == ("en", "fr", False)
    assert [p.name for p in s.files] == ["highlighted.test.en", "highlighted.test.fr",
                                         "highlighted.test.context.en", "highlighted.test.context.fr"]
    assert set(s.checksums()) == {str(p) for p in s.files}


def test_path_forms_and_registry(scat):
    for path in (SCAT / "highlighted.valid", SCAT / "highlighted.valid.fr", SCAT / "highlighted.valid.context.en"):
        (s,) = read_scat(path)
        assert s.name == "scat_valid" and len(s.items) == 145
    (s,) = load_testsets("scat", SCAT)
    assert s.name == "scat_test" and len(s.items) == 997


def test_markers_are_gone_and_candidates_are_pronoun_swaps(scat):
    for split, s in scat.items():
        for item in s.items:
            texts = [item.src, *item.candidates, *item.src_context, *item.tgt_context]
            assert not any(re.search(r"[<>]|  ", t) or t != t.strip() for t in texts), (split, texts)
            correct, contrastive = item.candidates
            assert item.correct == 0 and correct != contrastive
            a, b = re.findall(r"\w+", correct), re.findall(r"\w+", contrastive)
            assert len(a) == len(b)
            changed = {(x.lower(), y.lower()) for x, y in zip(a, b, strict=True) if x != y}
            assert changed and changed <= SWAPS, (correct, contrastive)


def test_correct_candidate_is_the_unmarked_reference(scat):
    fr = _lines(SCAT / "highlighted.test.fr")
    skipped = {x["line"] for x in scat["test"].skipped}
    kept = [line for i, line in enumerate(fr) if i + 1 not in skipped]
    assert [item.candidates[0] for item in scat["test"].items] == [strip_markers(line) for line in kept]


def test_tags(scat):
    test = scat["test"]
    assert all(set(i.tags) == {"phenomenon", "pronoun", "gender", "has_highlight", "swapped"} for i in test.items)
    assert {i.tags["phenomenon"] for i in test.items} == {"pronoun"}
    assert Counter(i.tags["pronoun"] for i in test.items) == {"elles": 377, "il": 322, "elle": 298}
    assert Counter(i.tags["gender"] for i in test.items) == {"feminine": 675, "masculine": 322}
    assert Counter(i.tags["swapped"] for i in test.items) == {1: 924, 2: 66, 3: 7}
    assert sum(i.tags["has_highlight"] for i in test.items) == 995
    assert set(Counter(i.tags["pronoun"] for i in scat["train"].items)) == {"il", "elle", "ils", "elles"}


def test_a_constant_gender_choice_scores_half_balanced_accuracy(scat):
    """Always the masculine scores 32.3%, always the feminine 67.7% (the test split's priors); with the correct
    pronoun's gender as the class both score 50% balanced accuracy (the pronouns as classes: 1/3 and 2/3)."""
    test = scat["test"]
    assert test.classes == "gender"
    for gender, share in (("masculine", 322 / 997), ("feminine", 675 / 997)):
        choice = [item.tags["gender"] == gender for item in test.items]
        assert sum(choice) / len(choice) == pytest.approx(share)
        assert class_accuracy(test, choice)["balanced_accuracy"] == 0.5


def test_context_is_one_line_without_separator(scat):
    """The publisher joins context sentences with a plain space: no separator to split on."""
    for split in LINES:
        for side in ("en", "fr"):
            text = (SCAT / f"highlighted.{split}.context.{side}").read_text(encoding="utf-8")
            assert not any(sep in text for sep in ("</s>", "<brk>", "_eos", "\t", "|||")), (split, side)
    for s in scat.values():
        assert all(len(i.src_context) <= 1 and len(i.tgt_context) <= 1 for i in s.items)
        assert all(bool(i.src_context) == bool(i.tgt_context) for i in s.items)
    assert sum(not i.src_context for i in scat["test"].items) == 40


# --- stripping and swapping rules on made-up lines ------------------------------------------------

@pytest.mark.parametrize("line, correct, contrastive", [
    ("<p>Il</p> est parti.", "Il est parti.", "Elle est parti."),
    ("<p>ELLES</p> DORMENT.", "ELLES DORMENT.", "ILS DORMENT."),
    ("Je crois qu'<p>ils</p> ont faim.", "Je crois qu'ils ont faim.", "Je crois qu'elles ont faim."),
    ("Dis-moi s'<p>il</p> vient.", "Dis-moi s'il vient.", "Dis-moi si elle vient."),
    ("S'<p>ils</p> viennent, pars.", "S'ils viennent, pars.", "Si elles viennent, pars."),
    ("Même si <p>elle</p> vient.", "Même si elle vient.", "Même s'il vient."),
    ("Ainsi <p>elle</p> vient.", "Ainsi elle vient.", "Ainsi il vient."),
    ("Vient-<p>elle</p> ?", "Vient-elle ?", "Vient-il ?"),
    ("Un ca<p>il</p>lou, <p>il</p> a volé.", "Un caillou, il a volé.", "Un caillou, elle a volé."),
    ("<p>il</p> dit qu'<p>il</p> part.", "il dit qu'il part.", "elle dit qu'elle part."),
    ("Le  <hon>vélo<hoff> , <p>il</p> roule.", "Le vélo, il roule.", "Le vélo, elle roule."),
    ("<p>il</p>  <hon <hon>> marche <<hoff> hoff>  bien.", "il marche bien.", "elle marche bien."),
])
def test_swap_rules(line, correct, contrastive):
    assert swap_pronouns(line)[:2] == (correct, contrastive)


def test_unswappable_and_stripping():
    assert swap_pronouns("Est-ce qu'il est là ?")[1] is None          # no marker
    assert swap_pronouns("Elles sont b<p>elles</p> !")[1] is None      # marker only inside a word
    assert strip_markers("Is <p>it</p> w<p>it</p>h you?") == "Is it with you?"
    assert strip_markers("la  <hon>mère <ho <hon>ff> et<hoff>  le") == "la mère et le"
    assert strip_markers("l'Etat<h off>et") == "l'Etat et"
    assert has_highlight("a  <hon>b<hoff>  c") and not has_highlight("<hon><hoff>", "plain")


# --- bad input and options -------------------------------------------------------------------------

def _split(folder: Path, fr: list[str], n: int | None = None, split: str = "test") -> Path:
    n = len(fr) if n is None else n
    files = {"en": ["It <p>it</p> runs."] * n, "fr": fr,
             "context.en": ["The  <hon>car<hoff> ."] * n, "context.fr": ["La  <hon>voiture<hoff> ."] * n}
    for suffix, lines in files.items():
        (folder / f"highlighted.{split}.{suffix}").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return folder


def test_tiny_split_and_on_unswappable(tmp_path, caplog):
    folder = _split(tmp_path, ["<p>Elle</p> roule.", "Elle roule."], split="mini")
    (s,) = read_scat(folder, split="mini")
    assert s.name == "scat_mini" and len(s.items) == 1
    item = s.items[0]
    assert (item.src, item.candidates) == ("It it runs.", ["Elle roule.", "Il roule."])
    assert (item.src_context, item.tgt_context) == (["The car."], ["La voiture."])
    assert (item.tags["pronoun"], item.tags["gender"], s.classes) == ("elle", "feminine", "gender")
    assert s.skipped == [{"line": 2, "reason": s.skipped[0]["reason"], "fr": "Elle roule."}]
    assert "1 of 2 examples have no swappable pronoun" in caplog.text
    with pytest.raises(CtxmtError, match=r"highlighted\.mini\.fr, line 2: no whole-word"):
        read_scat(folder, split="mini", on_unswappable="error")
    with pytest.raises(CtxmtError, match="on_unswappable"):
        read_scat(folder, split="mini", on_unswappable="drop")


def test_missing_and_misaligned_files(tmp_path):
    with pytest.raises(CtxmtError, match=r"SCAT file missing: .*highlighted\.test\.en"):
        read_scat(tmp_path)
    _split(tmp_path, ["<p>il</p> va."] * 2, n=3)
    with pytest.raises(CtxmtError, match=r"not line-aligned \(highlighted\.test\.en: 3, highlighted\.test\.fr: 2"):
        read_scat(tmp_path)
    (tmp_path / "highlighted.test.context.fr").unlink()
    with pytest.raises(CtxmtError, match=r"missing: .*context\.fr") as err:
        read_scat(tmp_path)
    assert "\n" not in str(err.value)
