"""`ctxmt quickstart` on a tiny update budget: each chosen system trains exactly its budget, results.json has the
promised layout, and two runs with the same seed give the same figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.conftest import assert_user_error, run_cli

SYSTEMS = ("sentence", "caching_tokens")
UPDATES = 30
#: what may differ between two runs of the same seed: wall time and where the files are
RUN_SPECIFIC = {"seconds", "eval_seconds", "checkpoint", "data"}


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory) -> list[tuple[Path, dict, str, str]]:
    """The same tiny quickstart twice (same seed), the first with the default log format (plain: the output is no
    terminal), the second with --log-format json: (OUT, results.json, printed output, stdout) each."""
    runs = []
    for name, log_format in (("a", ()), ("b", ("--log-format", "json"))):
        out = tmp_path_factory.mktemp("qs") / name
        result = run_cli("quickstart", "--out", out, "--docs", 41, "--systems", ",".join(SYSTEMS),
                         "--updates", UPDATES, "--seed", 2, *log_format)
        assert result.exit_code == 0, result.output
        runs.append((out, json.loads((out / "results.json").read_text()), result.output, result.stdout))
    return runs


def test_quickstart_trains_each_system_its_update_budget(two_runs):
    out, results, output, _ = two_runs[0]
    def resolve(path) -> Path:                                            # relative to OUT
        return Path(path) if Path(path).is_absolute() else out / path

    assert results["seconds"] > 0 and resolve(results["data"]).is_dir()
    assert results["systems"] == list(SYSTEMS) and list(results["models"]) == list(SYSTEMS)
    assert results["seed"] == 2 and results["docs"] == 41
    models = results["models"]
    assert [models[n]["family"] for n in SYSTEMS] == ["sentence", "caching"]
    assert [models[n]["context_aware"] for n in SYSTEMS] == [False, True]
    for name, model in models.items():
        assert model["updates"] == UPDATES and model["threads"] == 2 and model["seconds"] > 0
        steps = [json.loads(line)["step"] for line in (out / name / "metrics.jsonl").read_text().splitlines()]
        assert max(steps) == UPDATES, name                 # the trainer's own log agrees
        assert 0.0 <= model["bleu"] <= 100.0 and resolve(model["checkpoint"]).is_file()
        assert {"pronoun", "deixis", "lex_cohesion", "ellipsis_vp"} <= set(model["contrastive"])
        assert all(0.0 <= acc <= 1.0 for row in model["contrastive"].values() for acc in row.values())
        assert len(results["sample"][name]) == len(results["sample"]["source"])
    for text in ("BLEU", "pronoun", "sample document", *SYSTEMS):
        assert text in output
    # a second run must not overwrite the first
    before = (out / "results.json").read_text()
    assert_user_error(run_cli("quickstart", "--out", out, "--docs", 41), "--force")
    assert (out / "results.json").read_text() == before


def test_quickstart_same_seed_same_figures(two_runs):
    def figures(run: tuple[Path, dict, str]) -> dict:
        out, results, _, _ = run
        models = {n: {k: v for k, v in m.items() if k not in RUN_SPECIFIC} for n, m in results["models"].items()}
        valid = {n: [json.loads(line) for line in (out / n / "metrics.jsonl").read_text().splitlines()]
                 for n in models}
        losses = {n: [{k: v for k, v in r.items() if "per_s" not in k} for r in rows] for n, rows in valid.items()}
        return {"models": models, "sample": results["sample"], "metrics": losses}

    first, second = figures(two_runs[0]), figures(two_runs[1])
    assert first["metrics"] == second["metrics"]           # every logged loss, bit for bit
    assert first == second


def test_quickstart_log_formats(two_runs):
    """Its nested training runs follow --log-format: plain lines by default off a terminal; with json, stdout is
    JSON lines only (each run's records, a closing result) and the tables go to stderr. Same figures either way
    (test_quickstart_same_seed_same_figures)."""
    plain, as_json = two_runs[0][3], two_runs[1][3]
    finals = [line for line in plain.splitlines() if line.startswith(f"train | step {UPDATES}/{UPDATES}  ")]
    assert len(finals) == len(SYSTEMS) and all(line.endswith("eta 0:00:00") for line in finals)
    assert not [line for line in plain.splitlines() if "train" in line and "━" in line]     # no bar frames
    records = [json.loads(line) for line in as_json.splitlines()]
    assert {r["kind"] for r in records} <= {"train", "valid", "message", "result"}
    assert sum(r["kind"] == "train" and r["step"] == r["max_steps"] == UPDATES for r in records) == len(SYSTEMS)
    assert records[-1]["kind"] == "result" and set(records[-1]["bleu"]) == set(SYSTEMS)
    assert "BLEU" in two_runs[1][2] and "BLEU" not in as_json                 # the table went to stderr
