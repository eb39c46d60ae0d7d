"""``ctxmt export ctranslate2`` and ``ctxmt translate --engine ctranslate2`` through the command line: the exported
float32 model translates text and JSONL (--scores, --nbest, given target context, stdin) as the torch engine does
with greedy search; every refusal is one line, exit 2; without CTranslate2 both commands name the extra to install
(a real process in which ``import ctranslate2`` fails)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from ctxmt_cli.cli import app
from tests.integration.conftest import assert_user_error, run_cli
from tests.unit.ct2_fixtures import CONCAT, write_checkpoint

pytest.importorskip("ctranslate2")


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One thread for torch and so for CTranslate2 (the engine runs torch's count): on a shared 2-core machine two
    spinning thread pools only contend."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def exported(synthetic_dir, tmp_path_factory):
    """A tiny random concat (s3to3) checkpoint and its float32 export, made through the CLI."""
    root = tmp_path_factory.mktemp("ct2cli")
    ckpt = write_checkpoint(synthetic_dir, root / "concat.pt", CONCAT)
    result = run_cli("export", "ctranslate2", "-c", ckpt, "-o", root / "ct2")
    assert result.exit_code == 0, result.output
    assert f"exported {ckpt} (concat, float32) to {root / 'ct2'}" in result.stderr
    return ckpt, root / "ct2"


@pytest.fixture(scope="module")
def docs(synthetic_dir) -> tuple[list[list[str]], list[list[str]]]:
    """Three source documents of the test split (3, 1 and 4 sentences) and their references."""
    def read(side):
        text = (synthetic_dir / "raw" / f"test.{side}").read_text(encoding="utf-8").strip().split("\n\n")
        return [doc.splitlines()[:n] for doc, n in zip(text, (3, 1, 4), strict=False)]
    return read("src"), read("tgt")


def translate(model, engine: str, path, out, *options) -> str:
    result = run_cli("translate", path, "-c", model, "--engine", engine, "-o", out, "--device", "cpu", *options)
    assert result.exit_code == 0, result.output
    return out.read_text(encoding="utf-8")


def test_text_and_stdin_translate_as_the_torch_engine(exported, docs, tmp_path):
    ckpt, folder = exported
    path = tmp_path / "docs.txt"
    path.write_text("\n\n".join("\n".join(d) for d in docs[0]) + "\n", encoding="utf-8")
    ours = translate(ckpt, "torch", path, tmp_path / "torch.txt", "--beam", "1")
    assert translate(folder, "ctranslate2", path, tmp_path / "ct2.txt", "--beam", "1") == ours
    assert len(ours.split("\n\n")) == 3
    result = run_cli("translate", "-", "-c", folder, "--engine", "ctranslate2", "--beam", "1", "--device", "cpu",
                     input=path.read_text(encoding="utf-8"))
    assert result.exit_code == 0, result.output
    assert result.stdout == ours



def _numbers(nbest: list[dict]) -> list[float]:
    """The log-probability and score of every candidate, in order."""
    return [x for c in nbest for x in (c["logprob"], c["score"])]


def test_jsonl_with_scores_and_nbest_as_the_torch_engine(exported, docs, tmp_path):
    ckpt, folder = exported
    src, ref = docs
    rows = [{"doc_id": "a", "src": src[0]}, {"doc_id": 2, "src": src[2], "tgt_context": ref[2][:2]},
            {"src": src[1]}]
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    options = ("--input-format", "jsonl", "--scores", "--nbest", "1", "--beam", "1")
    ours = [json.loads(line) for line in translate(ckpt, "torch", path, tmp_path / "t.jsonl", *options).splitlines()]
    theirs = [json.loads(line) for line in
              translate(folder, "ctranslate2", path, tmp_path / "c.jsonl", *options).splitlines()]
    assert [r["doc_id"] for r in theirs] == ["a", 2, 3] and [len(r["translations"]) for r in theirs] == [3, 2, 1]
    for mine, other in zip(ours, theirs, strict=True):
        assert set(other) == {"doc_id", "translations", "scores", "nbest"}
        assert other["translations"] == mine["translations"]
        assert other["scores"] == pytest.approx(mine["scores"], abs=1e-4)
        for a, b in zip(mine["nbest"], other["nbest"], strict=True):
            assert [c["translation"] for c in b] == [c["translation"] for c in a]
            assert _numbers(b) == pytest.approx(_numbers(a), abs=1e-4)
    beam = [json.loads(line) for line in translate(folder, "ctranslate2", path, tmp_path / "b.jsonl", "--input-format",
                                                   "jsonl", "--scores", "--nbest", "2", "--beam", "2").splitlines()]
    for row in beam:                                                   # CTranslate2's own beam: its 2 best
        for text, score, nbest in zip(row["translations"], row["scores"], row["nbest"], strict=True):
            assert 1 <= len(nbest) <= 2 and nbest[0]["translation"] == text and nbest[0]["logprob"] == score


def test_refusals_are_one_line(exported, synthetic_dir, docs, tmp_path):
    ckpt, folder = exported
    path = tmp_path / "docs.txt"
    path.write_text("\n".join(docs[0][0]) + "\n", encoding="utf-8")
    assert_user_error(run_cli("export", "ctranslate2", "-c", ckpt, "-o", folder),
                      f"--out {folder} already exists; pass --force")
    shifted = write_checkpoint(synthetic_dir, tmp_path / "shift.pt", {**CONCAT, "shift": 4})
    assert_user_error(run_cli("export", "ctranslate2", "-c", shifted, "-o", tmp_path / "s"),
                      "model.shift=4: CTranslate2")
    assert not (tmp_path / "s").exists()
    assert_user_error(run_cli("export", "ctranslate2", "-c", ckpt, "-o", tmp_path / "q", "--quantization", "int4"),
                      "--quantization: 'int4' is not one of 'float32', 'int8'")
    assert_user_error(run_cli("translate", path, "-c", ckpt, "--engine", "ctranslate2"), "is a file; --engine "
                      "ctranslate2 takes the folder ctxmt export ctranslate2 wrote")
    assert_user_error(run_cli("translate", path, "-c", tmp_path, "--engine", "ctranslate2"), "no ctxmt.json")
    assert_user_error(run_cli("translate", path, "-c", folder, "--engine", "ctranslate2", "--repair", ckpt),
                      "--repair: the ctranslate2 engine translates with the exported model alone")
    assert_user_error(run_cli("translate", path, "-c", folder, "--engine", "ctranslate2", "--first-pass", ckpt),
                      "--first-pass: the ctranslate2 engine")
    assert_user_error(run_cli("translate", path, "-c", folder, "--engine", "onnx"), "--engine onnx")


def test_help_lists_the_engines_and_quantizations():
    for args, choices in ((("translate",), "<torch|ctranslate2>"),
                          (("export", "ctranslate2"), "<float32|int8|int8_float32|float16|bfloat16>")):
        result = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": "250"})
        assert result.exit_code == 0 and choices in result.stdout, result.stdout


CODE = """import sys
sys.modules["ctranslate2"] = None          # import ctranslate2 fails, as where it is not installed
from ctxmt_cli.cli import main
sys.argv = ["ctxmt", *sys.argv[1:]]
main()
"""


@pytest.mark.parametrize("command", ["export", "translate"])
def test_without_ctranslate2_the_extra_is_named(command, exported, docs, tmp_path):
    ckpt, folder = exported
    path = tmp_path / "docs.txt"
    path.write_text("\n".join(docs[0][0]) + "\n", encoding="utf-8")
    args = (["export", "ctranslate2", "-c", ckpt, "-o", tmp_path / "out"] if command == "export" else
            ["translate", path, "-c", folder, "--engine", "ctranslate2", "--device", "cpu"])
    done = subprocess.run([sys.executable, "-c", CODE, *map(str, args)], capture_output=True, text=True, timeout=240)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [done.stderr.strip()] and "Traceback" not in done.stderr
    assert "needs CTranslate2, which is not installed: pip install 'ctxmt[ctranslate2]'" in done.stderr
    assert not (tmp_path / "out").exists()
