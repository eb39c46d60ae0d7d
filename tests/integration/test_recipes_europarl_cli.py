"""The Europarl En→Fr recipes (recipes/europarl_enfr/) on a CI-sized slice of the real files.

A 2,000-pair slice of ../shared/data/europarl_enfr's training set, read straight from the .xz files (only
the slice is decompressed) and written back compressed, is prepared through the CLI with the recipes'
documented options (cleaning included); each recipe's small variant then trains a few steps on tiny dims.
Skipped, with the reason, where the shared data is absent (e.g. a checkout without ../shared).
"""

from __future__ import annotations

import json
import lzma
from itertools import islice
from pathlib import Path

import pytest

from ctxmt_cli.config import load_recipe
from tests.integration.conftest import ROOT, run_cli, tiny_sets

pytest.importorskip("ctxmt_cli.train.trainer")

EUROPARL = ROOT.parent / "shared" / "data" / "europarl_enfr"
FOLDER = ROOT / "recipes" / "europarl_enfr"
SMALL = sorted(FOLDER.glob("*_small.yaml"))
TRAIN_PAIRS, VALID_PAIRS = 2000, 200


def _slice(src: Path, dst: Path, lines: int) -> None:
    """The first ``lines`` lines of ``src`` (plain or .xz) into ``dst`` (compressed when its name ends in .xz)."""
    opener = lzma.open if src.suffix == ".xz" else open
    with opener(src, "rb") as f:
        head = b"".join(islice(f, lines))
    with (lzma.open if dst.suffix == ".xz" else open)(dst, "wb") as g:
        g.write(head)


@pytest.fixture(scope="module")
def europarl(tmp_path_factory) -> Path:
    """The slice, prepared as the recipes' headers say (vocabulary shrunk to fit 2,000 pairs)."""
    if not (EUROPARL / "train.en.xz").is_file():
        pytest.skip(f"the Europarl En-Fr data is not at {EUROPARL} (../shared/data/europarl_enfr beside the "
                    "checkout); the recipes' CI test needs it")
    raw = tmp_path_factory.mktemp("europarl")
    for part in ("en", "fr", "docids"):
        _slice(EUROPARL / f"train.{part}.xz", raw / f"train.{part}.xz", TRAIN_PAIRS)
        _slice(EUROPARL / f"valid.{part}", raw / f"valid.{part}", VALID_PAIRS)
    out = raw / "prepared"
    result = run_cli("prepare", "text", "--train", raw / "train", "--valid", raw / "valid", "--src-lang", "en",
                     "--tgt-lang", "fr", "--spm-type", "bpe", "--vocab-size", 1000, "--max-words", 80,
                     "--max-length-ratio", 9, "--workers", 2, "--out", out)
    assert result.exit_code == 0, result.output
    assert "cleaned train: dropped" in result.output
    return out


def test_the_slice_prepares_from_xz_with_cleaning_counted(europarl):
    meta = json.loads((europarl / "meta.json").read_text(encoding="utf-8"))
    dropped = meta["clean"]["dropped"]
    assert meta["splits"]["train"]["sentences"] + sum(dropped[r] for r in ("too_short", "too_long",
                                                                           "length_ratio")) == TRAIN_PAIRS
    assert meta["splits"]["valid"]["sentences"] == VALID_PAIRS                 # valid is never cleaned
    assert meta["source"]["inputs"]["train"]["src"].endswith("train.en.xz")
    assert meta["vocabulary"]["sampled_pairs"] == TRAIN_PAIRS


def _tiny(recipe: Path) -> list[str]:
    """Tiny dims that keep each family's code path (HanoiT: one unified and one selection layer)."""
    model = load_recipe(recipe).model
    sets = ["train.threads=1", "train.max_minutes=null"]
    if model.family == "hanoit":
        sets += ["model.encoder_layers=2", "model.unified_layers=1", "model.selection_layers=1"]
    if model.family == "caching":
        sets += ["model.categorizer_hidden=16"]
    return [arg for s in sets for arg in ("--set", s)]


@pytest.mark.parametrize("recipe", SMALL, ids=lambda p: p.stem)
def test_small_recipe_trains_on_the_slice(recipe, europarl, tmp_path):
    save = tmp_path / "run"
    result = run_cli("train", recipe, *tiny_sets(europarl, save), *_tiny(recipe))
    assert result.exit_code == 0, result.output
    assert (save / "checkpoint_best.pt").is_file()


def test_every_system_has_a_base_and_a_small_variant():
    names = {p.stem for p in FOLDER.glob("*.yaml")}
    systems = {n.rsplit("_", 1)[0] for n in names}
    assert systems == {"sentence", "concat_s2to2_cd", "concat_s4to4_shift_cd", "caching_grouping_c2", "mbe_enc",
                       "hanoit_offline"}
    assert names == {f"{s}_{size}" for s in systems for size in ("base", "small")}
    for path in FOLDER.glob("*.yaml"):
        recipe = load_recipe(path)
        assert recipe.data.path == ("data/europarl_enfr_8k" if path.stem.endswith("_small") else "data/europarl_enfr")
        assert f"--out {recipe.data.path}\n" in path.read_text(encoding="utf-8")    # the header says how


def _table_script():
    """two_step_table.py (a script beside the recipes, not a module of the package), loaded by its path."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("two_step_table", FOLDER / "two_step_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_two_step_table_reads_the_fallbacks_of_a_json_translate_log(concat_checkpoint, two_documents, tmp_path):
    result = run_cli("translate", two_documents, "-c", concat_checkpoint, "--beam", 1, "--target-mode", "generate",
                     "-o", tmp_path / "hyp.txt", "--log-format", "json")
    assert result.exit_code == 0, result.output
    log = tmp_path / "translate.log"
    log.write_text("a plain line first\n" + result.stderr, encoding="utf-8")     # as two_step.sh tees it
    sentences = sum(1 for line in two_documents.read_text().splitlines() if line.strip())
    found = _table_script().counters(log)
    assert found["sentences"] == sentences and 0 <= found["fallbacks"] <= sentences
    assert _table_script().counters(tmp_path / "missing.log") == {}


def test_the_two_step_table_says_identical_instead_of_the_smallest_p_value():
    table = _table_script()
    assert table.p_text(1 / 1001, identical=True) == "identical"
    assert table.p_text(0.25, identical=False) == "p 0.250"
    assert table.versus(0.25, "concat", "sentence_control", identical=True) == "; identical"
    assert table.versus(0.25, "sentence_control", "sentence_control") == ""
