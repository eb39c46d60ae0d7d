"""`ctxmt quickstart` end to end on a tiny budget: every stage runs and results.json has the promised layout."""

from __future__ import annotations

import json
from pathlib import Path

from tests.integration.conftest import assert_user_error, run_cli


def test_quickstart_tiny_budget(tmp_path):
    out = tmp_path / "qs"
    result = run_cli("quickstart", "--out", out, "--docs", 41, "--minutes", 0.03)
    assert result.exit_code == 0, result.output
    results = json.loads((out / "results.json").read_text())
    resolve = lambda path: Path(path) if Path(path).is_absolute() else out / path  # noqa: E731 - relative to OUT
    assert results["seconds"] > 0 and resolve(results["data"]).is_dir()
    assert set(results["models"]) == {"concat", "sentence"}
    assert results["models"]["concat"]["context_aware"] and not results["models"]["sentence"]["context_aware"]
    for model in results["models"].values():
        assert 0.0 <= model["bleu"] <= 100.0 and resolve(model["checkpoint"]).is_file()
        assert {"pronoun", "deixis", "lex_cohesion", "ellipsis_vp"} <= set(model["contrastive"])
        assert all(0.0 <= acc <= 1.0 for row in model["contrastive"].values() for acc in row.values())
    for name in ("BLEU", "pronoun", "sample document"):
        assert name in result.output
    # a second run must not overwrite the first
    before = (out / "results.json").read_text()
    assert_user_error(run_cli("quickstart", "--out", out, "--docs", 41), "--force")
    assert (out / "results.json").read_text() == before
