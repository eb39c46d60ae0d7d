"""`translate --context K` and `evaluate --context K[,K...]` (Lupo et al. 2022, Figure 4): other window sizes
than the model was trained with, through the CLI."""

from __future__ import annotations

import json

import pytest

from tests.integration.conftest import assert_user_error, run_cli


def translate(doc, checkpoint, out, *args) -> list[str]:
    result = run_cli("translate", doc, "--checkpoint", checkpoint, "-o", out, "--beam", 1, *args)
    assert result.exit_code == 0, result.output
    return out.read_text().splitlines()


@pytest.fixture
def short_documents(two_documents, tmp_path):
    """The first 3 sentences of two test documents (decoding stays quick on a busy machine)."""
    docs = [doc.splitlines()[:3] for doc in two_documents.read_text().strip().split("\n\n")]
    path = tmp_path / "short.txt"
    path.write_text("\n\n".join("\n".join(doc) for doc in docs) + "\n")
    return path


def test_translate_context_zero_is_every_sentence_alone_and_wider_windows_run(concat_checkpoint, short_documents,
                                                                              tmp_path):
    two_documents, lines = short_documents, short_documents.read_text().splitlines()
    alone = tmp_path / "alone.txt"                                        # every sentence its own document
    alone.write_text("\n\n".join(line for line in lines if line.strip()) + "\n")
    without = translate(two_documents, concat_checkpoint, tmp_path / "k0.txt", "--context", 0)
    each_alone = translate(alone, concat_checkpoint, tmp_path / "a.txt")
    assert [h for h in without if h.strip()] == [h for h in each_alone if h.strip()]
    wider = translate(two_documents, concat_checkpoint, tmp_path / "k6.txt", "--context", 6)    # trained with 3
    assert len(wider) == len(lines)
    assert [i for i, s in enumerate(lines) if not s.strip()] == [i for i, h in enumerate(wider) if not h.strip()]


def test_sentence_level_model_refuses_a_context_size(sentence_level_checkpoint, two_documents, tmp_path):
    out = tmp_path / "out.txt"
    assert_user_error(run_cli("translate", two_documents, "-c", sentence_level_checkpoint, "-o", out,
                              "--context", 2), "--context 2", "reads no context")
    assert not out.exists()


def test_evaluate_prints_and_writes_one_row_per_context_size(concat_checkpoint, synthetic_dir, tmp_path):
    out = tmp_path / "k.json"
    result = run_cli("evaluate", "-c", concat_checkpoint, "--data", synthetic_dir, "--beam", 1,
                     "--context", "0,2", "--out", out)
    assert result.exit_code == 0, result.output
    payload = json.loads(out.read_text())
    by = payload["by_context"][str(concat_checkpoint)]
    assert list(by) == ["0", "2"] and all(set(row) >= {"BLEU", "chrF"} for row in by.values())
    assert payload["systems"] == [f"{concat_checkpoint} K=0", f"{concat_checkpoint} K=2"]
    rows = [line.split() for line in result.stdout.splitlines() if line.endswith(f"  {concat_checkpoint}")]
    assert [(r[0], float(r[1]), float(r[2])) for r in rows] == [
        (k, round(by[k]["BLEU"], 2), round(by[k]["chrF"], 2)) for k in ("0", "2")]


@pytest.mark.parametrize("args, needle", [
    (["--context", "1,x"], "comma-separated"),
    (["--context", "1,1"], "each K once"),
])
def test_evaluate_bad_context_lists(concat_checkpoint, args, needle):
    assert_user_error(run_cli("evaluate", "-c", concat_checkpoint, *args), needle)


def test_evaluate_context_needs_a_checkpoint(tmp_path):
    (tmp_path / "h.txt").write_text("a\n")
    assert_user_error(run_cli("evaluate", "--hyp", tmp_path / "h.txt", "--ref", tmp_path / "h.txt", "--context", 1),
                      "--context", "--checkpoint")


def test_translate_negative_context(concat_checkpoint, two_documents):
    assert_user_error(run_cli("translate", two_documents, "-c", concat_checkpoint, "--context", -1), "--context")
