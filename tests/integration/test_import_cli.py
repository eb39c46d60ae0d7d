"""``ctxmt import marian`` through the command line: import a tiny random MarianMTModel (built here, offline),
inspect it, translate with it (the output transformers' ``generate`` gives), prepare documents with its tokenizer,
export it to CTranslate2; and every error a user can cause is one line, exit 2, nothing written."""

from __future__ import annotations

import json
import random
import re
import signal
import subprocess
import sys
import urllib.request

import pytest

from tests.integration.conftest import ROOT, assert_user_error, run_cli
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
    result = run_cli("inspect", "-c", imported, "--json")
    assert result.exit_code == 0, result.output
    info = json.loads(result.stdout)
    record = info["imported_from"]
    assert record["kind"] == "marian" and record["folder"] == str(marian.resolve())
    assert set(record["files"]) >= {"config.json", "model.safetensors", "source.spm", "target.spm", "vocab.json"}
    assert info["family"] == "sentence" and info["recipe"]["model"]["sinusoid"] == "marian"
    table = run_cli("inspect", "-c", imported)
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
    for line, mine in zip(lines, ours, strict=True):
        out = hf.generate(**tok([line], return_tensors="pt"), num_beams=1, max_new_tokens=100, min_new_tokens=1,
                          bad_words_ids=[[pad]])[0]
        generated = [int(t) for t in out[1:] if int(t) != pad]
        if len(generated) <= 10:                      # ended well before ctxmt's limit (10 + 1.5 x source length)
            compared += 1
            assert mine == tok.decode(generated, skip_special_tokens=True), line
    assert compared >= len(lines) // 3


def prepare_with(imported, out):
    """Documents in xx and en prepared with the imported model's tokenizer (``prepare --vocab-from``)."""
    for split, seed in (("train", 0), ("valid", 1000)):
        for lang, words in (("xx", SRC_WORDS), ("en", TGT_WORDS)):
            rows = [sentence(random.Random(seed + k), words) for k in range(40 if split == "train" else 16)]
            (out.parent / f"{split}.{lang}").write_text("".join(r + ("\n\n" if k % 8 == 7 else "\n") for k, r in
                                                                 enumerate(rows)), encoding="utf-8")
    return run_cli("prepare", "text", "--train", out.parent / "train", "--valid", out.parent / "valid",
                   "--src-lang", "xx", "--tgt-lang", "en", "--vocab-from", imported, "--workers", 1, "--out", out)


@pytest.fixture(scope="module")
def imported_data(imported, tmp_path_factory):
    out = tmp_path_factory.mktemp("prepared") / "data"
    result = prepare_with(imported, out)
    assert result.exit_code == 0, result.output
    return out


def test_prepare_with_the_imported_tokenizer(imported, imported_data):
    from ctxmt_cli.models.loading import open_checkpoint

    meta = json.loads((imported_data / "meta.json").read_text())
    assert meta["tokenizer_fingerprint"] == open_checkpoint(imported).raw["vocab_fingerprint"]
    assert meta["joint"] is False and meta["vocabulary"]["option"] == "--vocab-from"


@pytest.mark.parametrize("recipe", ["sentence", "concat", "caching_tokens", "mbe", "hanoit"])
def test_every_family_fine_tunes_from_an_imported_model(recipe, imported, imported_data, tmp_path):
    """Two updates of each family from the imported model on data prepared with its tokenizer: every tensor of
    the Marian model loads, the architecture (swish, unscaled embeddings, output bias) is the checkpoint's."""
    import torch

    parent = torch.load(imported, map_location="cpu", weights_only=True)
    sets = [f"data.path={imported_data}", f"train.save_dir={tmp_path / 'run'}", "train.max_steps=2",
            "train.valid_every=2", "train.warmup_steps=1", "data.max_tokens=400"]
    result = run_cli("train", ROOT / "recipes" / "quickstart" / f"{recipe}.yaml", "--init-from", imported,
                     *[a for s in sets for a in ("--set", s)], "--log-format", "plain")
    assert result.exit_code == 0, result.output
    report = [line for line in result.output.splitlines() if line.startswith(f"init_from {imported}")]
    assert len(report) == 1 and f"loaded {len(parent['model'])} tensors" in report[0] and "skipped 0" in report[0]
    child = torch.load(tmp_path / "run" / "checkpoint_last.pt", map_location="cpu", weights_only=True)
    for key in ("activation", "scale_embeddings", "sinusoid", "output_bias", "d_model"):
        assert child["recipe"]["model"][key] == parent["recipe"]["model"][key], key


def test_serve_translates_as_translate_does(imported, tmp_path):
    """A real server process on loopback answers a document with what ``ctxmt translate`` writes for it."""
    lines = documents(tmp_path / "docs.txt")
    result = run_cli("translate", tmp_path / "docs.txt", "-c", imported, "--beam", 1, "-o", tmp_path / "out.txt")
    assert result.exit_code == 0, result.output
    expected = (tmp_path / "out.txt").read_text(encoding="utf-8").split("\n\n")[0].split("\n")
    process = subprocess.Popen([sys.executable, "-m", "ctxmt_cli", "serve", "-c", str(imported), "--port", "0",
                                "--device", "cpu", "--beam", "1"], stderr=subprocess.PIPE, text=True)
    try:
        found = re.search(r"listening on (http://127\.0\.0\.1:\d+)", process.stderr.readline())
        assert found
        request = urllib.request.Request(found.group(1) + "/translate", method="POST",
                                         data=json.dumps({"doc_id": "d", "sentences": lines[:6]}).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            assert json.loads(response.read())["translations"] == expected
    finally:
        process.send_signal(signal.SIGINT)
        _, rest = process.communicate(timeout=60)
    assert process.returncode == 0 and "Traceback" not in rest, rest


def test_ctranslate2_export_translates_as_the_torch_path(imported, tmp_path):
    """Greedy: the same search on both engines (CTranslate2's beam search stops by its own rule, see
    ctxmt_cli/export/ct2_engine.py), so the same output from the same weights."""
    pytest.importorskip("ctranslate2")
    documents(tmp_path / "docs.txt")
    result = run_cli("export", "ctranslate2", "-c", imported, "-o", tmp_path / "ct2")
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
