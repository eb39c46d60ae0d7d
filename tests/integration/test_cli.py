"""End to end through the CLI: prepare → train → translate → contrastive → evaluate, and every user error."""

from __future__ import annotations

import json
import re

from tests.integration.conftest import QUICKSTART, assert_user_error, run_cli, tiny_sets


def test_help_is_instant_and_lists_commands():
    result = run_cli("--help")
    assert result.exit_code == 0
    for command in ("prepare", "train", "translate", "contrastive", "evaluate", "quickstart"):
        assert command in result.output


def test_translate_keeps_lines_and_blank_lines(concat_checkpoint, two_documents, tmp_path):
    out = tmp_path / "out.txt"
    result = run_cli("translate", two_documents, "--checkpoint", concat_checkpoint, "-o", out, "--beam", 2)
    assert result.exit_code == 0, result.output
    src, hyp = two_documents.read_text().splitlines(), out.read_text().splitlines()
    assert len(src) == len(hyp)
    assert [i for i, s in enumerate(src) if not s.strip()] == [i for i, h in enumerate(hyp) if not h.strip()]


def test_translate_stdin_to_stdout_and_generate_mode(concat_checkpoint, two_documents):
    text = two_documents.read_text()
    for mode in ("prefix", "generate"):
        result = run_cli("translate", "-", "--checkpoint", concat_checkpoint, "--target-mode", mode,
                         "--beam", 1, input=text)
        assert result.exit_code == 0, result.output
        assert len(result.stdout.splitlines()) == len(text.splitlines())


def test_contrastive_and_evaluate(concat_checkpoint, synthetic_dir, tmp_path):
    result = run_cli("contrastive", f"synthetic:{synthetic_dir}", "--checkpoint", concat_checkpoint, "--out", tmp_path)
    assert result.exit_code == 0, result.output
    scoring = [line for line in result.stderr.splitlines() if line.startswith("scoring: ")]   # no terminal: plain
    assert scoring and all(re.match(r"^scoring: \d+/\d+ rows  elapsed \d+:\d\d:\d\d  eta ", s) for s in scoring)
    assert len(set(scoring[-1].split()[1].split("/"))) == 1 and "scoring" not in result.stdout    # done = total
    results = json.loads((tmp_path / "results.json").read_text())
    synthetic = results["sets"]["synthetic"]
    assert set(synthetic["by"]["phenomenon"]) == {"pronoun", "deixis", "lex_cohesion", "ellipsis_vp"}
    assert all(0.0 <= acc <= 1.0 for cells in synthetic["by"].values() for acc in cells.values())
    assert 0.0 <= results["aggregates"]["synthetic_d>=1"] <= 1.0
    assert len((tmp_path / "synthetic.scores").read_text().splitlines()) == 2 * synthetic["n"]
    result = run_cli("evaluate", "--checkpoint", concat_checkpoint, "--split", "test")
    assert result.exit_code == 0, result.output
    assert "BLEU = " in result.output and "chrF = " in result.output and "nrefs:1" in result.output


def test_dry_run_needs_no_data(tmp_path):
    result = run_cli("train", QUICKSTART, "--dry-run", "--set", f"data.path={tmp_path}/none")
    assert result.exit_code == 0, result.output
    assert "family: concat" in result.output and "parameters:" in result.output


def test_average_command(concat_checkpoint, tmp_path):
    ckpts = sorted(concat_checkpoint.parent.glob("checkpoint_[0-9]*.pt"))
    result = run_cli("average", *[a for c in ckpts for a in ("-c", c)], "-o", tmp_path / "avg.pt")
    assert result.exit_code == 0, result.output
    first = (tmp_path / "avg.pt").read_bytes()
    result = run_cli("average", "-c", ckpts[-1], "-o", tmp_path / "avg.pt", "--force")       # --force replaces it
    assert result.exit_code == 0, result.output
    assert (tmp_path / "avg.pt").read_bytes() != first


# ---- every error a user can cause: one line, exit 2, nothing overwritten ------------------------

def test_recipe_typo_names_file_and_key(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("model:\n  family: concat\n  sift: 3\n")
    assert_user_error(run_cli("train", recipe, "--dry-run"), "r.yaml", "model.sift", "shift")


def test_bad_set_value(tmp_path):
    assert_user_error(run_cli("train", QUICKSTART, "--dry-run", "--set", "model.cd=2"), "model.cd")
    assert_user_error(run_cli("train", QUICKSTART, "--dry-run", "--set", "train.lr"), "KEY.PATH=VALUE")


def test_missing_recipe_and_missing_data(tmp_path):
    assert_user_error(run_cli("train", tmp_path / "nope.yaml"), "nope.yaml")
    result = run_cli("train", QUICKSTART, *tiny_sets(tmp_path / "absent", tmp_path / "run"))
    assert_user_error(result, "absent")


def test_prepared_directory_is_not_overwritten(synthetic_dir):
    before = (synthetic_dir / "meta.json").read_text()
    assert_user_error(run_cli("prepare", "synthetic", "--out", synthetic_dir, "--docs", 60), "--force")
    assert (synthetic_dir / "meta.json").read_text() == before


def test_parallel_files_with_different_line_counts(tmp_path):
    (tmp_path / "c.en").write_text("a\nb\n\nc\n")
    (tmp_path / "c.de").write_text("a\nb\n")
    result = run_cli("prepare", "text", "--train", tmp_path / "c", "--src-lang", "en", "--tgt-lang", "de",
                     "--out", tmp_path / "out")
    assert_user_error(result, "c.en", "c.de")
    assert not (tmp_path / "out").exists()


def test_non_utf8_input(tmp_path, concat_checkpoint):
    (tmp_path / "c.en").write_bytes(b"good\nbad \xff\xfe\n")
    (tmp_path / "c.de").write_text("gut\nschlecht\n")
    result = run_cli("prepare", "text", "--train", tmp_path / "c", "--src-lang", "en", "--tgt-lang", "de",
                     "--out", tmp_path / "out")
    assert_user_error(result, "c.en", "2")
    bad = tmp_path / "doc.txt"
    bad.write_bytes(b"hello\n\xff\n")
    assert_user_error(run_cli("translate", bad, "--checkpoint", concat_checkpoint), "doc.txt")


def test_empty_document_in_jsonl(tmp_path):
    (tmp_path / "c.jsonl").write_text('{"doc_id": 1, "src": "a", "tgt": "b"}\n{"doc_id": 2, "src": "", "tgt": "c"}\n')
    result = run_cli("prepare", "jsonl", "--train", tmp_path / "c.jsonl", "--out", tmp_path / "out")
    assert_user_error(result, "c.jsonl", "2")


def test_missing_input_and_checkpoint(tmp_path, concat_checkpoint):
    assert_user_error(run_cli("translate", tmp_path / "none.txt", "--checkpoint", concat_checkpoint), "none.txt")
    doc = tmp_path / "d.txt"
    doc.write_text("hello\n")
    assert_user_error(run_cli("translate", doc, "--checkpoint", tmp_path / "none.pt"), "none.pt")


def test_checkpoint_of_another_vocabulary_is_refused(concat_checkpoint, synthetic_dir, tmp_path):
    other = tmp_path / "other"
    result = run_cli("prepare", "synthetic", "--out", other, "--docs", 60, "--seed", 2)
    assert result.exit_code == 0
    assert_user_error(run_cli("evaluate", "--checkpoint", concat_checkpoint, "--data", other), "vocabulary")


def test_resume_with_another_family_is_refused(synthetic_dir, concat_checkpoint):
    save = concat_checkpoint.parent
    sets = tiny_sets(synthetic_dir, save) + ["--set", "model.family=sentence", "--set", "model.cd=1.0"]
    result = run_cli("train", QUICKSTART, "--resume", *sets)
    assert result.exit_code == 2


def test_existing_save_dir_needs_resume(synthetic_dir, concat_checkpoint):
    result = run_cli("train", QUICKSTART, *tiny_sets(synthetic_dir, concat_checkpoint.parent))
    assert_user_error(result, "--resume")


def test_overlong_sentences_are_truncated_with_a_warning(tmp_path):
    (tmp_path / "c.en").write_text("a b c d e f g h i j k l m n o p\nshort\n")
    (tmp_path / "c.de").write_text("a b\nkurz\n")
    result = run_cli("prepare", "text", "--train", tmp_path / "c", "--src-lang", "en", "--tgt-lang", "de",
                     "--out", tmp_path / "out", "--max-sentence-tokens", 4, "--vocab-size", 40)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("prepared ") and len(result.stdout.splitlines()) == 1   # warnings: stderr
    truncated, small = result.stderr.splitlines()
    assert truncated.startswith("ctxmt: warning: train: ") and "longer than 4 tokens were truncated" in truncated
    # the corpus supports fewer subwords than asked for: say so instead of shrinking silently
    vocab = json.loads((tmp_path / "out" / "meta.json").read_text())["vocab_size"]["src"]
    assert vocab < 40 and small.startswith(f"ctxmt: warning: --vocab-size 40: the train split supports only {vocab} ")
