"""Train-split cleaning (Moses clean-corpus-n): the rules, the counts in meta.json, documents cut at a gap."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxmt_cli.data.clean import CleanRules, clean_document, new_counts
from ctxmt_cli.data.prepare import PrepareSpec, SplitInput, prepare_corpus
from ctxmt_cli.data.store import PreparedData
from ctxmt_cli.errors import CtxmtError

RULES = CleanRules(min_words=2, max_words=6, max_length_ratio=2.0)


def test_each_rule_and_its_order():
    assert RULES.reason("a b", "c d") is None
    assert RULES.reason("a", "b c") == "too_short"                  # either side counts
    assert RULES.reason("a", " ".join("x" * 9)) == "too_short"     # the first reason met wins
    assert RULES.reason("a b c d e f g", "a b c d e f g") == "too_long"
    assert RULES.reason("a b", "a b c d e") == "length_ratio"       # 5 > 2 × 2
    assert RULES.reason("a b", "a b c d") is None                   # 4 = 2 × 2: kept
    assert not CleanRules().active and CleanRules().reason("", "x y z") is None


@pytest.mark.parametrize("rules, message", [
    (CleanRules(min_words=5, max_words=3), "above `max_words`"),
    (CleanRules(max_length_ratio=0.5), "below 1"),
    (CleanRules(min_words=-1), "must be ≥ 0"),
])
def test_meaningless_rules_are_refused(rules, message):
    with pytest.raises(CtxmtError, match=message):
        rules.check()


def test_a_document_is_cut_at_every_dropped_sentence():
    counts = new_counts()
    doc = [("a b", "a b"), ("x", "x"), ("c d", "c d"), ("e f", "e f"), ("y", "y")]
    assert clean_document(RULES, doc, counts) == [[0], [2, 3]]      # the trailing drop leaves no gap
    assert counts["too_short"] == 2 and counts["documents_split"] == 1
    assert clean_document(RULES, [("x", "y")], counts) == [] and counts["documents_dropped"] == 1


def write_corpus(directory: Path, name: str, docs: list[list[tuple[str, str]]]) -> SplitInput:
    """A text-format split with a .docids file; ``docs`` as lists of pairs."""
    pairs = [(k, p) for k, d in enumerate(docs) for p in d]
    for side, lang in enumerate(("en", "fr")):
        (directory / f"{name}.{lang}").write_text("".join(p[side] + "\n" for _, p in pairs), encoding="utf-8")
    (directory / f"{name}.docids").write_text("".join(f"doc{k}\n" for k, _ in pairs), encoding="utf-8")
    return SplitInput(directory / f"{name}.en", directory / f"{name}.fr", directory / f"{name}.docids")


def test_prepare_counts_what_it_drops_and_cleans_train_only(tmp_path):
    good = [("the cat sat here", "le chat est assis"), ("a dog ran off", "un chien est parti")] * 20
    doc_with_gap = good[:3] + [("one", "un")] + good[:3]
    bad_ratio = [("yes", "oui"), ("we agree on this", "nous sommes tout à fait d'accord sur ce point précis")]
    docs = [good, doc_with_gap, bad_ratio, [("no", "non")]]
    splits = {"train": write_corpus(tmp_path, "train", docs), "valid": write_corpus(tmp_path, "valid", docs)}
    spec = PrepareSpec(fmt="text", splits=splits, src_lang="en", tgt_lang="fr", out=tmp_path / "out",
                       vocab_size=60, workers=1, clean=CleanRules(min_words=2, max_words=20, max_length_ratio=2))
    meta = prepare_corpus(spec)
    dropped = meta["clean"]["dropped"]
    assert dropped == {"too_short": 3, "too_long": 0, "length_ratio": 1, "documents_split": 1,
                       "documents_dropped": 2}
    total = sum(len(d) for d in docs)
    assert meta["splits"]["train"]["sentences"] == total - 4
    assert meta["splits"]["train"]["documents"] == 3                 # good, the two halves of the gap
    assert meta["splits"]["valid"]["sentences"] == total             # never cleaned
    assert meta["clean"]["splits"] == ["train"]
    split = PreparedData(tmp_path / "out").split("train")
    assert [e - s for s, e in split.documents()] == [40, 3, 3]


def test_cleaning_everything_away_is_an_error(tmp_path):
    splits = {"train": write_corpus(tmp_path, "train", [[("a b c", "d e f")] * 30])}
    spec = PrepareSpec(fmt="text", splits=splits, src_lang="en", tgt_lang="fr", out=tmp_path / "out",
                       vocab_size=30, workers=1, clean=CleanRules(max_words=2))
    with pytest.raises(CtxmtError, match="cleaning dropped every sentence pair.*too_long 30"):
        prepare_corpus(spec)
    assert not (tmp_path / "out").exists()
