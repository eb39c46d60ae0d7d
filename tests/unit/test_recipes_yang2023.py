"""The recipes of Yang et al.'s HanoiT (recipes/yang2023_hanoit/): Tables 1, 3 and 4 (monolingual context).

Only validation (no model is built): each file names its table, row and dataset with the BLEU the paper prints,
gives the `ctxmt prepare maruf` command that writes its data.path and the tokenized-BLEU evaluation, and carries
§3.2's per-dataset settings; the Table 3 and Table 4 recipes are Table 1's HanoiT recipe with only the layer split
or the next-sentence context changed; the Table 3 averages the headers recompute follow from the figures the
headers quote. The ``table2_*`` files (bilingual context) are another model's and are not checked here.
"""

from __future__ import annotations

import re
from pathlib import Path
from statistics import mean

import pytest

from ctxmt_cli.config import load_recipe
from tests.unit.test_recipes import header

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "recipes" / "yang2023_hanoit"
OURS = sorted(FOLDER.glob("table[134]_*.yaml"))
COLUMN = {"iwslt17": "IWSLT-2017", "nc2016": "NC-2016", "europarl": "Europarl", "wmt19": "WMT-2019"}
SYSTEMS = {"transformer": "sentence", "ect": "concat", "dual_encoder": "caching", "hanoit": "hanoit"}
#: Table 3's rows other than 1 + 5 (which is Table 1's HanoiT recipe)
SPLITS = [(6, 0), (5, 1), (4, 2), (3, 3), (2, 4), (0, 6)]
#: Table 4 covers two datasets
ONLINE = ("iwslt17", "nc2016")
REPRODUCES = re.compile(r"^# Reproduces: Table (\d) row '([^']+)', ([\w-]+): BLEU (\d+\.\d\d)", re.M)
#: the unique fields of a recipe, left out when two recipes are compared
OWN = ("name", "description")


def dataset(path: Path) -> str:
    return path.stem.split("_")[1]


def flat(path: Path) -> str:
    """The header as one line: comment marks and line breaks removed, runs of spaces collapsed."""
    return " ".join(" ".join(line.lstrip("#") for line in header(path).splitlines()).split())


def dump(path: Path) -> dict:
    d = load_recipe(path).model_dump(mode="json")
    for key in OWN:
        d.pop(key)
    d["train"].pop("save_dir")
    return d


def test_every_row_has_a_recipe():
    expected = ({f"table1_{d}_{s}" for d in COLUMN for s in SYSTEMS} | {f"table1_{d}_ect_prev1" for d in COLUMN}
                | {f"table3_{d}_{a}_{b}" for d in COLUMN for a, b in SPLITS}
                | {f"table4_{d}_online" for d in ONLINE})
    assert {p.stem for p in OURS} == expected


@pytest.mark.parametrize("path", OURS, ids=lambda p: p.stem)
def test_recipe_names_its_row_data_and_evaluation(path):
    r, text = load_recipe(path), header(path)
    assert "Yang" in text and "HanoiT" in text
    m = REPRODUCES.search(text)
    assert m, f"{path.name}: no 'Reproduces: Table N row ..., DATASET: BLEU x' line"
    assert path.stem.startswith(f"table{m[1]}_") and m[3] == COLUMN[dataset(path)]
    assert r.data.path == f"data/yang2023_{dataset(path)}"
    prepare = re.search(r"ctxmt prepare maruf (.*?)--out (\S+)", flat(path).replace("\\ ", ""))
    assert prepare and prepare[2] == r.data.path, "the header gives the `ctxmt prepare` command that writes data.path"
    assert all(flag in prepare[1] for flag in ("--moses", "--joint", "--spm-type bpe", "--vocab-size 40000"))
    assert (f"ctxmt evaluate -c runs/yang2023_hanoit/{path.stem}/checkpoint_best.pt --split test --tokenize none"
            in text)
    assert r.name == f"yang2023_{path.stem}" and r.train.save_dir == f"runs/yang2023_hanoit/{path.stem}"


@pytest.mark.parametrize("path", OURS, ids=lambda p: p.stem)
def test_settings_of_section_3_2(path):
    """IWSLT-2017: the small setting (512/1024, 4 heads, dropout 0.3, weight decay 1e-4); the others: base; NC-2016:
    dropout and attention dropout 0.2 for HanoiT only; every system: label smoothing 0.1, 2,048 tokens a batch."""
    r = load_recipe(path)
    m, t, ds = r.model, r.train, dataset(path)
    small = ds == "iwslt17"
    assert (m.d_model, m.ffn_dim, m.heads) == ((512, 1024, 4) if small else (512, 2048, 8))
    assert (m.encoder_layers, m.decoder_layers) == (6, 6)
    if small:
        expected = (0.3, 0.0)
    else:
        expected = (0.2, 0.2) if ds == "nc2016" and m.family == "hanoit" else (0.1, 0.0)
    assert (m.dropout, m.attention_dropout) == expected
    assert t.weight_decay == (1e-4 if small else 0.0)
    assert t.warmup_steps == 4000 and t.label_smoothing == 0.1 and r.data.max_tokens == 2048
    assert r.data.max_tokens_of == "target"                                  # "2048 target tokens"
    assert m.share_embeddings == "all"        # one shared 40K vocabulary
    if m.family == "hanoit":
        assert m.unified_layers + m.selection_layers == 6 and m.src_context_sentences == 1


@pytest.mark.parametrize("ds", COLUMN)
def test_table1_systems(ds):
    """ECT reads 1 previous + 1 next sentence as the paper gives every system (its 1-previous variant kept,
    named _prev1); Dual Encoder one previous sentence (the caching family caches previous sentences only, and says
    so); HanoiT is 1 + 5 with the offline context (1 previous + 1 next)."""
    for system, family in SYSTEMS.items():
        path = FOLDER / f"table1_{ds}_{system}.yaml"
        m, text = load_recipe(path).model, flat(path)
        assert m.family == family
        if system == "ect":
            assert (m.src_context_sentences, m.src_next_sentences, m.tgt_context_sentences, m.segment, m.cd) == (
                1, 1, 0, "learned", 1.0)
            variant = load_recipe(FOLDER / f"table1_{ds}_ect_prev1.yaml").model
            assert (variant.src_context_sentences, variant.src_next_sentences) == (1, 0)
            assert dump(FOLDER / f"table1_{ds}_ect_prev1.yaml")["model"] == {**dump(path)["model"],
                                                                              "src_next_sentences": 0}
        if system == "dual_encoder":
            assert (m.encoder, m.repr, m.integration, m.gate, m.src_context_sentences) == (
                "separate", "tokens", "parallel", True, 1)
        if system == "dual_encoder":
            assert "reads 1 previous sentence" in text and "1 previous + 1 next" in text
        if system == "hanoit":
            assert (m.unified_layers, m.selection_layers, m.src_next_sentences) == (1, 5, 1)
            assert "Split 1 + 5" in text


@pytest.mark.parametrize("ds", COLUMN)
def test_tables_3_and_4_change_only_the_split_or_the_next_sentences(ds):
    table1 = dump(FOLDER / f"table1_{ds}_hanoit.yaml")
    for n1, n2 in SPLITS:
        variant = dump(FOLDER / f"table3_{ds}_{n1}_{n2}.yaml")
        assert (variant["model"]["unified_layers"], variant["model"]["selection_layers"]) == (n1, n2)
        for key in ("unified_layers", "selection_layers"):
            variant["model"][key] = table1["model"][key]
        assert variant == table1
    if ds in ONLINE:
        online = dump(FOLDER / f"table4_{ds}_online.yaml")
        assert online["model"]["src_next_sentences"] == 0
        online["model"]["src_next_sentences"] = 1
        assert online == table1


def _table3() -> tuple[dict[str, dict[str, float]], dict[str, str]]:
    """Table 3 as the headers quote it: split -> dataset -> BLEU, and split -> the printed average."""
    rows: dict[str, dict[str, float]] = {}
    printed: dict[str, str] = {}
    for path in FOLDER.glob("table3_*.yaml"):
        text, m = flat(path), REPRODUCES.search(header(path))
        rows.setdefault(m[2], {})[dataset(path)] = float(m[4])
        average = re.search(r"printed average over the four datasets: (\d+\.\d\d)", text)[1]
        assert printed.setdefault(m[2], average) == average, f"{path.name}: another average than its row's"
    for ds in COLUMN:
        text = flat(FOLDER / f"table1_{ds}_hanoit.yaml")
        rows.setdefault("1 + 5", {})[ds] = float(re.search(r"Table 3 row '1 \+ 5' \((\d+\.\d\d)\)", text)[1])
    return rows, printed


def test_table3_averages_in_the_headers_follow_from_the_quoted_rows():
    """A header says which printed averages of Table 3 do not follow from its rows, with the recomputed value;
    every other printed average must be its row's mean up to rounding."""
    rows, printed = _table3()
    assert len(rows) == 7 and all(len(r) == 4 for r in rows.values())
    text = flat(FOLDER / "table3_iwslt17_6_0.yaml")
    flagged = {m[1]: (m[2], m[3]) for m in re.finditer(r"(\d \+ \d) prints (\d+\.\d\d) \(rows: (\d+\.\d\d)\)", text)}
    assert set(flagged) == {"5 + 1", "1 + 5"}
    for split, by_dataset in rows.items():
        recomputed = mean(by_dataset.values())
        if split in flagged:
            said_printed, said_rows = flagged[split]
            assert said_printed == printed.get(split, said_printed)
            assert f"{recomputed:.2f}" == said_rows and abs(recomputed - float(said_printed)) > 0.05
        else:
            assert abs(recomputed - float(printed[split])) < 0.01, (split, recomputed, printed[split])


def test_figure5_is_a_q_sweep_of_the_5_1_recipe():
    text = header(FOLDER / "table3_iwslt17_5_1.yaml")
    assert "Figure 5" in text and "for q in 0.1 0.2 0.3 0.4 0.5 0.6 0.7 0.8 0.9 1.0" in text
    assert "--set model.q=$q" in text
