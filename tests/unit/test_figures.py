"""The analyses' figures: each writes a PNG that opens, and draws what it was given where it was asked to."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

from ctxmt_cli import figures
from ctxmt_cli.errors import CtxmtError

pytest.importorskip("matplotlib", reason="matplotlib is in the test extra: pip install -e '.[test]'")
from matplotlib.image import imread  # noqa: E402


def opens(path) -> tuple[int, int]:
    """(height, width) of a PNG read back by matplotlib; both must be positive."""
    assert path.is_file() and path.stat().st_size > 0
    pixels = imread(path)
    assert pixels.ndim == 3 and pixels.shape[2] in (3, 4)
    assert pixels.shape[0] > 50 and pixels.shape[1] > 50
    return pixels.shape[:2]


def image_axes(fig) -> list:
    return [ax for ax in fig.axes if ax.images and ax.get_label() != "<colorbar>"]


def attention(layers: int, queries: int, keys: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.dirichlet(np.ones(keys), size=queries) for _ in range(layers)]  # rows sum to 1, like softmax


def test_attention_maps_one_panel_per_layer_with_the_sentence_boundaries(tmp_path):
    maps = attention(layers=4, queries=9, keys=12)
    path = tmp_path / "maps" / "window.png"                 # missing directories are created
    fig = figures.attention_maps(maps, [3, 6], [4, 8], "encoder self", path,
                                 [f"q{i}" for i in range(9)], [f"k{i}" for i in range(12)])
    opens(path)
    panels = image_axes(fig)
    assert len(panels) == 4
    for ax, expected in zip(panels, maps, strict=True):
        np.testing.assert_allclose(np.asarray(ax.images[0].get_array()), expected)
        horizontal = sorted(ln.get_ydata()[0] for ln in ax.lines if ln.get_ydata()[0] == ln.get_ydata()[1])
        vertical = sorted(ln.get_xdata()[0] for ln in ax.lines if ln.get_xdata()[0] == ln.get_xdata()[1])
        assert len(ax.lines) == 4 and horizontal == [2.5, 5.5] and vertical == [3.5, 7.5]
        assert [t.get_text() for t in ax.get_xticklabels()] == [f"k{i}" for i in range(12)]
        assert [t.get_text() for t in ax.get_yticklabels()] == [f"q{i}" for i in range(9)]
        assert ax.images[0].get_clim() == (0.0, max(float(m.max()) for m in maps))   # one scale for all layers


def test_attention_maps_leave_out_token_labels_past_the_limit(tmp_path):
    n = figures.MAX_LABELS + 1
    fig = figures.attention_maps(attention(1, n, n), [], [], "long", tmp_path / "a.png",
                                 [str(i) for i in range(n)], [str(i) for i in range(n)])
    opens(tmp_path / "a.png")
    labels = [t.get_text() for t in image_axes(fig)[0].get_xticklabels()]
    assert len(labels) < n                                  # matplotlib's own numeric ticks, not every token


def test_attention_maps_refuse_inconsistent_input(tmp_path):
    with pytest.raises(ValueError, match="same shape"):
        figures.attention_maps([np.ones((2, 3)), np.ones((3, 3))], [], [], "x", tmp_path / "a.png")
    with pytest.raises(ValueError, match="outside"):
        figures.attention_maps([np.ones((2, 3))], [5], [], "x", tmp_path / "a.png")
    with pytest.raises(ValueError, match="labels"):
        figures.attention_maps([np.ones((2, 3))], [], [], "x", tmp_path / "a.png", key_labels=["a"])
    assert not (tmp_path / "a.png").exists()


def test_layer_head_grid_annotates_every_head_of_every_kind(tmp_path):
    rng = np.random.default_rng(1)
    values = {"encoder self": rng.random((2, 4)), "decoder self": rng.random((2, 4)), "cross": rng.random((2, 4))}
    values["cross"][1, 2] = math.nan                        # a head without data
    fig = figures.layer_head_grid(values, "entropy", tmp_path / "grid.png", fmt=".3f")
    opens(tmp_path / "grid.png")
    panels = image_axes(fig)
    assert [ax.get_title() for ax in panels] == list(values)
    for ax, matrix in zip(panels, values.values(), strict=True):
        texts = {(round(t.get_position()[1]), round(t.get_position()[0])): t.get_text() for t in ax.texts}
        assert len(ax.texts) == 8 and len(texts) == 8
        for (layer, head), value in np.ndenumerate(matrix):
            assert texts[(layer, head)] == (format(value, ".3f") if math.isfinite(value) else "n/a")


def test_assignment_map_tokens_along_x_one_row_per_group(tmp_path):
    tokens = "Die Katze schläft , weil sie müde ist . </s>".split()
    weights = np.random.default_rng(2).dirichlet(np.ones(5) * 0.3, size=len(tokens))   # (tokens, groups)
    fig = figures.assignment_map(weights, tokens, "Latent Grouping", tmp_path / "assign.png")
    opens(tmp_path / "assign.png")
    (ax,) = image_axes(fig)
    np.testing.assert_allclose(np.asarray(ax.images[0].get_array()), weights.T)        # (groups, tokens)
    assert [t.get_text() for t in ax.get_xticklabels()] == tokens
    assert [t.get_text() for t in ax.get_yticklabels()] == ["1", "2", "3", "4", "5"]
    with pytest.raises(ValueError, match="tokens"):
        figures.assignment_map(weights, tokens[:-1], "x", tmp_path / "b.png")


def test_bar_chart_one_bar_per_value_and_none_for_a_missing_one(tmp_path):
    series = {"s2to2": [30.0, 20.5, 18.0], "s2to2 + CD": [30.5, 29.8, math.nan]}
    fig = figures.bar_chart(["2", "3", "4"], series, "BLEU per window size", tmp_path / "bars.png", "BLEU",
                            "test window size")
    opens(tmp_path / "bars.png")
    (ax,) = fig.axes
    visible = [bar for bar in ax.patches if bar.get_visible()]
    assert len(visible) == 5
    assert sorted(bar.get_height() for bar in visible) == sorted(v for s in series.values() for v in s
                                                                 if math.isfinite(v))
    assert [t.get_text() for t in ax.get_legend().get_texts()] == list(series)
    assert sorted(t.get_text() for t in ax.texts) == sorted(["30.0", "20.5", "18.0", "30.5", "29.8"])
    with pytest.raises(ValueError, match="categories"):
        figures.bar_chart(["2"], series, "x", tmp_path / "c.png", "BLEU")


def test_line_chart_one_line_per_run_and_kind(tmp_path):
    lines = {"a": {"train": ([1, 2, 3], [3.0, 2.0, 1.5]), "valid": ([2], [2.2])}, "b": {"train": ([1, 2], [4.0, 3.0])}}
    fig = figures.line_chart(lines, "loss", "nats", tmp_path / "loss.png", note="definition")
    opens(tmp_path / "loss.png")
    (ax,) = fig.axes
    drawn = {ln.get_label(): (list(ln.get_xdata()), list(ln.get_ydata())) for ln in ax.lines}
    assert drawn == {"a (train)": ([1, 2, 3], [3.0, 2.0, 1.5]), "a (valid)": ([2], [2.2]),
                     "b (train)": ([1, 2], [4.0, 3.0])}
    colours = {ln.get_label(): ln.get_color() for ln in ax.lines}
    assert colours["a (train)"] == colours["a (valid)"] != colours["b (train)"]
    assert "definition" in [t.get_text() for t in fig.texts]


def test_selection_maps_blank_and_hatch_what_was_dropped_and_grey_its_labels(tmp_path):
    tokens = "a b c <brk> x y </s>".split()
    bottom, top = attention(layers=2, queries=7, keys=7, seed=3)
    absent = np.asarray([False, True, False, True, False, False, False])    # b and <brk> gone before the top layer
    dropped = absent | np.asarray([True, False, False, False, False, False, False])   # a goes at the top layer
    top[absent, :], top[:, absent] = np.nan, np.nan
    fig = figures.selection_maps([bottom, top], ["(a) bottom", "(b) top"], [np.zeros(7, bool), absent], dropped,
                                 [4], tokens, "Figure 6", tmp_path / "sel.png", note="grey: dropped")
    opens(tmp_path / "sel.png")
    first, second = image_axes(fig)
    assert np.ma.getmaskarray(second.images[0].get_array())[:, 1].all()    # blank rows and columns
    assert not np.ma.getmaskarray(first.images[0].get_array()).any()
    def hatched(ax) -> int:
        return sum(1 for p in ax.patches if p.get_hatch())

    assert (hatched(first), hatched(second)) == (0, 2 * int(absent.sum()))
    for ax in (first, second):
        grey = [t.get_text() for t in ax.get_xticklabels() if t.get_color() != "black"]
        assert grey == ["a", "b", "<brk>"] and [t.get_text() for t in ax.get_yticklabels()] == tokens
        (marks,) = ax.collections
        assert sorted(marks.get_offsets()[:, 0].tolist()) == [0, 1, 3]    # a red x above each dropped token
    with pytest.raises(ValueError, match="square"):
        figures.selection_maps([bottom[:3]], ["x"], [absent], dropped, [], None, "x", tmp_path / "b.png")


def test_kept_share_chart_one_line_per_side_in_percent(tmp_path):
    series = {"source": ([2, 3, 4], [0.6, 0.52, 0.48]), "target": ([2, 3, 4], [0.5, None, 0.4])}
    fig = figures.kept_share_chart(series, "kept", tmp_path / "kept.png", note="pooled")
    opens(tmp_path / "kept.png")
    (ax,) = fig.axes
    drawn = {ln.get_label(): np.asarray(ln.get_ydata(), dtype=float) for ln in ax.lines}
    np.testing.assert_allclose(drawn["source"], [60.0, 52.0, 48.0])
    assert np.isnan(drawn["target"][1]) and drawn["target"][2] == pytest.approx(40.0)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["source", "target"]
    assert sorted(t.get_text() for t in ax.texts) == sorted(["60.0", "52.0", "48.0", "50.0", "40.0"])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["2", "3", "4"]
    with pytest.raises(ValueError, match="layers"):
        figures.kept_share_chart({"source": ([2, 3], [0.5])}, "x", tmp_path / "c.png")


def test_missing_matplotlib_is_one_line_saying_how_to_install(monkeypatch, tmp_path):
    for name in ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, name, None)            # import of any of them now fails
    with pytest.raises(CtxmtError, match=r"pip install 'ctxmt\[plot\]'") as err:
        figures.bar_chart(["a"], {"s": [1.0]}, "x", tmp_path / "x.png", "y")
    assert "\n" not in str(err.value) and "pip install matplotlib" in str(err.value)
    assert not (tmp_path / "x.png").exists()


def test_the_package_imports_no_matplotlib_until_something_is_drawn():
    code = ("import sys, ctxmt_cli.cli, ctxmt_cli.figures, ctxmt_cli.analysis.curves; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'matplotlib'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
