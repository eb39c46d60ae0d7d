"""``ctxmt import marian`` through the command line: import a tiny random MarianMTModel (built here, offline),
inspect it, translate with it (the output transformers' ``generate`` gives), prepare documents with its tokenizer,
export it to CTranslate2; and every error a user can cause is one line, exit 2, nothing written."""

from __future__ import annotations

import json
import random

import pytest

from tests.integration.conftest import assert_user_error, run_cli
from tests.unit.marian_fixture import SRC_WORDS, TGT_WORDS, build_marian, sentence

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def marian(tmp_path_factory):
    return build_marian(tmp_path_factory.mktemp("hf") / "opus-mt-xx-en")


@pytest.fixture(scope="module")
def imported(marian, tmp_path_factory):
    out = tmp_path_factory.mktemp("imported") / "model.pt"
    result = run_cli("import", "marian", marian, "--out", out)
    assert result.exit_code == 0, result.output
    return out


def documents(path, n=12):
    rng = random.Random(7)
    lines = [sentence(rng, SRC_WORDS) for _ in range(n)]
    path.write_text("\n".join(lines[:6]) + "\n\n" + "\n".join(lines[6:]) + "\n", encoding="utf-8")
    return lines


def test_inspect_shows_where_the_model_came_from(imported, marian):
    result = run_cli("inspect", imported, "--json")
    assert result.exit_code == 0, result.output
    info = json.loads(result.stdout)
    record = info["imported_from"]
    assert record["kind"] == "marian" and record["folder"] == str(marian.resolve())
    assert set(record["files"]) >= {"config.json", "model.safetensors", "source.spm", "target.spm", "vocab.json"}
    assert info["family"] == "sentence" and info["recipe"]["model"]["sinusoid"] == "marian"
    table = run_cli("inspect", imported)
    assert "imported from" in table.stdout and "marian model" in table.stdout


def test_translate_gives_transformers_greedy_output(imported, marian, tmp_path):
    from transformers import MarianMTModel, MarianTokenizer

    lines = documents(tmp_path / "docs.txt")
    result = run_cli("translate", tmp_path / "docs.txt", "-c", imported, "--beam", 1, "-o", tmp_path / "out.txt")
    assert result.exit_code == 0, result.output
    ours = [line for line in (tmp_path / "out.txt").read_text(encoding="utf-8").splitlines() if line]
    hf, tok = MarianMTModel.from_pretrained(marian).eval(), MarianTokenizer.from_pretrained(marian)
    pad = tok.pad_token_id
    compared = 0
    for line, mine in zip(lines, ours):
        out = hf.generate(**tok([line], return_tensors="pt"), num_beams=1, max_new_tokens=100, min_new_tokens=1,
                          bad_words_ids=[[pad]])[0]
        generated = [int(t) for t in out[1:] if int(t) != pad]
        if len(generated) <= 10:                      # ended well before ctxmt's limit (10 + 1.5 x source length)
            compared += 1
            assert mine == tok.decode(generated, skip_special_tokens=True), line
    assert compared >= len(lines) // 3


def test_prepare_with_the_imported_tokenizer(imported, tmp_path):
    from ctxmt_cli.models.loading import open_checkpoint

    for lang, words in (("xx", SRC_WORDS), ("en", TGT_WORDS)):
        rows = [sentence(random.Random(k), words) for k in range(40)]
        (tmp_path / f"train.{lang}").write_text("".join(r + ("\n\n" if k % 8 == 7 else "\n") for k, r in
                                                         enumerate(rows)), encoding="utf-8")
    result = run_cli("prepare", "text", "--train", tmp_path / "train", "--src-lang", "xx", "--tgt-lang", "en",
                     "--vocab-from", imported, "--workers", 1, "--out", tmp_path / "data")
    assert result.exit_code == 0, result.output
    meta = json.loads((tmp_path / "data" / "meta.json").read_text())
    assert meta["tokenizer_fingerprint"] == open_checkpoint(imported).raw["vocab_fingerprint"]
    assert meta["joint"] is False and meta["vocabulary"]["option"] == "--vocab-from"


def test_ctranslate2_export_translates_as_the_torch_path(imported, tmp_path):
    """Greedy: the same search on both engines (CTranslate2's beam search stops by its own rule, see
    ctxmt_cli/export/ct2_engine.py), so the same output from the same weights."""
    pytest.importorskip("ctranslate2")
    documents(tmp_path / "docs.txt")
    result = run_cli("export", "ctranslate2", imported, tmp_path / "ct2")
    assert result.exit_code == 0, result.output
    outs = {}
    for engine, model in (("torch", imported), ("ctranslate2", tmp_path / "ct2")):
        result = run_cli("translate", tmp_path / "docs.txt", "-c", model, "--engine", engine, "--beam", 1,
                         "-o", tmp_path / f"{engine}.txt")
        assert result.exit_code == 0, result.output
        outs[engine] = (tmp_path / f"{engine}.txt").read_text(encoding="utf-8")
    assert outs["torch"] == outs["ctranslate2"]


def _edit_config(folder, **changes):
    config = json.loads((folder / "config.json").read_text())
    config.update(changes)
    (folder / "config.json").write_text(json.dumps(config))


def _copy(marian, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(marian, copy)
    return copy


@pytest.mark.parametrize("case, needles", [
    ("missing folder", ("not found",)),
    ("no source.spm", ("source.spm not found",)),
    ("not marian", ("model_type", '"bart"')),
    ("untied", ("share_encoder_decoder_embeddings", "false")),
    ("pre-norm", ("normalize_before", "true")),
    ("activation", ("activation_function", '"gelu_new"')),
    ("code in the pickle", ("never runs code",)),
    ("no weights", ("neither model.safetensors nor pytorch_model.bin",)),
    ("output exists", ("already exists", "--force")),
    ("output inside the folder", ("lies inside the input folder",)),
])
def test_user_errors_are_one_line_and_write_nothing(case, needles, marian, tmp_path):
    import torch

    folder, out = _copy(marian, tmp_path), tmp_path / "out.pt"
    if case == "missing folder":
        folder = tmp_path / "nowhere"
    elif case == "no source.spm":
        (folder / "source.spm").unlink()
    elif case == "not marian":
        _edit_config(folder, model_type="bart")
    elif case == "untied":
        _edit_config(folder, share_encoder_decoder_embeddings=False)
    elif case == "pre-norm":
        _edit_config(folder, normalize_before=True)
    elif case == "activation":
        _edit_config(folder, activation_function="gelu_new")
    elif case in ("code in the pickle", "no weights"):
        (folder / "model.safetensors").unlink()
        if case == "code in the pickle":                    # a pickle whose loading would call a function
            torch.save({"weights": torch.zeros(2), "hook": random.Random}, folder / "pytorch_model.bin")
    elif case == "output exists":
        out.write_text("mine")
    elif case == "output inside the folder":
        out = folder / "model.pt"
    before = {p.name: p.read_bytes() for p in folder.iterdir()} if folder.is_dir() else {}
    assert_user_error(run_cli("import", "marian", folder, "--out", out), *needles)
    assert (out.read_text() == "mine") if case == "output exists" else not out.exists()
    assert ({p.name: p.read_bytes() for p in folder.iterdir()} if folder.is_dir() else {}) == before
    assert not [p for p in tmp_path.iterdir() if p.name not in ("copy", "out.pt")]
