"""The HanoiT recipes (recipes/yang2023_hanoit/, Tables 1, 3 and 4) train and translate through the CLI on tiny dims,
and the folder's real-documents script refuses bad settings with one line.

As tests/integration/test_recipes_cli.py: the recipes keep everything that changes the code path (family, context
sizes, next sentences, segment embeddings, separate encoder, gate, q); only the dimensions, step counts and batch
budget are overridden. HanoiT's N1 + N2 = 6 layers shrink to at most one unified and one selection layer, keeping
which of the two kinds a split has (6 + 0: one unified layer, 0 + 6: one selection layer). Table 3's middle splits
(5 + 1 ... 2 + 4) then all shrink to the 1 + 1 of Table 1's HanoiT recipe, which they equal apart from the split
(tests/unit/test_recipes_yang2023.py), so only one dataset's are trained here: the run stays short.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ctxmt_cli.config import load_recipe
from tests.integration.conftest import assert_trains_and_translates, prepare_recipe_corpus

pytest.importorskip("ctxmt_cli.train.trainer")
pytest.importorskip("ctxmt_cli.decode.translator")

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "recipes" / "yang2023_hanoit"
SCRIPT = FOLDER / "real_iwslt17.sh"
MARUF = ROOT.parent / "shared" / "data" / "maruf2019" / "IWSLT2017"
RECIPES = sorted(p for p in FOLDER.glob("table[134]_*.yaml")
                 if not p.stem.startswith("table3_") or p.stem.startswith("table3_iwslt17_"))
TINY = [
    "model.preset=null", "model.d_model=32", "model.ffn_dim=64", "model.heads=4", "model.decoder_layers=1",
    "train.max_steps=3", "train.valid_every=3", "train.warmup_steps=2", "data.max_tokens=400", "train.threads=1",
]


def tiny_overrides(recipe: Path, data: Path) -> list[str]:
    sets = [f"data.path={data}", *TINY]
    model = load_recipe(recipe).model
    if model.family == "hanoit":
        n1, n2 = min(model.unified_layers, 1), min(model.selection_layers, 1)
        sets += [f"model.encoder_layers={n1 + n2}", f"model.unified_layers={n1}", f"model.selection_layers={n2}"]
    else:
        sets.append("model.encoder_layers=1")
    return [arg for s in sets for arg in ("--set", s)]


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory) -> tuple[Path, Path]:
    """A tiny synthetic corpus prepared through the CLI, and a 2-document input file (4 lines each)."""
    return prepare_recipe_corpus(tmp_path_factory.mktemp("yang2023"), 4)


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: p.stem)
def test_recipe_trains_and_translates(recipe, synthetic, tmp_path):
    data, docs = synthetic
    assert_trains_and_translates(recipe, tiny_overrides(recipe, data), docs, tmp_path)


def _script(tmp_path: Path, script: Path = SCRIPT, **env: str) -> subprocess.CompletedProcess:
    """Run one of the folder's scripts with one thread, OUT under ``tmp_path`` and ``env``."""
    full = {**os.environ, "OMP_NUM_THREADS": "1", "OUT": str(tmp_path / "out"), **env}
    return subprocess.run(["bash", str(script)], env=full, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("case", ["no_data", "out_exists", "unknown_system"])
def test_real_script_refuses_bad_settings(case, tmp_path):
    """One line on stderr, exit 2, and nothing written: no data folder, an existing OUT, an unknown system."""
    env = {"MARUF": str(tmp_path / "missing")} if case == "no_data" else {"MARUF": str(MARUF)}
    if case != "no_data" and not MARUF.is_dir():
        pytest.skip(f"{MARUF} not present")
    if case == "out_exists":
        (tmp_path / "out").mkdir()
        (tmp_path / "out" / "keep.txt").write_text("mine")
    if case == "unknown_system":
        env["SYSTEMS"] = "sentence transformer"
    result = _script(tmp_path, **env)
    assert result.returncode == 2, result.stdout + result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and result.stderr.startswith("real_iwslt17: ")
    assert {"no_data": "MARUF", "out_exists": "exists", "unknown_system": "'transformer'"}[case] in result.stderr
    if case == "out_exists":
        assert [p.name for p in (tmp_path / "out").iterdir()] == ["keep.txt"]
    else:
        assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_real_script_runs_every_system_end_to_end(tmp_path):
    """The real talks through prepare, training (2 updates), translation and tokenized BLEU for each system."""
    if not MARUF.is_dir():
        pytest.skip(f"{MARUF} not present")
    result = _script(tmp_path, MARUF=str(MARUF), UPDATES="2", TEST_TALKS="1", BEAM="1", THREADS="1", VOCAB="1000",
                     SYSTEMS="sentence concat hanoit hanoit_online")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    table = result.stdout.split("system ", 1)[1].splitlines()
    assert [line.split()[0] for line in table[1:5]] == ["sentence", "concat", "hanoit", "hanoit_online"]
    assert "hanoit: kept share of the valid context tokens at step 2: kept_context_layer2" in result.stdout


KEPT = FOLDER / "kept_context.sh"


@pytest.mark.parametrize("case", ["unknown_reading", "unknown_data", "no_europarl", "out_exists"])
def test_kept_context_script_refuses_bad_settings(case, tmp_path):
    """One line on stderr, exit 2, and nothing written: an unknown reading or data, no prepared Europarl, an
    existing OUT."""
    env = {"unknown_reading": {"CHOICES": "text eq6"}, "unknown_data": {"DATA": "nc2016"},
           "no_europarl": {"DATA": "europarl", "EUROPARL": str(tmp_path / "missing")}, "out_exists": {}}[case]
    if case == "out_exists":
        (tmp_path / "out").mkdir()
        (tmp_path / "out" / "keep.txt").write_text("mine")
    result = _script(tmp_path, KEPT, **env)
    assert result.returncode == 2, result.stdout + result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and result.stderr.startswith("kept_context: ")
    expected = {"unknown_reading": "'eq6'", "unknown_data": "'nc2016'", "no_europarl": "not a prepared dataset",
                "out_exists": "exists"}[case]
    assert expected in result.stderr
    if case == "out_exists":
        assert [p.name for p in (tmp_path / "out").iterdir()] == ["keep.txt"]
    else:
        assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_kept_context_script_measures_each_reading(tmp_path):
    """Three readings of the selection trained 4 updates on the synthetic benchmark: a kept share per selection layer
    at each validation, a BLEU and the rule's control on the current tokens, for each."""
    result = _script(tmp_path, KEPT, UPDATES="4", CHOICES="text printed measure", BEAM="1", THREADS="1")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for choice in ("text", "printed", "measure"):
        block = result.stdout.split(f"\n{choice}: test BLEU ", 1)[1].split("\n\n", 1)[0].splitlines()
        assert block[0].endswith("layers 2 / 3 / 4 / 5 / 6")
        steps = [line.split(":")[0].split()[-1] for line in block[1:-1]]
        assert steps == ["1", "2", "3", "4"]
        shares = [float(x) for x in block[-2].split(":")[1].split("(")[0].split("/")]
        assert len(shares) == 5 and all(0.0 <= s <= 100.0 for s in shares)
        assert block[-1].startswith("  the same rule on the current sentence's own tokens")     # the rule's control
        control = [float(x) for x in block[-1].split(": ")[1].split(" / ")]
        assert len(control) == 5 and all(0.0 <= c <= 100.0 for c in control)
