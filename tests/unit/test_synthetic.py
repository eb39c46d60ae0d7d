"""Properties of the synthetic discourse benchmark (ctxmt_cli.synthetic)."""
from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.synthetic import DISTANCES, PHENOMENA, generate_benchmark
from ctxmt_cli.synthetic.documents import split_sizes
from ctxmt_cli.synthetic.lexicon import ContextNeeded, build_lexicon, translate_sentence

SEED, DOCS = 1, 60
SPLITS = ("train", "valid", "test")


@pytest.fixture(scope="module")
def bench(tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("syn") / "bench"
    return out, generate_benchmark(out, seed=SEED, docs=DOCS)


@pytest.fixture(scope="module")
def items(bench) -> list[dict]:
    path = bench[0] / "contrastive" / "items.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def _documents(path: Path) -> list[list[str]]:
    text = path.read_text(encoding="utf-8")
    assert text.endswith("\n") and not text.endswith("\n\n")
    return [block.split("\n") for block in text[:-1].split("\n\n")]


# --- determinism -----------------------------------------------------------

def test_same_seed_gives_identical_bytes(bench, tmp_path):
    again = tmp_path / "again"
    manifest = generate_benchmark(again, seed=SEED, docs=DOCS)
    assert manifest == bench[1]
    assert _files(again) == _files(bench[0])


def test_different_seed_gives_different_corpus(bench, tmp_path):
    other = tmp_path / "other"
    generate_benchmark(other, seed=SEED + 1, docs=DOCS, items_per_cell=2)
    for name in ("train.src", "train.tgt"):
        assert (other / name).read_bytes() != (bench[0] / name).read_bytes()


def test_no_torch_import():
    code = "import sys, ctxmt_cli.synthetic; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


# --- corpus layout -----------------------------------------------------------

def test_split_sizes():
    assert split_sizes(2000) == {"train": 1800, "valid": 100, "test": 100}
    assert split_sizes(50) == {"train": 10, "valid": 20, "test": 20}
    with pytest.raises(CtxmtError):
        split_sizes(40)


def test_small_docs_work(tmp_path):
    manifest = generate_benchmark(tmp_path / "b", seed=3, docs=50, items_per_cell=2)
    assert manifest["splits"]["train"]["documents"] == 10
    assert len(_documents(tmp_path / "b" / "test.src")) == 20


def test_src_tgt_alignment_and_counts(bench):
    out, manifest = bench
    for split in SPLITS:
        src, tgt = _documents(out / f"{split}.src"), _documents(out / f"{split}.tgt")
        assert [len(d) for d in src] == [len(d) for d in tgt]
        assert len(src) == split_sizes(DOCS)[split] == manifest["splits"][split]["documents"]
        assert sum(map(len, src)) == manifest["splits"][split]["sentences"]
        for doc_s, doc_t in zip(src, tgt, strict=True):
            assert 6 <= len(doc_s) <= 12
            for s, t in zip(doc_s, doc_t, strict=True):
                assert 4 <= len(s.split()) <= 10 and s.endswith(" .") and t.endswith(" .")
                assert s == s.lower() and "  " not in s and s.strip() == s


def test_word_type_budget(bench):
    out, manifest = bench
    for side in ("src", "tgt"):
        types = set()
        for split in SPLITS:
            types.update((out / f"{split}.{side}").read_text(encoding="utf-8").split())
        assert len(types) <= manifest["word_types"][side] <= 300
        assert manifest["lexicon_types"][side] <= 300
    assert not set(build_lexicon(SEED).words) & set(build_lexicon(SEED).words.values())


def test_genders_balanced_and_seeded():
    a, b = build_lexicon(1), build_lexicon(2)
    assert abs(sum(g == "m" for g in a.gender.values()) * 2 - len(a.gender)) <= 1
    assert a.gender != b.gender and a.words == b.words


def test_phenomenon_share(bench):
    share = bench[1]["phenomenon_share"]
    assert 0.25 <= share["any"] <= 0.45
    assert all(share[p] > 0.04 for p in PHENOMENA)


def test_sentence_level_translatability(bench):
    """Sentences without a context-dependent word translate sentence by sentence."""
    out, lex = bench[0], build_lexicon(SEED)
    dependent = {"ze", "yu", "du", *lex.ambiguous}
    checked = 0
    for split in SPLITS:
        for doc_s, doc_t in zip(_documents(out / f"{split}.src"),
                                _documents(out / f"{split}.tgt"), strict=True):
            for s, t in zip(doc_s, doc_t, strict=True):
                if dependent.isdisjoint(s.split()):
                    assert translate_sentence(s, lex) == t
                    checked += 1
                elif "yu" in s.split() or "du" in s.split():
                    with pytest.raises(ContextNeeded):
                        translate_sentence(s, lex)
    assert checked > 200


# --- an independent oracle, written from the rules ----------------------------

def oracle(lex, history: list[str], current: str) -> tuple[str, str, int]:
    """(phenomenon, expected decisive target word, its index or -1 for "any")."""
    toks = current.split()
    before = [w for s in history for w in s.split()]
    if "ze" in toks:
        seen = before + toks[:toks.index("ze")]
        noun = [w for w in seen if w in lex.nouns or w in lex.senses][-1]
        assert noun in lex.nouns, "a pronoun's antecedent is never ambiguous"
        return "pronoun", {"m": "lor", "f": "lei"}[lex.gender[lex.words[noun]]], -1
    if "yu" in toks:
        cue = [w for w in before if w in ("dom", "sira", "pal", "buki")][-1]
        return "deixis", "vos" if cue in ("dom", "sira") else "tu", -1
    if "du" in toks:
        verb = [w for w in before if w in lex.transitive][-1]
        return "ellipsis_vp", lex.words[verb], len(toks) - 2
    amb = next(w for w in toks if w in lex.senses)
    first = before.index(amb)  # first occurrence carries the cue just before it
    sense = lex.cue_sense[before[first - 1]][1]
    return "lex_cohesion", lex.senses[amb][sense], -1


def _holds(expected: str, index: int, target: str) -> bool:
    words = target.split()
    return words[index] == expected if index >= 0 else expected in words


def test_oracle_on_contrastive_items(items):
    lex = build_lexicon(SEED)
    for item in items:
        phen, word, index = oracle(lex, item["src_context"], item["src"])
        assert phen == item["tags"]["phenomenon"]
        correct, wrong = item["candidates"][item["correct"]], item["candidates"][1]
        assert _holds(word, index, correct) and not _holds(word, index, wrong)


def test_oracle_on_test_documents(bench):
    out, lex = bench[0], build_lexicon(SEED)
    dependent = {"ze", "yu", "du", *lex.ambiguous}
    cues = set(lex.cue_adjectives)
    found = set()
    for doc_s, doc_t in zip(_documents(out / "test.src"), _documents(out / "test.tgt"), strict=True):
        for i, (s, t) in enumerate(zip(doc_s, doc_t, strict=True)):
            toks = s.split()
            if dependent.isdisjoint(toks) or cues & set(toks):
                continue
            phen, word, index = oracle(lex, doc_s[:i], s)
            assert _holds(word, index, t), (doc_s[:i + 1], t)
            found.add(phen)
    assert found == set(PHENOMENA)


# --- contrastive items -------------------------------------------------------

def test_items_tagged_and_cells_complete(bench, items):
    counts = defaultdict(int)
    for item in items:
        tags = item["tags"]
        assert tags["phenomenon"] in PHENOMENA and tags["distance"] in DISTANCES[tags["phenomenon"]]
        assert item["correct"] == 0 and len(item["candidates"]) == 2
        assert len(item["src_context"]) == len(item["tgt_context"]) == 3
        counts[(tags["phenomenon"], tags["distance"])] += 1
    assert set(counts) == {(p, d) for p in PHENOMENA for d in DISTANCES[p]}
    assert all(n == 100 for n in counts.values())
    per_cell = bench[1]["contrastive"]["per_cell"]
    assert all(per_cell[p][str(d)] == n for (p, d), n in counts.items())


def test_mirror_pairs(items):
    pairs = defaultdict(list)
    for item in items:
        pairs[item["tags"]["pair"]].append(item)
    for members in pairs.values():
        a, b = members
        assert a["tags"] == b["tags"]
        if a["tags"]["distance"] > 0:
            assert a["src"] == b["src"] and a["src_context"] != b["src_context"]
            assert a["candidates"] == b["candidates"][::-1]
        assert a["candidates"][0] != b["candidates"][0]


def _lexicographic(src, cand):
    return cand


@pytest.mark.parametrize("score", [
    _lexicographic,                                          # fixed string preference
    lambda src, cand: hash((src, cand)) % 97,                # arbitrary per-source scores
    lambda src, cand: ("lor" in cand.split()) + ("vos" in cand.split()),  # fixed bias
])
def test_context_agnostic_scorer_at_most_chance(items, score):
    """A scorer that sees only (current source, candidate) wins <= 50% (ties lose)."""
    cells = defaultdict(list)
    for item in items:
        if item["tags"]["distance"] > 0:
            good, bad = item["candidates"][0], item["candidates"][1]
            cells[(item["tags"]["phenomenon"], item["tags"]["distance"])].append(
                score(item["src"], good) > score(item["src"], bad))
    assert len(cells) == 12
    assert all(sum(v) / len(v) <= 0.5 for v in cells.values())
    if score is _lexicographic:  # a strict order without ties wins exactly one per pair
        assert all(sum(v) / len(v) == 0.5 for v in cells.values())


def test_items_come_from_fresh_documents(bench, items):
    windows = set()
    for split in SPLITS:
        for doc in _documents(bench[0] / f"{split}.src"):
            windows.update(tuple(doc[i:i + 4]) for i in range(len(doc) - 3))
    assert not any(tuple(it["src_context"] + [it["src"]]) in windows for it in items)


# --- publisher layouts -------------------------------------------------------

def test_voita_layout(bench, items):
    total = 0
    for phen in PHENOMENA:
        groups = json.loads((bench[0] / "contrastive" / "voita" / f"{phen}.json").read_text())
        mine = [it for it in items if it["tags"]["phenomenon"] == phen]
        assert len(groups) == len(mine)
        for group, item in zip(groups, mine, strict=True):
            assert set(group) == {"src", "dst", "true_ind", "ctx_dist", "phenomenon"}
            assert group["phenomenon"] == phen and group["ctx_dist"] == item["tags"]["distance"]
            assert group["src"].split(" _eos ") == item["src_context"] + [item["src"]]
            assert isinstance(group["true_ind"], int) and group["true_ind"] in (0, 1)
            parts = [d.split(" _eos ") for d in group["dst"]]
            assert all(len(p) == 4 and p[:3] == item["tgt_context"] for p in parts)
            assert parts[group["true_ind"]][3] == item["candidates"][0]
            assert parts[1 - group["true_ind"]][3] == item["candidates"][1]
        assert {g["true_ind"] for g in groups} == {0, 1}
        total += len(groups)
    assert total == len(items)


def test_contrapro_layout(bench, items):
    root = bench[0] / "contrastive" / "contrapro"
    records = json.loads((root / "contrapro.json").read_text())
    keys = {"document id", "segment id", "src segment", "ref segment", "ante distance",
            "ref pronoun", "src pronoun", "errors", "phenomenon"}
    assert len(records) == len(items)
    for rec, item in zip(records, items, strict=True):
        assert keys <= set(rec)
        assert rec["src segment"] == item["src"] and rec["ref segment"] == item["candidates"][0]
        assert rec["ante distance"] == item["tags"]["distance"]
        assert rec["ref pronoun"] in rec["ref segment"].split()
        for err in rec["errors"]:
            assert err["replacement"] in err["contrastive"].split()
    lines = {n: (root / f"contrapro.{n}").read_text().splitlines()
             for n in ("text.src", "text.tgt", "context.src", "context.tgt")}
    n_text = sum(1 + len(r["errors"]) for r in records)
    assert len(lines["text.src"]) == len(lines["text.tgt"]) == n_text
    assert len(lines["context.src"]) == len(lines["context.tgt"]) == 3 * n_text
    row = 0
    for rec, item in zip(records, items, strict=True):
        expected = [rec["ref segment"]] + [e["contrastive"] for e in rec["errors"]]
        for k, tgt in enumerate(expected):
            assert lines["text.src"][row + k] == rec["src segment"]
            assert lines["text.tgt"][row + k] == tgt
            ctx = slice(3 * (row + k), 3 * (row + k) + 3)
            assert lines["context.src"][ctx] == item["src_context"]
            assert lines["context.tgt"][ctx] == item["tgt_context"]
        row += len(expected)


def test_manifest_file_matches_return(bench):
    out, manifest = bench
    assert json.loads((out / "manifest.json").read_text()) == manifest
    assert manifest["seed"] == SEED and manifest["docs"] == DOCS
    assert set(manifest["phenomena"]) == set(PHENOMENA)


@pytest.mark.parametrize("seed", [2, 3, 4, 5])
def test_other_seeds_build_valid_mirror_pairs(tmp_path, seed):
    # regression: an antecedent noun mentioned twice in its sentence made both mirrors identical
    manifest = generate_benchmark(tmp_path, seed=seed, docs=45, items_per_cell=20)
    for line in (tmp_path / "contrastive" / "items.jsonl").read_text().splitlines():
        item = json.loads(line)
        assert item["candidates"][0] != item["candidates"][1]
    assert manifest["seed"] == seed
