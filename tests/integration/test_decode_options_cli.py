"""The decoding options ``translate`` and ``evaluate`` share (beam, length penalty, target mode) and the generate
mode's fallbacks they report: printed on stderr, recorded in evaluate's --out, equal to the translator's counters."""

from __future__ import annotations

import json
import re
from pathlib import Path

from ctxmt_cli import api
from ctxmt_cli.data.store import PreparedData
from ctxmt_cli.decode.settings import TranslationStats
from ctxmt_cli.evaluate.translation import split_documents
from tests.integration.conftest import assert_user_error, run_cli

FALLBACKS = re.compile(r"; (\d+) of (\d+) generated windows without the expected separators")


def _stats(checkpoint: Path, documents: list[list[str]], **options) -> TranslationStats:
    stats = TranslationStats()
    api.load(checkpoint, device="cpu").translate(documents, stats=stats, **options)
    return stats


def test_translate_prints_the_fallbacks_the_translator_counted(concat_checkpoint, two_documents):
    """A 4-update model rarely writes the separators due: generate mode falls back, and says how often."""
    result = run_cli("translate", two_documents, "-c", concat_checkpoint, "--target-mode", "generate", "--beam", 1,
                     "--lenpen", 1.0)
    assert result.exit_code == 0, result.output
    line = result.stderr.strip().splitlines()[-1]
    assert "beam 1, length penalty 1, target mode generate" in line, line
    fallbacks, windows = map(int, FALLBACKS.search(line).groups())
    docs = [doc.splitlines() for doc in two_documents.read_text().strip().split("\n\n")]
    stats = _stats(concat_checkpoint, docs, target_mode="generate", beam=1, lenpen=1.0)
    assert (fallbacks, windows) == (stats.fallbacks, stats.sentences)
    assert fallbacks > 0
    prefix = run_cli("translate", two_documents, "-c", concat_checkpoint, "--target-mode", "prefix", "--beam", 1)
    assert prefix.exit_code == 0 and "target mode prefix" in prefix.stderr and not FALLBACKS.search(prefix.stderr)


def test_evaluate_decodes_with_the_options_and_records_them(concat_checkpoint, synthetic_dir, tmp_path):
    runs = {}
    for name, options in (("greedy", ("--beam", 1, "--target-mode", "generate", "--lenpen", 1.0)),
                          ("beam", ("--beam", 4, "--target-mode", "prefix"))):
        out = tmp_path / f"{name}.json"
        result = run_cli("evaluate", "-c", concat_checkpoint, "--data", synthetic_dir, "--log-format", "plain",
                         "--out", out, *options)
        assert result.exit_code == 0, result.output
        runs[name] = (json.loads(out.read_text())["decoding"][str(concat_checkpoint)], result.stderr)
    (greedy, said), (beam, _) = runs["greedy"], runs["beam"]
    assert (greedy["beam"], greedy["lenpen"], greedy["target_mode"]) == (1, 1.0, "generate")
    assert (beam["beam"], beam["target_mode"], beam["fallbacks"]) == (4, "prefix", 0)
    sources, _ = split_documents(PreparedData(synthetic_dir), "test")
    stats = _stats(concat_checkpoint, sources, target_mode="generate", beam=1, lenpen=1.0)
    assert greedy["fallbacks"] == stats.fallbacks > 0 and greedy["sentences"] == stats.sentences
    assert f"; {stats.fallbacks} of {stats.sentences} generated windows" in said


def test_hypothesis_files_refuse_the_decoding_options(tmp_path):
    ref = tmp_path / "ref.txt"
    ref.write_text("a b c\n", encoding="utf-8")
    for flag, value in (("--lenpen", "1.0"), ("--target-mode", "generate")):
        assert_user_error(run_cli("evaluate", "--hyp", ref, "--ref", ref, flag, value), flag, "--checkpoint")
