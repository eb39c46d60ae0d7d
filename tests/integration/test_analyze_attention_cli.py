"""``ctxmt analyze-attention`` end to end on tiny trained models of every family, and ``compare``."""

from __future__ import annotations

import json
import math
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import torch

from ctxmt_cli.analysis import attention as attention_module
from ctxmt_cli.analysis.attention_run import AttentionRequest, run_attention
from ctxmt_cli.core.probe import Collect
from ctxmt_cli.data.batching import window_batch
from ctxmt_cli.data.store import PreparedData
from ctxmt_cli.data.windows import WindowDataset, WindowSpec
from ctxmt_cli.models.loading import load_model
from tests.integration.conftest import ROOT, assert_user_error, run_cli, tiny_sets

RECIPES = {"concat": "concat.yaml", "sentence": "sentence.yaml", "caching": "grouping.yaml", "mbe": "mbe.yaml"}
TWO_LAYERS = ["--set", "model.encoder_layers=2", "--set", "model.decoder_layers=2"]


@pytest.fixture(scope="module")
def checkpoints(synthetic_dir, tmp_path_factory) -> dict[str, Path]:
    """A tiny 2-layer model of each family, trained 4 updates on the synthetic data."""
    root, out = tmp_path_factory.mktemp("attention"), {}
    for family, recipe in RECIPES.items():
        result = run_cli("train", ROOT / "recipes" / "quickstart" / recipe,
                         *tiny_sets(synthetic_dir, root / family), *TWO_LAYERS)
        assert result.exit_code == 0, result.output
        out[family] = root / family / "checkpoint_best.pt"
    return out


def analyze(ckpt: Path, out: Path, *extra) -> dict:
    result = run_cli("analyze-attention", "-c", ckpt, "--out", out, *extra)
    assert result.exit_code == 0, result.output
    return json.loads((out / "analysis.json").read_text())


@pytest.mark.parametrize("family", list(RECIPES))
def test_every_family_gets_bounded_figures_and_pngs(checkpoints, family, tmp_path):
    from matplotlib.image import imread

    result = analyze(checkpoints[family], tmp_path, "--max-sentences", "20", "--show", "1")
    assert result["sentences"] == 20 and result["family"] == family
    kinds = {"encoder_self", "decoder_self", "cross"} | ({"context"} if family == "caching" else set())
    assert set(result["by_kind"]) == kinds
    for kind, v in result["by_kind"].items():
        assert np.shape(v["entropy"]) == (2, 4), kind                      # layers x heads
        assert (np.asarray(v["entropy"]) >= 0).all()
        assert ((0 <= np.asarray(v["entropy_normalized"])) & (np.asarray(v["entropy_normalized"]) <= 1 + 1e-9)).all()
        share = np.asarray(v["current_share"], dtype=float)
        assert ((0 <= share) & (share <= 1 + 1e-9)).all(), kind
    summary = result["summary"]
    assert summary["entropy"] > 0 and 0 <= summary["current_share"] <= 1 and "Table 5" in summary["definition"]
    if family == "sentence":                                                # no context: all mass stays home
        assert summary["current_share"] == pytest.approx(1.0)
    if family == "mbe":                                                     # z is a key that is not the sentence
        assert summary["current_share"] < 1.0
    if family == "caching":
        groups = result["assignment"]["groups"]
        assert 1 <= result["assignment"]["groups_used_per_sentence"] <= groups
        assert sum(result["assignment"]["group_mass_share"]) == pytest.approx(1.0)
    lines = (tmp_path / "sentences.jsonl").read_text().splitlines()
    assert len(lines) == 20
    pngs = sorted(p.name for p in tmp_path.glob("*.png"))
    assert {"entropy_grid.png", "current_share_grid.png", "window1_cross.png"} <= set(pngs)
    assert ("window1_assignment.png" in pngs) == (family == "caching")
    assert "kept_context" not in result                                      # no selection
    assert not {"kept_context.png", "window1_selection.png"} & set(pngs)
    for png in pngs:
        assert imread(tmp_path / png).shape[0] > 50


#: a tiny offline HanoiT (1 previous + 1 next sentence): 1 unified layer, then 2 selection layers; bilingual: with
#: the target side of the same context sentences (the reference: no first pass to train for the test)
HANOIT = ["--set", "model.encoder_layers=3", "--set", "model.unified_layers=1", "--set", "model.selection_layers=2",
          "--set", "model.q=0.5", "--set", "model.src_context_sentences=1", "--set", "model.src_next_sentences=1"]
BILINGUAL = ["--set", "model.bilingual=true", "--set", "model.target_context_from=reference"]


@pytest.fixture(scope="module", params=["monolingual", "bilingual"])
def hanoit_checkpoint(request, synthetic_dir, tmp_path_factory) -> tuple[str, Path]:
    """A tiny HanoiT (monolingual, then bilingual) trained 4 updates through the CLI."""
    save = tmp_path_factory.mktemp("attention") / request.param
    extra = BILINGUAL if request.param == "bilingual" else []
    result = run_cli("train", ROOT / "recipes" / "quickstart" / "hanoit.yaml",
                     *tiny_sets(synthetic_dir, save), *HANOIT, *extra)
    assert result.exit_code == 0, result.output
    return request.param, save / "checkpoint_best.pt"


def test_hanoit_kept_shares_per_selection_layer_and_the_selection_maps(hanoit_checkpoint, tmp_path):
    from matplotlib.image import imread

    kind, checkpoint = hanoit_checkpoint
    run = run_cli("analyze-attention", "-c", checkpoint, "--out", tmp_path, "--max-sentences", "12", "--show", "1")
    assert run.exit_code == 0, run.output
    result = json.loads((tmp_path / "analysis.json").read_text())
    assert result["family"] == "hanoit" and result["context"]["src_next"] == 1
    kept = result["kept_context"]
    sides = ["source", "target"] if kind == "bilingual" else ["source"]
    assert list(kept) == [*sides, "definition"] and "Figure 4" in kept["definition"]
    assert result["context"].get("target_concat") == ("reference" if kind == "bilingual" else None)
    table = {line.split()[0]: line.split()[1:3] for line in run.stdout[run.stdout.index("Figure 4"):].splitlines()[2:]
             if line.strip()}
    for side in sides:
        series = kept[side]
        assert series["layers"] == [2, 3] and series["context"] > 0
        shares = series["share"]
        assert all(0.0 <= s <= 1.0 for s in shares) and shares[0] >= shares[1]      # never more after a drop
        assert shares == pytest.approx([k / series["context"] for k in series["kept"]])
        assert table[side] == [f"{100 * s:.1f}%" for s in shares]
    control = kept["source"]["current_control"]                            # the rule on the current tokens
    assert len(control) == 2 and all(0.0 <= c <= 1.0 for c in control)
    assert "current_control" not in kept.get("target", {})
    assert table["current*"] == [f"{100 * c:.1f}%" for c in control]
    for png in ("kept_context.png", "window1_selection.png", "window1_encoder_self.png"):
        pixels = imread(tmp_path / png)
        assert pixels.ndim == 3 and pixels.shape[0] > 100 and pixels.shape[1] > 100, png
    numbers = analyze(checkpoint, tmp_path / "numbers", "--max-sentences", "12", "--no-plots")
    assert numbers["kept_context"] == kept and not list((tmp_path / "numbers").glob("*.png"))


def test_hanoit_on_files_reads_the_reference_as_target_context(hanoit_checkpoint, synthetic_dir, tmp_path):
    kind, checkpoint = hanoit_checkpoint
    raw = synthetic_dir / "raw"
    files = analyze(checkpoint, tmp_path, "--src", raw / "test.src", "--ref", raw / "test.tgt", "--max-sentences",
                    "6", "--no-plots")
    assert list(files["kept_context"])[:-1] == (["source", "target"] if kind == "bilingual" else ["source"])


def direct_entropy(checkpoint: Path, data: Path, n: int) -> dict[str, np.ndarray]:
    """Mean entropy per kind x layer x head, each window run alone (no padding) and reduced in numpy."""
    loaded = load_model(checkpoint)
    cfg = loaded.recipe.model
    spec = WindowSpec(cfg.src_context_sentences, cfg.tgt_context_sentences, loaded.recipe.data.max_window_tokens)
    dataset = WindowDataset(PreparedData(data).split("test"), spec, loaded.vocab.brk, loaded.vocab.eos)
    sums: dict[str, np.ndarray] = {}
    counts: dict[str, int] = {}
    for j in dataset.indices[:n]:
        probe = Collect()
        with torch.no_grad():
            loaded.model(window_batch(dataset, np.asarray([j]), 0, loaded.vocab.bos), probe=probe)
        for kind, maps in probe.maps.items():
            p = np.stack([m[0].numpy() for m in maps]).astype(np.float64)   # (L, H, Tq, Tk), no padding
            logs = np.log(np.where(p > 0, p, 1.0))
            sums[kind] = sums.get(kind, 0) + (-(p * logs).sum(-1)).sum(-1)  # (L, H)
            counts[kind] = counts.get(kind, 0) + p.shape[2]
    return {kind: sums[kind] / counts[kind] for kind in sums}


def test_entropy_equals_a_direct_unbatched_computation(checkpoints, synthetic_dir, tmp_path):
    result = analyze(checkpoints["concat"], tmp_path, "--max-sentences", "12", "--no-plots", "--max-tokens", "300")
    expected = direct_entropy(checkpoints["concat"], synthetic_dir, 12)
    for kind, values in expected.items():
        np.testing.assert_allclose(np.asarray(result["by_kind"][kind]["entropy"]), values, rtol=1e-4)


def test_compare_runs_approximate_randomisation(checkpoints, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    analyze(checkpoints["concat"], a, "--max-sentences", "30", "--no-plots")
    analyze(checkpoints["sentence"], b, "--max-sentences", "30", "--no-plots")
    same = run_cli("analyze-attention", "compare", a, a, "--trials", "50")
    assert same.exit_code == 0 and "p = 1.0000" in same.stdout, same.output
    result = run_cli("analyze-attention", "compare", a, b, "--trials", "200", "--seed", "3")
    assert result.exit_code == 0, result.output
    assert "entropy" in result.stdout and "current_share" in result.stdout
    p_values = [float(line.rsplit("p = ", 1)[1]) for line in result.stdout.splitlines() if "p = " in line]
    assert len(p_values) == 5 and all(1 / 201 <= p <= 1 for p in p_values)   # the five summary numbers
    assert run_cli("analyze-attention", "compare", a, b, "--trials", "200", "--seed", "3").stdout == result.stdout


def test_memory_stays_bounded_on_64_sentence_windows(checkpoints, synthetic_dir, tmp_path, monkeypatch):
    """Windows of 64 sentences: each map handed to the statistics is one batch's (token budget) and the
    statistics' own allocations stay small; nothing keeps maps."""
    sentences = [s for s in (synthetic_dir / "raw" / "test.src").read_text().splitlines() if s.strip()]
    targets = [s for s in (synthetic_dir / "raw" / "test.tgt").read_text().splitlines() if s.strip()]
    def short(lines: list[str]) -> str:                                  # 64 three-word sentences: keeps it fast
        return "\n".join(" ".join(s.split()[:3]) for s in lines[:64]) + "\n"

    (tmp_path / "src.txt").write_text(short(sentences))                     # one 64-sentence document
    (tmp_path / "ref.txt").write_text(short(targets))
    largest, widest = [], []
    original = attention_module.AttentionStats.__call__

    def spy(self, view):
        largest.append(view.weights.numel())
        widest.append(view.weights.size(-1))
        return original(self, view)

    monkeypatch.setattr(attention_module.AttentionStats, "__call__", spy)
    tracemalloc.start()
    result = run_attention(AttentionRequest(
        checkpoint=checkpoints["concat"], out=tmp_path / "out", src=tmp_path / "src.txt", ref=tmp_path / "ref.txt",
        context=63, plots=False, max_tokens=1024))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert result["context"] == {"src": 63, "tgt": 63, "src_next": 0} and result["sentences"] == 64
    longest = 2 * 1024                                                        # max_window_tokens, both sides
    assert max(widest) >= 64 * 4                                              # 64 sentences of >= 3 tokens + <brk>
    assert max(largest) <= 1024 * 4 * longest                                 # budget x heads x longest keys
    assert peak < 32 * 2**20, peak                                            # numpy/python side: no map kept


def test_bad_requests_are_one_line(checkpoints, tmp_path, monkeypatch):
    ckpt = checkpoints["concat"]
    assert_user_error(run_cli("analyze-attention", "-c", ckpt, "--src", tmp_path / "x.txt", "--out", tmp_path / "o"),
                      "--src and --ref")
    assert_user_error(run_cli("analyze-attention", "-c", checkpoints["sentence"], "--context", "2", "--out",
                              tmp_path / "s"), "reads no context")
    assert_user_error(run_cli("analyze-attention", "-c", ckpt, "--show", "100000", "--out", tmp_path / "w",
                              "--no-plots"), "--show 100000")
    assert_user_error(run_cli("analyze-attention", "-c", ckpt, "--show", "x", "--out", tmp_path / "w"), "--show")
    assert_user_error(run_cli("analyze-attention", "compare", tmp_path), "compare RUN_A RUN_B")
    assert_user_error(run_cli("analyze-attention"), "--checkpoint")
    assert_user_error(run_cli("analyze-attention", "-c", ckpt, "--trials", "5", "--out", tmp_path / "t"), "--trials")
    assert_user_error(run_cli("analyze-attention", "compare", tmp_path, tmp_path, "-c", ckpt), "--checkpoint")
    out = tmp_path / "done"
    analyze(ckpt, out, "--max-sentences", "3", "--no-plots")
    before = (out / "analysis.json").read_text()
    assert_user_error(run_cli("analyze-attention", "-c", ckpt, "--out", out, "--no-plots"), "--force")
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.setitem(sys.modules, name, None)                         # matplotlib missing
    text = assert_user_error(run_cli("analyze-attention", "-c", ckpt, "--out", out, "--force"), "pip install")
    assert "matplotlib" in text and (out / "analysis.json").read_text() == before
    assert math.isfinite(json.loads(before)["summary"]["entropy"])
    other = tmp_path / "other"
    analyze(ckpt, other, "--max-sentences", "4", "--no-plots")
    assert_user_error(run_cli("analyze-attention", "compare", out, other), "different sentences")
