"""`ctxmt prepare` at scale, through the CLI: compressed inputs, a reused vocabulary, refused combinations."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from tests.integration.conftest import assert_user_error, run_cli

WORDS = "the a cat dog sat ran here there on under big small red blue".split()


def write_gz_corpus(directory: Path, pairs: int = 120) -> Path:
    """``train.{en,fr}.gz``: ``pairs`` short pairs, a blank line (document break) every 8."""
    en = [" ".join(WORDS[(k + j) % len(WORDS)] for j in range(3 + k % 5)) for k in range(pairs)]
    for lang, rows in (("en", en), ("fr", [s.upper() for s in en])):
        text = "".join(row + ("\n\n" if k % 8 == 7 else "\n") for k, row in enumerate(rows))
        with gzip.open(directory / f"train.{lang}.gz", "wt", encoding="utf-8") as f:
            f.write(text)
    return directory / "train"


def test_gz_corpus_prepares_and_a_second_corpus_reuses_its_vocabulary(tmp_path):
    prefix = write_gz_corpus(tmp_path)
    first = tmp_path / "first"
    result = run_cli("prepare", "text", "--train", prefix, "--src-lang", "en", "--tgt-lang", "fr", "--vocab-size", 60,
                     "--max-words", 6, "--out", first)
    assert result.exit_code == 0, result.output
    assert "cleaned train: dropped 24 pairs (too_short 0, too_long 24, length_ratio 0)" in result.output
    second = tmp_path / "second"
    result = run_cli("prepare", "text", "--train", prefix, "--src-lang", "en", "--tgt-lang", "fr", "--vocab-from",
                     first, "--workers", 1, "--out", second)
    assert result.exit_code == 0, result.output
    metas = [json.loads((d / "meta.json").read_text()) for d in (first, second)]
    assert metas[0]["tokenizer_fingerprint"] == metas[1]["tokenizer_fingerprint"]
    assert metas[1]["splits"]["train"]["sentences"] == 120 and metas[1]["vocabulary"]["option"] == "--vocab-from"


def test_training_options_are_refused_with_a_reused_vocabulary(tmp_path):
    prefix = write_gz_corpus(tmp_path)
    result = run_cli("prepare", "text", "--train", prefix, "--spm", tmp_path / "spm.model", "--vocab-size", 8000,
                     "--out", tmp_path / "out")
    assert_user_error(result, "--vocab-size does not apply with --spm", "drop it")
    assert not (tmp_path / "out").exists()


def test_a_damaged_archive_is_one_line_naming_file_and_line(tmp_path):
    prefix = write_gz_corpus(tmp_path)
    data = (tmp_path / "train.fr.gz").read_bytes()
    (tmp_path / "train.fr.gz").write_bytes(data[: len(data) // 2])
    result = run_cli("prepare", "text", "--train", prefix, "--src-lang", "en", "--tgt-lang", "fr", "--out",
                     tmp_path / "out")
    assert_user_error(result, "train.fr.gz:", "cannot decompress", "damaged or truncated")
    assert not (tmp_path / "out").exists()
