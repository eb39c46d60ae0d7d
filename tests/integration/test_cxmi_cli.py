"""`ctxmt cxmi` through the CLI: exact 0 for a sentence-level model, context usage of a concat model, the
random-context control, P-CXMI lines, synthetic tags, user errors."""

from __future__ import annotations

import json

import pytest

from tests.integration.conftest import assert_user_error, run_cli


def cxmi(tmp_path, checkpoint, *args, name="cxmi"):
    out, lines = tmp_path / f"{name}.json", tmp_path / f"{name}.jsonl"
    result = run_cli("cxmi", "-c", checkpoint, "--out", out, "--per-sentence", lines, *args)
    assert result.exit_code == 0, result.output
    return result.stdout, json.loads(out.read_text()), [json.loads(x) for x in lines.read_text().splitlines()]


def cxmi_stderr(tmp_path, checkpoint, *args) -> str:
    result = run_cli("cxmi", "-c", checkpoint, "--out", tmp_path / "note.json", *args)
    assert result.exit_code == 0, result.output
    return result.stderr


def test_sentence_level_model_gives_exactly_zero(sentence_level_checkpoint, synthetic_dir, tmp_path):
    printed, result, lines = cxmi(tmp_path, sentence_level_checkpoint, "--data", synthetic_dir)
    # the zeros are right, and said to be so: one note on stderr, stdout the table alone
    note = cxmi_stderr(tmp_path, sentence_level_checkpoint, "--data", synthetic_dir).strip().splitlines()
    assert note == [f"ctxmt: warning: {sentence_level_checkpoint} is a sentence-level model: it reads no context, "
                    "so CXMI is 0 by construction"]
    assert result["cxmi_per_token"] == 0.0 and result["cxmi_per_sentence"] == 0.0
    assert result["context_sentences"] == {"src": 0, "tgt": 0, "src_next": 0} and result["n_with_context"] == 0
    assert len(lines) == result["n"] > 0 and all(x["p_cxmi_per_sentence"] == 0.0 for x in lines)
    assert "0.0000" in printed.splitlines()[2]                                    # the "all" row


def test_concat_model_uses_its_context_and_random_context_differs(concat_checkpoint, synthetic_dir, tmp_path):
    printed, gold, lines = cxmi(tmp_path, concat_checkpoint)                      # data: the recipe's data.path
    assert gold["context"] == 3 and gold["split"] == "test"
    assert gold["context_sentences"] == {"src": 3, "tgt": 3, "src_next": 0}
    assert gold["cxmi_per_token"] != 0.0 and gold["cxmi_per_sentence"] != 0.0
    assert len(lines) == gold["n"] and sum(x["has_context"] for x in lines) == gold["n_with_context"] < gold["n"]
    assert all(x["p_cxmi_per_sentence"] == 0.0 for x in lines if not x["has_context"])   # document starts
    assert gold["cxmi_per_sentence"] == pytest.approx(sum(x["p_cxmi_per_sentence"] for x in lines) / len(lines))
    # the synthetic benchmark: every sentence is context-dependent or other
    tags = gold["by_tag"]
    assert tags["context-dependent"]["n"] + tags["other"]["n"] == gold["n"] and "context-dependent" in printed
    _, control, control_lines = cxmi(tmp_path, concat_checkpoint, "--random-context", "--seed", 3, name="random")
    assert control["random_context"] and control["seed"] == 3 and control["n"] == gold["n"]
    assert control["cxmi_per_token"] != gold["cxmi_per_token"]
    assert [x["context_sentences"] for x in control_lines] == [x["context_sentences"] for x in lines]
    _, one, _ = cxmi(tmp_path, concat_checkpoint, "--context", 1, name="one")
    assert one["context_sentences"] == {"src": 1, "tgt": 1, "src_next": 0}
    assert one["cxmi_per_token"] != gold["cxmi_per_token"]


def test_tokens_restrict_cxmi_to_chosen_words(concat_checkpoint, synthetic_dir, tmp_path):
    word = (synthetic_dir / "raw" / "test.tgt").read_text(encoding="utf-8").split()[0]
    printed, result, _ = cxmi(tmp_path, concat_checkpoint, "--tokens", f"{word.upper()},zzzz")
    restricted = result["restricted"]
    assert restricted["words"] == [word.casefold(), "zzzz"] and restricted["by_word"]["zzzz"]["n"] == 0
    assert 0 < restricted["n"] == restricted["by_word"][word.casefold()]["n"] < restricted["all_words"]["n"]
    assert restricted["p_cxmi_per_word"] is not None and restricted["tokens"] >= restricted["n"]
    assert f"P-CXMI on target words {word.casefold()},zzzz" in printed and "all words" in printed
    printed, result, _ = cxmi(tmp_path, concat_checkpoint, "--tokens", "zzzz", name="none")
    assert result["restricted"]["n"] == 0 and result["restricted"]["p_cxmi_per_token"] is None
    assert "no target word matched (n = 0" in printed and result["cxmi_per_token"] != 0.0


@pytest.mark.parametrize("args, needle", [
    (["--tokens", ""], "--tokens"),
    (["--tokens", ",,"], "--tokens"),
    (["--tokens", "il elle"], "--tokens"),
    (["--split", "nosuch"], "nosuch"),
    (["--context", "-1"], "--context"),
    (["--max-tokens", "2"], "--max-tokens"),
])
def test_bad_inputs_are_one_line_errors(concat_checkpoint, tmp_path, args, needle):
    out = tmp_path / "keep.json"
    out.write_text("kept\n")
    assert_user_error(run_cli("cxmi", "-c", concat_checkpoint, "--out", out, "--force", *args), needle)
    assert out.read_text() == "kept\n"                           # nothing overwritten, even with --force


def test_context_zero_gives_zero_with_a_note(concat_checkpoint, synthetic_dir, tmp_path):
    note = cxmi_stderr(tmp_path, concat_checkpoint, "--data", synthetic_dir, "--context", 0).strip().splitlines()
    assert note == ["ctxmt: warning: --context 0 gives no context sentences, so CXMI is 0 by construction"]
    assert json.loads((tmp_path / "note.json").read_text())["cxmi_per_sentence"] == 0.0


def test_a_context_model_gets_no_note(concat_checkpoint, synthetic_dir, tmp_path):
    assert cxmi_stderr(tmp_path, concat_checkpoint, "--data", synthetic_dir) == ""
