"""``ctxmt prepare maruf`` through the CLI (Maruf et al. 2019's `<d>` documents), its user errors, and tokenized
BLEU on a ``--moses`` split (the evaluation of Yang et al.'s HanoiT): hypotheses and references both Moses-tokenized."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import sacrebleu

from tests.integration.conftest import ROOT, assert_user_error, run_cli, tiny_sets

MARUF = Path(__file__).parents[1] / "fixtures" / "corpora" / "maruf"
PREFIX = MARUF / "concatenated_en2de_train"        # Maruf et al.'s names: PREFIX_en.txt, PREFIX_de.txt
LANGS = ("--src-lang", "en", "--tgt-lang", "de")


def prepare(out: Path, *extra) -> object:
    return run_cli("prepare", "maruf", "--train", PREFIX, "--valid", PREFIX, *LANGS, "--vocab-size", 120,
                   "--out", out, *extra)


def test_prepare_maruf_reads_documents_under_either_name(tmp_path):
    result = prepare(tmp_path / "own")
    assert result.exit_code == 0, result.output
    assert re.fullmatch(r"prepared \S+ \(train: 6 sentences / 3 docs, valid: 6 sentences / 3 docs; "
                        r"vocab \d+/\d+\)\n", result.stdout)
    meta = json.loads((tmp_path / "own" / "meta.json").read_text())
    assert meta["source"]["format"] == "maruf"
    assert meta["source"]["inputs"]["train"]["src"] == str((MARUF / "concatenated_en2de_train_en.txt").resolve())
    for lang in ("en", "de"):                      # the same files as PATH.en / PATH.de
        shutil.copy(MARUF / f"concatenated_en2de_train_{lang}.txt", tmp_path / f"talks.{lang}")
    result = run_cli("prepare", "maruf", "--train", tmp_path / "talks", *LANGS, "--vocab-size", 120,
                     "--out", tmp_path / "dotted")
    assert result.exit_code == 0, result.output
    assert "train: 6 sentences / 3 docs" in result.stdout


BAD = {  # name -> (en lines, de lines, needles of the one-line error)
    "one-sided <d>": (["<d>", "a", "<d>", "b"], ["<d>", "x", "y", "z"],
                      ["at line 3", "c_en.txt has a <d> line", "put the <d> lines at the same lines"]),
    "line counts": (["<d>", "a", "b"], ["<d>", "x"], ["line counts differ", "first unmatched line is 3"]),
    "empty sentence": (["<d>", "a", ""], ["<d>", "x", "y"], ["c_en.txt:3: empty sentence", "fill it in"]),
    "no first <d>": (["a", "<d>", "b"], ["x", "<d>", "y"], ["c_en.txt:1: the file does not start with a <d> line"]),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_prepare_maruf_user_errors(tmp_path, name):
    en, de, needles = BAD[name]
    for lang, lines in (("en", en), ("de", de)):
        (tmp_path / f"c_{lang}.txt").write_text("".join(s + "\n" for s in lines), encoding="utf-8")
    result = run_cli("prepare", "maruf", "--train", tmp_path / "c", *LANGS, "--out", tmp_path / "out")
    assert_user_error(result, *needles)
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out.*"))   # nothing left behind


def test_missing_maruf_files_name_both_conventions(tmp_path):
    result = run_cli("prepare", "maruf", "--train", tmp_path / "dev", *LANGS, "--out", tmp_path / "out")
    assert_user_error(result, "dev.en", "PATH.en and PATH.de, else Maruf et al.'s own names PATH_en.txt")


def test_tokenized_bleu_scores_moses_tokens_on_both_sides(tmp_path):
    from sacremoses import MosesDetokenizer, MosesTokenizer

    from ctxmt_cli.data.formats import iter_parallel_documents
    from ctxmt_cli.data.store import PreparedData
    from ctxmt_cli.evaluate.translation import split_documents, translate_sources
    from ctxmt_cli.models.loading import load_model

    data, save = tmp_path / "data", tmp_path / "model"
    assert prepare(data, "--moses").exit_code == 0
    recipe = ROOT / "recipes" / "quickstart" / "sentence.yaml"
    # 60 updates at a high rate: enough for the model to write some punctuation, where the tokenizations differ
    learn = ["train.max_steps=60", "train.valid_every=60", "train.warmup_steps=10", "train.lr=0.01",
             "train.label_smoothing=0", "train.threads=1", "decode.beam=1"]
    result = run_cli("train", recipe, *tiny_sets(data, save), *[a for s in learn for a in ("--set", s)])
    assert result.exit_code == 0, result.output
    ckpt, out = save / "checkpoint_best.pt", tmp_path / "bleu.json"
    result = run_cli("evaluate", "-c", ckpt, "--split", "valid", "--tokenize", "none", "--out", out)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("text scored: Moses-tokenized hypotheses and references")
    payload = json.loads(out.read_text())
    assert payload["moses_tokenized"] is True and "tok:none" in payload["signatures"]["BLEU"]

    # references: the raw German as Moses tokenizes it; hypotheses: the model's own Moses tokens
    moses = MosesTokenizer(lang="de")
    raw = [t for doc in iter_parallel_documents("maruf", *(MARUF / f"{PREFIX.name}_{x}.txt" for x in ("en", "de")))
           for _, t in doc]
    prepared, loaded = PreparedData(data), load_model(ckpt)
    sources, refs = split_documents(prepared, "valid", tokenized=True)
    assert [r for doc in refs for r in doc] == [moses.tokenize(t, escape=False, return_str=True) for t in raw]
    hyps = [h for doc in translate_sources(loaded, sources, tokenized=True) for h in doc]
    plain = [h for doc in translate_sources(loaded, sources) for h in doc]
    assert hyps != plain and [MosesDetokenizer(lang="de").detokenize(h.split()) for h in hyps] == plain
    expected = sacrebleu.corpus_bleu(hyps, [[r for doc in refs for r in doc]], tokenize="none").score
    assert expected > 0
    assert payload["metrics"][str(ckpt)]["BLEU"] == pytest.approx(expected)

    detok = run_cli("evaluate", "-c", ckpt, "--split", "valid", "--out", out, "--force")  # 13a: detokenized as before
    assert detok.exit_code == 0 and "Moses-tokenized" not in detok.stdout
    assert json.loads(out.read_text())["moses_tokenized"] is False
