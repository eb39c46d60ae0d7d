"""``ctxmt evaluate`` through the CLI: hyp/ref and checkpoint modes, significance, document level, --out, bad input."""

from __future__ import annotations

import json
import re
import sys

import pytest
import sacrebleu

from tests.integration.conftest import assert_user_error, run_cli

REF_DOCS = [["The cat sat on the mat.", "It was happy."], ["We went to the market today.", "She reads a book."]]
H1_DOCS = [["the cat sat on a mat.", "It was happy."], ["We go to the market today.", "She read a book."]]
H2_DOCS = [["The cat sat on the mat.", "It is happy."], ["We went to market.", "She reads the book."]]


def write_docs(path, docs):
    path.write_text("\n\n".join("\n".join(doc) for doc in docs) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def files(tmp_path):
    return {"ref": write_docs(tmp_path / "ref.txt", REF_DOCS), "h1": write_docs(tmp_path / "h1.txt", H1_DOCS),
            "h2": write_docs(tmp_path / "h2.txt", H2_DOCS), "dir": tmp_path}


def flat(docs):
    return [s for doc in docs for s in doc]


def printed(output: str, name: str) -> float:
    return float(re.search(rf"^{re.escape(name)} = ([0-9.]+)  \(", output, re.M).group(1))


def test_hyp_ref_scores_equal_sacrebleu_with_signatures(files):
    result = run_cli("evaluate", "--hyp", files["h1"], "--ref", files["ref"])
    assert result.exit_code == 0, result.output
    assert printed(result.stdout, "BLEU") == pytest.approx(
        sacrebleu.corpus_bleu(flat(H1_DOCS), [flat(REF_DOCS)]).score, abs=0.005)
    assert printed(result.stdout, "chrF") == pytest.approx(
        sacrebleu.corpus_chrf(flat(H1_DOCS), [flat(REF_DOCS)]).score, abs=0.005)
    assert "(nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:" in result.stdout
    lower = run_cli("evaluate", "--hyp", files["h1"], "--ref", files["ref"], "--lowercase", "--tokenize", "none")
    assert lower.exit_code == 0, lower.output
    assert "case:lc" in lower.stdout and "tok:none" in lower.stdout


def test_document_level_and_json_out(files):
    out = files["dir"] / "res" / "scores.json"
    result = run_cli("evaluate", "--hyp", files["h1"], "--ref", files["ref"], "--document-level", "--out", out)
    assert result.exit_code == 0, result.output
    joined_h, joined_r = [" ".join(d) for d in H1_DOCS], [" ".join(d) for d in REF_DOCS]
    doc_bleu = sacrebleu.corpus_bleu(joined_h, [joined_r]).score
    assert printed(result.stdout, "doc-BLEU") == pytest.approx(doc_bleu, abs=0.005)
    payload = json.loads(out.read_text())
    assert set(payload) >= {"metrics", "signatures", "significance"} and payload["documents"] == 2
    assert payload["metrics"][str(files["h1"])]["doc-BLEU"] == pytest.approx(doc_bleu)
    assert set(payload["signatures"]) == {"BLEU", "chrF", "doc-BLEU", "doc-chrF"}
    # the same documents given by --docids instead of blank lines
    ids = files["dir"] / "ids.txt"
    ids.write_text("a\na\nb\nb\n")
    ref, hyp = (files["dir"] / "r.flat", files["dir"] / "h.flat")
    ref.write_text("\n".join(flat(REF_DOCS)) + "\n")
    hyp.write_text("\n".join(flat(H1_DOCS)) + "\n")
    by_ids = run_cli("evaluate", "--hyp", hyp, "--ref", ref, "--docids", ids, "--document-level")
    assert by_ids.exit_code == 0, by_ids.output
    assert printed(by_ids.stdout, "doc-BLEU") == printed(result.stdout, "doc-BLEU")


def test_significance_both_tests(files):
    out = files["dir"] / "sig.json"
    result = run_cli("evaluate", "--hyp", files["h1"], "--hyp", files["h2"], "--ref", files["ref"],
                     "--significance", "both", "--samples", 100, "--seed", 5, "--out", out)
    assert result.exit_code == 0, result.output
    assert "paired bootstrap resampling (100 resamples, seed 5)" in result.stdout
    assert "paired approximate randomization (100 trials, seed 5)" in result.stdout
    significance = json.loads(out.read_text())["significance"]
    for test in ("bootstrap", "ar"):
        cell = significance[test]["systems"][str(files["h2"])]["BLEU"]
        assert 0.0 <= cell["p_value"] <= 1.0 and cell["ci95"] >= 0.0
        assert significance[test]["baseline"] == str(files["h1"])


def test_checkpoint_mode_twice_with_document_level(concat_checkpoint, synthetic_dir, tmp_path):
    out = tmp_path / "ckpt.json"
    result = run_cli("evaluate", "--checkpoint", concat_checkpoint, "--checkpoint", concat_checkpoint,
                     "--data", synthetic_dir, "--document-level", "--significance", "bootstrap",
                     "--samples", 20, "--beam", 1, "--out", out)
    assert result.exit_code == 0, result.output
    payload = json.loads(out.read_text())
    first, second = payload["systems"]
    assert second == f"{first}#2" and payload["documents"] > 1
    assert payload["metrics"][first] == payload["metrics"][second]
    assert payload["significance"]["bootstrap"]["systems"][second]["identical"] is True


def test_checkpoint_mode_reports_progress_on_stderr(concat_checkpoint, synthetic_dir):
    result = run_cli("evaluate", "--checkpoint", concat_checkpoint, "--data", synthetic_dir, "--beam", 1,
                     "--log-format", "json")
    assert result.exit_code == 0, result.output
    objects = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    lines = [r for r in objects if r["kind"] == "progress"]
    assert lines and {r["task"] for r in lines} == {str(concat_checkpoint)}
    assert lines[-1]["done"] == lines[-1]["total"] > 0 and lines[-1]["unit"] == "sentences"
    [decoding] = [r for r in objects if r["kind"] == "message"]                  # then how it was decoded
    assert decoding["system"] == str(concat_checkpoint) and decoding["beam"] == 1 and decoding["fallbacks"] >= 0
    assert "{" not in result.stdout and printed(result.stdout, "BLEU") >= 0    # stdout keeps the scores alone
    refused = run_cli("evaluate", "--hyp", concat_checkpoint, "--ref", concat_checkpoint, "--log-format", "plain")
    assert_user_error(refused, "--log-format", "--checkpoint")


def test_unknown_split_lists_available(concat_checkpoint, synthetic_dir):
    result = run_cli("evaluate", "--checkpoint", concat_checkpoint, "--split", "dev", "--data", synthetic_dir)
    assert_user_error(result, "'dev'", "available", "test")


# ---- bad input: one line, exit 2, no traceback, nothing overwritten -----------------------------

def test_missing_file(files):
    assert_user_error(run_cli("evaluate", "--hyp", files["dir"] / "none.txt", "--ref", files["ref"]),
                      "--hyp", "not found", "none.txt")


def test_line_count_mismatch_names_both_files(files):
    short = files["dir"] / "short.txt"
    short.write_text("one line\n")
    assert_user_error(run_cli("evaluate", "--hyp", short, "--ref", files["ref"]),
                      "short.txt has 1 lines", "ref.txt has 5")


def test_non_utf8_names_file_and_byte_offset(files):
    bad = files["dir"] / "latin1.txt"
    bad.write_bytes("caf\xe9\n".encode("latin-1"))
    assert_user_error(run_cli("evaluate", "--hyp", bad, "--ref", files["ref"]), "latin1.txt", "byte offset 3")


def test_document_level_without_boundaries(files):
    ref, hyp = files["dir"] / "r.txt", files["dir"] / "h.txt"
    ref.write_text("a b c\nd e f\n")
    hyp.write_text("a b c\nd e\n")
    assert_user_error(run_cli("evaluate", "--hyp", hyp, "--ref", ref, "--document-level"),
                      "--document-level needs document boundaries", "--docids")


def test_different_document_counts(files):
    hyp = files["dir"] / "one_doc.txt"
    hyp.write_text("\n".join(flat(H1_DOCS)) + "\n")
    assert_user_error(run_cli("evaluate", "--hyp", hyp, "--ref", files["ref"]),
                      "different document counts", "1 document", "2 documents")


def test_unknown_tokenizer(files):
    assert_user_error(run_cli("evaluate", "--hyp", files["h1"], "--ref", files["ref"], "--tokenize", "moses"),
                      "--tokenize moses: 'moses' is not one of", "13a")


def test_significance_needs_two_systems(files):
    assert_user_error(run_cli("evaluate", "--hyp", files["h1"], "--ref", files["ref"], "--significance", "ar"),
                      "--significance", "--hyp H1 --hyp H2")


def test_comet_needs_sources_and_package(files, monkeypatch):
    assert_user_error(run_cli("evaluate", "--hyp", files["h1"], "--ref", files["ref"], "--comet", files["dir"]),
                      "--comet needs the source sentences", "--src")
    monkeypatch.setitem(sys.modules, "comet", None)  # as if unbabel-comet were not installed
    result = run_cli("evaluate", "--hyp", files["h1"], "--ref", files["ref"], "--src", files["h2"],
                     "--comet", files["dir"])
    assert_user_error(result, "unbabel-comet", "pip install 'ctxmt[comet]'")


def test_error_leaves_existing_out_untouched(files):
    out = files["dir"] / "keep.json"
    out.write_text('{"old": true}\n')
    short = files["dir"] / "short.txt"
    short.write_text("one line\n")
    assert_user_error(run_cli("evaluate", "--hyp", short, "--ref", files["ref"], "--out", out, "--force"), "short.txt")
    assert out.read_text() == '{"old": true}\n'
