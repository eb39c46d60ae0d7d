"""Every packaged recipe (recipes/) validates, says which paper row it reproduces, and matches its file name.

File names of the paper recipes spell the system: ``PAIR_base`` (sentence-level) or
``PAIR_sKtoK[_ENC][_pers][_pse|_pse128][_cd]`` with ENC one of shift (the pair's
paper shift), shift100, shiftwin (per-window), shiftauto (auto), 1hot, sin, lrn;
``PAIR_s2to1`` is the sKto1 baseline.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ctxmt_cli.cli.quickstart import DEFAULT_SYSTEMS
from ctxmt_cli.config import load_recipe

ROOT = Path(__file__).resolve().parents[2]
RECIPES = ROOT / "recipes"
ALL = sorted(RECIPES.rglob("*.yaml"))
PAPER_DIRS = ("lupo2022_focused_concat", "lupo2023_sentence_position")
PAPER = sorted(p for d in PAPER_DIRS for p in (RECIPES / d).glob("*.yaml"))
QUICKSTART = sorted((RECIPES / "quickstart").glob("*.yaml"))

NAME = re.compile(r"^(?P<pair>en_ru|en_de_high|en_de)_"
                  r"(?:(?P<base>base)|s(?P<k>\d)to(?P<kt>\d)(?P<rest>(?:_[a-z0-9]+)*))$")
PAIR_SHIFT = {"en_ru": 8, "en_de": 21, "en_de_high": 27}
SEGMENTS = {"1hot": "onehot", "sin": "sinusoidal", "lrn": "learned"}
#: effective tokens per update the papers report (App. A): max_tokens x 4 GPUs x update_freq
PAIR_BATCH = {"en_ru": 32_000, "en_de": 16_000, "en_de_high": 16_000}


def rel(path: Path) -> str:
    return str(path.relative_to(RECIPES))


def header(path: Path) -> str:
    """The leading block of comment lines."""
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        lines.append(line)
    return "\n".join(lines)


def test_paper_recipes_exist():
    assert len(list((RECIPES / PAPER_DIRS[0]).glob("*.yaml"))) >= 20
    assert len(list((RECIPES / PAPER_DIRS[1]).glob("*.yaml"))) >= 40


@pytest.mark.parametrize("path", ALL, ids=rel)
def test_recipe_loads_and_has_header(path):
    load_recipe(path)
    text = header(path)
    assert text, f"{rel(path)}: no header comment"
    if path.parent.name in PAPER_DIRS:
        assert re.search(r"Table \d+", text), f"{rel(path)}: the header names no table"
        assert "Reproduces:" in text and ("(2022)" in text or "(2023)" in text)


@pytest.mark.parametrize("path", PAPER, ids=rel)
def test_settings_match_file_name(path):
    m = NAME.match(path.stem)
    assert m, f"{rel(path)}: file name does not follow PAIR_base / PAIR_sKtoK[_options]"
    model = load_recipe(path).model
    if m["base"]:
        assert model.family == "sentence"
        return
    assert model.family == "concat"
    k, kt = int(m["k"]), int(m["kt"])
    assert model.src_context_sentences == k - 1
    assert model.tgt_context_sentences == (0 if kt == 1 else kt - 1)
    tokens = [t for t in m["rest"].split("_") if t]
    known = {"cd", "pers", "pse", "pse128", "shift", "shift100", "shiftwin", "shiftauto", *SEGMENTS}
    assert set(tokens) <= known, f"{rel(path)}: unknown name parts {set(tokens) - known}"
    assert model.cd == (0.01 if "cd" in tokens else 1.0)
    assert model.persistent == ("pers" in tokens)
    expected_shift = {"shift": PAIR_SHIFT[m["pair"]], "shift100": 100, "shiftwin": "per-window", "shiftauto": "auto"}
    shifts = [expected_shift[t] for t in tokens if t in expected_shift]
    assert model.shift == (shifts[0] if shifts else None)
    segments = [SEGMENTS[t] for t in tokens if t in SEGMENTS]
    assert model.segment == (segments[0] if segments else None)
    if "pse" in tokens or "pse128" in tokens:
        assert model.pse is not None and model.pse.d_se == (128 if "pse128" in tokens else 4)
    else:
        assert model.pse is None


@pytest.mark.parametrize("path", PAPER, ids=rel)
def test_paper_settings(path):
    """The settings both papers' appendices give, the same in every recipe."""
    r = load_recipe(path)
    m, t, d = r.model, r.train, r.decode
    assert (m.d_model, m.ffn_dim, m.heads, m.encoder_layers, m.decoder_layers) == (512, 2048, 8, 6, 6)
    assert m.normalize_before is False and m.dropout == 0.3
    assert t.label_smoothing == 0.1 and t.betas == (0.9, 0.98) and t.warmup_steps == 4000
    assert t.lr in (7e-4, 9e-4, 1e-3, 3e-3)
    assert t.patience == 12 and t.average_checkpoints == 4
    assert d.beam == 4 and d.lenpen == 0.6
    if m.family == "concat":
        assert m.cd_normalize == "window_tokens"
    pair = NAME.match(path.stem)["pair"]
    effective = r.data.max_tokens * 4 * t.update_freq
    assert abs(effective - PAIR_BATCH[pair]) / PAIR_BATCH[pair] < 0.1, f"{rel(path)}: {effective} tokens per update"
    assert r.data.path in header(path), "the header gives the `ctxmt prepare` command that writes data.path"


@pytest.mark.parametrize("path", PAPER, ids=rel)
def test_learning_rate_and_early_stopping_follow_the_authors_scripts(path):
    """The authors' scripts (github.com/lorelupo/focused-concat): lr 1e-3 for base and s4to4, 9e-4 for the CD runs;
    their En→De CD runs stop on the undiscounted window loss (--original-loss-for-stopping), their En→Ru CD runs on
    the discounted loss. Each header says which, and whether a script fixes the value for that very system."""
    r, text = load_recipe(path), header(path)
    discounted = r.model.family == "concat" and r.model.cd < 1
    assert r.train.lr == (9e-4 if discounted else 1e-3)
    assert re.search(r"^# Learning rate: (9e-4|1e-3)(, as the authors' scripts| is a choice)", text, re.M)
    pair = NAME.match(path.stem)["pair"]
    assert r.train.early_stop_on == ("discounted_loss" if discounted and pair == "en_ru" else "window_loss")
    if discounted:
        stop = re.search(r"^# Early stopping: (.*?)(?=^# [A-Z])", text, re.M | re.S)
        assert stop, f"{rel(path)}: the header does not say what early stopping uses"
        said = " ".join(stop.group(1).split())
        assert ("context-discounted dev loss" if pair == "en_ru" else "--original-loss-for-stopping") in said


@pytest.mark.parametrize("path", PAPER, ids=rel)
def test_headers_say_what_persists(path):
    """Lupo et al. 2023, §2.2: the sentence position encoding persists; each persistent recipe says which part."""
    m = load_recipe(path).model
    if m.family != "concat" or not m.persistent or (m.segment is None and m.shift is None):
        return
    text = " ".join(header(path).split())
    part = ("whole PSE vector" if m.pse is not None else "segment-shifted positions" if m.shift is not None
            else "segment embeddings are re-added")
    assert f"Persistence (Lupo et al. 2023, §2.2): the {part}" in text
    if m.pse is None and m.shift is None:
        assert "token positions are added once, at the input" in text


def test_table11_high_resource_rows_all_have_a_recipe():
    """Lupo et al. 2023, Table 11 'High Resource Setting': base, s4to4, s4to4+CD and three sentence position rows."""
    high = {p.stem for p in (RECIPES / PAPER_DIRS[1]).glob("en_de_high_*.yaml")}
    assert high == {f"en_de_high_{s}" for s in ("base", "s4to4", "s4to4_cd", "s4to4_shift_pers_cd",
                                                 "s4to4_sin_pers_pse_cd", "s4to4_lrn_pers_cd")}
    for stem in ("en_de_high_base", "en_de_high_s4to4"):
        text = header(RECIPES / PAPER_DIRS[1] / f"{stem}.yaml")
        assert "Reproduces: Table 11 'High Resource Setting'" in text and "data/en_de_high" in text


def test_names_and_save_dirs_unique():
    recipes = [load_recipe(p) for p in ALL]
    names = [r.name for r in recipes]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    dirs = [r.train.save_dir for r in recipes]
    assert len(dirs) == len(set(dirs))


def test_systems_shared_by_both_papers_are_identical():
    """base / s4to4 / s4to4_cd / ... appear in both papers' tables: the two recipes must describe one system."""
    shared = [p for p in (RECIPES / PAPER_DIRS[1]).glob("*.yaml") if (RECIPES / PAPER_DIRS[0] / p.name).is_file()]
    assert {p.stem for p in shared} >= {"en_ru_base", "en_ru_s4to4", "en_ru_s4to4_cd", "en_ru_s4to4_shift_cd",
                                        "en_de_base", "en_de_s4to4_cd", "en_de_s4to4_lrn_cd"}
    for path in shared:
        a = load_recipe(path).model_dump(mode="json")
        b = load_recipe(RECIPES / PAPER_DIRS[0] / path.name).model_dump(mode="json")
        for dump in (a, b):
            dump.pop("name"), dump.pop("description"), dump["train"].pop("save_dir")
        assert a == b, path.name


@pytest.mark.parametrize("path", QUICKSTART, ids=rel)
def test_quickstart_recipes_train_a_fixed_budget(path):
    """Figures independent of machine speed: an update budget, no wall-time limit, a pinned thread count."""
    r = load_recipe(path)
    assert r.train.max_minutes is None and r.train.threads is not None
    assert r.train.max_steps <= 3000                                         # the gated MBE needs 3,000
    assert r.train.save_dir == f"quickstart/{path.stem}" and r.data.path == "quickstart/data"
    assert set(DEFAULT_SYSTEMS) <= {p.stem for p in QUICKSTART}
