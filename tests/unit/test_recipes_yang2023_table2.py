"""The bilingual recipes of Yang et al. (recipes/yang2023_hanoit/table2_*.yaml, Table 2): HanoiT and ECT.

Only validation (no model is built): one recipe per dataset, each Table 1's HanoiT recipe of the same dataset with
the bilingual options added (the paper gives Table 2 no settings of its own); the header names the row and its
BLEU, the first-pass pipeline (the Table 1 Transformer's checkpoint, `ctxmt first-pass` over train and valid) and
the evaluation with `--first-pass`; every gain a header quotes follows from the figures it quotes.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ctxmt_cli.config import load_recipe
from tests.unit.test_recipes import header

FOLDER = Path(__file__).resolve().parents[2] / "recipes" / "yang2023_hanoit"
BLEU = {"iwslt17": ("IWSLT-2017", "25.04"), "nc2016": ("NC-2016", "25.28"), "europarl": ("Europarl", "30.89"),
        "wmt19": ("WMT-2019", "38.55")}
BILINGUAL = {"bilingual": True, "target_context_from": "first_pass", "first_pass_stream": "first-pass",
             "share_encoder": True, "gate": "vector", "gate_scale": 1.0, "alpha": 0.5}


def flat(path: Path) -> str:
    return " ".join(" ".join(line.lstrip("#") for line in header(path).splitlines()).split()).replace("\\ ", "")


def dump(path: Path) -> dict:
    d = load_recipe(path).model_dump(mode="json")
    for key in ("name", "description"):
        d.pop(key)
    d["train"].pop("save_dir")
    return d


def test_one_recipe_per_dataset_and_the_target_context_row():
    expected = {f"table2_{ds}_{system}" for ds in BLEU for system in ("hanoit", "ect", "dual_encoder")}
    assert {p.stem for p in FOLDER.glob("table2_*.yaml")} == expected | {"table2_iwslt17_hanoit_target"}


def test_the_target_context_row_is_the_bilingual_recipe_without_its_source_stream():
    """§3.5's target mono-lingual context (24.98 on IWSLT-2017): Table 2's IWSLT-2017 recipe with one stream, the
    target side of the same context sentences, from the same first pass; the header names the row, the first pass
    and the evaluation."""
    path = FOLDER / "table2_iwslt17_hanoit_target.yaml"
    target, bilingual = dump(path), dump(FOLDER / "table2_iwslt17_hanoit.yaml")
    assert (target["model"]["context_side"], target["model"]["bilingual"]) == ("target", False)
    assert target["model"]["target_context_from"] == "first_pass"
    assert target["model"]["first_pass_stream"] == "first-pass"
    for key in ("bilingual", "context_side", "share_encoder", "gate", "gate_scale", "alpha"):
        target["model"][key] = bilingual["model"][key]
    assert target == bilingual
    text = flat(path)
    assert re.search(r"^# Reproduces: §3\.5 'Mono-lingual vs\. Bi-lingual Context', target mono-lingual context, "
                     r"IWSLT-2017: BLEU 24\.98", header(path), re.M)
    first = "runs/yang2023_hanoit/table1_iwslt17_transformer/checkpoint_best.pt"
    assert f"for s in train valid; do ctxmt first-pass -c {first} --data data/yang2023_iwslt17 --split $s; done" in text
    assert (f"ctxmt evaluate -c runs/yang2023_hanoit/table2_iwslt17_hanoit_target/checkpoint_best.pt --split test "
            f"--tokenize none --first-pass {first}") in text
    r = load_recipe(path)
    assert r.name == "yang2023_table2_iwslt17_hanoit_target"
    assert r.train.save_dir == "runs/yang2023_hanoit/table2_iwslt17_hanoit_target"


@pytest.mark.parametrize("ds", BLEU)
def test_table1_hanoit_with_the_bilingual_options(ds):
    path = FOLDER / f"table2_{ds}_hanoit.yaml"
    table2, table1 = dump(path), dump(FOLDER / f"table1_{ds}_hanoit.yaml")
    assert {k: table2["model"][k] for k in BILINGUAL} == BILINGUAL
    for key in BILINGUAL:
        table2["model"][key] = table1["model"][key]
    assert table2 == table1
    r = load_recipe(path)
    assert r.name == f"yang2023_table2_{ds}_hanoit" and r.train.save_dir == f"runs/yang2023_hanoit/table2_{ds}_hanoit"


@pytest.mark.parametrize("ds", BLEU)
def test_header_names_the_row_the_first_pass_and_the_evaluation(ds):
    path = FOLDER / f"table2_{ds}_hanoit.yaml"
    text, r = flat(path), load_recipe(path)
    column, bleu = BLEU[ds]
    assert re.search(rf"^# Reproduces: Table 2 row 'HanoiT \(our method\)', {column}: BLEU {bleu}", header(path), re.M)
    first = f"runs/yang2023_hanoit/table1_{ds}_transformer/checkpoint_best.pt"
    assert (FOLDER / f"table1_{ds}_transformer.yaml").is_file()
    assert f"for s in train valid; do ctxmt first-pass -c {first} --data {r.data.path} --split $s; done" in text
    assert (f"ctxmt evaluate -c runs/yang2023_hanoit/table2_{ds}_hanoit/checkpoint_best.pt --split test --tokenize "
            f"none --first-pass {first}") in text
    assert "ctxmt prepare maruf" in text and f"--out {r.data.path}" in text


@pytest.mark.parametrize("ds", BLEU)
def test_quoted_gains_follow_from_the_quoted_figures(ds):
    text = flat(FOLDER / f"table2_{ds}_hanoit.yaml")
    found = re.findall(r"give (\d+\.\d\d) - (\d+\.\d\d) = ([+-]\d\.\d\d)", text)
    found += [(a, b, c) for c, a, b in re.findall(r"quotes ([+-]\d\.\d\d) over [^;]*?, as Tables 1 and 2 give "
                                                   r"\((\d+\.\d\d) - (\d+\.\d\d)\)", text)]
    assert found
    for a, b, gain in found:
        assert f"{float(a) - float(b):+.2f}" == gain


#: Table 2's baseline rows (re-implemented by the authors) and Table 1's, per system and dataset
BASELINES = {("ect", "ECT"): {"iwslt17": ("24.38", "24.32"), "nc2016": ("24.55", "24.40"),
                              "europarl": ("30.24", "30.08"), "wmt19": ("38.16", "38.14")},
             ("dual_encoder", "Dual Encoder"): {"iwslt17": ("24.26", "24.14"), "nc2016": ("24.46", "24.36"),
                                                "europarl": ("30.25", "30.12"), "wmt19": ("38.24", "38.12")}}
#: what each baseline's Table 2 recipe changes in its Table 1 recipe's model section
ADDED = {"ect": {"bilingual": True, "target_context_from": "first_pass", "first_pass_stream": "first-pass"},
         "dual_encoder": {"bilingual": True, "target_context_from": "first_pass", "first_pass_stream": "first-pass",
                          "grad_context_sentences": 2}}


@pytest.mark.parametrize("ds", BLEU)
@pytest.mark.parametrize("system, row", list(BASELINES))
def test_bilingual_baselines_are_table1_reading_the_first_pass(ds, system, row):
    """Table 2's ECT and Dual Encoder: Table 1's recipe with the target side of the same context sentences in its
    windows, from the Table 1 Transformer's first pass; the header names both rows, the first pass and the
    evaluation."""
    path = FOLDER / f"table2_{ds}_{system}.yaml"
    table2, table1 = dump(path), dump(FOLDER / f"table1_{ds}_{system}.yaml")
    assert {k: table2["model"][k] for k in ADDED[system]} == ADDED[system]
    for key in ADDED[system]:
        table2["model"][key] = table1["model"][key]
    assert table2 == table1
    r = load_recipe(path)
    assert r.name == f"yang2023_table2_{ds}_{system}"
    assert r.train.save_dir == f"runs/yang2023_hanoit/table2_{ds}_{system}"
    column, (bleu, source_only) = BLEU[ds][0], BASELINES[system, row][ds]
    assert re.search(rf"^# Reproduces: Table 2 row '{row} \[\d+\]', {column}: BLEU {bleu}", header(path), re.M)
    text = flat(path)
    assert f"table1_{ds}_{system}.yaml ({source_only})" in text
    assert re.search(rf"Reproduces: Table 1 row '{row} \[\d+\]', {column}: BLEU {source_only}",
                     header(FOLDER / f"table1_{ds}_{system}.yaml"))
    first = f"runs/yang2023_hanoit/table1_{ds}_transformer/checkpoint_best.pt"
    assert f"for s in train valid; do ctxmt first-pass -c {first} --data {r.data.path} --split $s; done" in text
    assert (f"ctxmt evaluate -c runs/yang2023_hanoit/table2_{ds}_{system}/checkpoint_best.pt --split test --tokenize "
            f"none --first-pass {first}") in text
