"""The DocRepair pipeline end to end through the CLI, on tiny models and the synthetic corpus.

Forward and reverse models are the 'Baseline 7 Enc-Layers' recipe at tiny dims, decoding at most a few
tokens per sentence (``decode.max_len_*``, stored in their checkpoints) so the round trip takes seconds:
``prepare reverse`` → train both → ``first-pass`` (checked against ``translate``, resumed after an
interruption) → ``prepare docrepair`` (checked group by group) → train the repair recipe → ``translate --repair``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from ctxmt_cli.data.docrepair import join_group
from ctxmt_cli.data.store import PreparedData
from ctxmt_cli.decode import translator
from ctxmt_cli.decode.documents import format_documents, read_documents
from tests.integration.conftest import ROOT, run_cli, tiny_sets

pytest.importorskip("ctxmt_cli.train.trainer")

RECIPES = ROOT / "recipes" / "morishita2021_mbe"
FAST_DECODING = ["--set", "decode.beam=1", "--set", "decode.max_len_a=0", "--set", "decode.max_len_b=3",
                 "--set", "train.threads=1"]


def train(recipe: Path, data: Path, save: Path) -> Path:
    result = run_cli("train", recipe, *tiny_sets(data, save), *FAST_DECODING)
    assert result.exit_code == 0, result.output
    return save / "checkpoint_best.pt"


@pytest.fixture(scope="module")
def pipeline(synthetic_dir, tmp_path_factory) -> SimpleNamespace:
    """A private copy of the synthetic data, its reversed copy, and tiny forward and reverse models."""
    root = tmp_path_factory.mktemp("docrepair")
    data = Path(shutil.copytree(synthetic_dir, root / "data"))
    result = run_cli("prepare", "reverse", "--data", data, "--out", root / "rev")
    assert result.exit_code == 0, result.output
    forward = train(RECIPES / "baseline_7enc.yaml", data, root / "forward")
    reverse = train(RECIPES / "docrepair_reverse.yaml", root / "rev", root / "reverse")
    return SimpleNamespace(root=root, data=data, forward=forward, reverse=reverse)


@pytest.fixture(scope="module")
def first_pass(pipeline) -> PreparedData:
    result = run_cli("first-pass", "-c", pipeline.forward, "--data", pipeline.data, "--split", "test", "--name", "fp",
                     "--log-format", "json")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("wrote ") and len(result.stdout.splitlines()) == 1
    progress = [json.loads(line) for line in result.stderr.splitlines()]   # --log-format json: objects on stderr
    assert [(r["kind"], r["task"], r["done"]) for r in progress] == [("progress", "test.fp", 0),
                                                                     ("progress", "test.fp", progress[0]["total"])]
    assert progress[-1]["eta_s"] == 0.0 and progress[-1]["unit"] == "documents"
    return PreparedData(pipeline.data)


def stream_files(data: Path, split: str, name: str) -> dict:
    return {ext: (data / f"{split}.{name}.stream.{ext}").read_bytes() for ext in ("bin", "idx", "txt")}


def test_first_pass_stream_is_the_translation_of_the_split(pipeline, first_pass, tmp_path):
    store, stream = first_pass.split("test"), first_pass.stream("test", "fp")
    assert stream.side == "tgt" and stream.n_sentences == store.n_sentences
    assert np.array_equal(stream.doc_offsets, store.doc_offsets)
    docs = read_documents(pipeline.data / "test.fp.stream.txt")
    assert [len(d) for d in docs] == [b - a for a, b in store.documents()]
    lines = [line for doc in docs for line in doc]
    tok = first_pass.tokenizer
    assert all(stream.sentence(i).tolist() == tok.encode_tgt(lines[i]) for i in range(stream.n_sentences))
    sources = tmp_path / "test.src.txt"                                    # the same documents through `translate`
    sources.write_text(format_documents([[tok.decode_src(store.src(i).tolist()) for i in range(a, b)]
                                         for a, b in store.documents()]), encoding="utf-8")
    result = run_cli("translate", sources, "-c", pipeline.forward, "-o", tmp_path / "hyp.txt")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "hyp.txt").read_bytes() == stream_files(pipeline.data, "test", "fp")["txt"]


def second_call_interrupts(real):
    """``real`` as a translator whose second call is interrupted (Ctrl-C between two appended chunks)."""
    calls = []

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    return interrupted


def test_an_interrupted_first_pass_resumes_to_the_same_stream(pipeline, first_pass, monkeypatch):
    real, interrupted = translator.translate_documents, second_call_interrupts(translator.translate_documents)

    args = ["first-pass", "-c", pipeline.forward, "--data", pipeline.data, "--split", "test", "--name", "fp2",
            "--chunk-docs", "7"]
    monkeypatch.setattr(translator, "translate_documents", interrupted)
    result = run_cli(*args)
    assert result.exit_code == 130 and not (pipeline.data / "test.fp2.stream.json").exists()
    monkeypatch.setattr(translator, "translate_documents", real)
    result = run_cli(*args)
    assert result.exit_code == 0, result.output
    assert "resuming after 7 of 20 documents" in result.stderr
    assert stream_files(pipeline.data, "test", "fp2") == stream_files(pipeline.data, "test", "fp")


def test_sampled_streams_follow_the_seed_and_resume_to_the_same_samples(pipeline, first_pass, monkeypatch):
    """A sampled stream (the forward half of DocRepair's round trip): the same seed writes the same stream, another
    seed another, neither the beam's; a resumed run samples its remaining chunks as an uninterrupted one."""
    from ctxmt_cli.decode.first_pass import PassSettings, write_first_pass
    from ctxmt_cli.models.loading import load_model

    loaded, data = load_model(pipeline.forward), PreparedData(pipeline.data)

    def sampled(name: str, seed: int) -> dict:
        record = write_first_pass(data, "test", name, loaded, pipeline.forward,
                                  settings=PassSettings(sample_seed=seed, chunk_docs=7))
        assert record["plan"]["decode"]["sample_seed"] == seed
        return stream_files(pipeline.data, "test", name)

    one = sampled("s1", 1)
    assert sampled("s1b", 1) == one and sampled("s2", 2) != one != stream_files(pipeline.data, "test", "fp")
    real, interrupted = translator.translate_documents, second_call_interrupts(translator.translate_documents)

    monkeypatch.setattr(translator, "translate_documents", interrupted)
    with pytest.raises(KeyboardInterrupt):
        sampled("s1c", 1)
    monkeypatch.setattr(translator, "translate_documents", real)
    assert sampled("s1c", 1) == one


@pytest.fixture(scope="module")
def repair_corpus(pipeline) -> Path:
    out = pipeline.root / "repair"
    result = run_cli("prepare", "docrepair", "--data", pipeline.data, "--reverse", pipeline.reverse,
                     "--forward", pipeline.forward, "--splits", "train,valid", "--out", out)
    assert result.exit_code == 0, result.output
    return out


def test_repair_corpus_holds_round_trip_groups_of_four(pipeline, repair_corpus):
    data, repair = PreparedData(pipeline.data), PreparedData(repair_corpus)
    assert data.stream("train", "docrepair-back").side == "src"
    brk = data.tokenizer.brk_id
    for split in ("train", "valid"):
        store, rt, out = data.split(split), data.stream(split, "docrepair-rt"), repair.split(split)
        assert rt.side == "tgt" and out.n_documents == store.n_documents
        row = 0
        for a, b in store.documents():                                      # every group, by hand
            for start in range(a, b, 4):
                end = min(start + 4, b)
                assert out.tgt(row).tolist() == join_group([store.tgt(i) for i in range(start, end)], brk)
                assert out.src(row).tolist() == join_group([rt.sentence(i) for i in range(start, end)], brk)
                row += 1
        assert row == out.n_sentences
    assert repair.meta["docrepair"]["group_size"] == 4
    line = data.tokenizer.decode_tgt(data.split("test").tgt(0).tolist())
    assert repair.tokenizer.encode_src(line) == repair.tokenizer.encode_tgt(line) == data.tokenizer.encode_tgt(line)


def test_a_second_corpus_reuses_the_round_trip_streams(pipeline, repair_corpus, monkeypatch):
    def no_translation(*args, **kwargs):
        raise AssertionError("the finished round-trip streams should have been reused")

    monkeypatch.setattr(translator, "translate_documents", no_translation)
    out = pipeline.root / "repair2"
    result = run_cli("prepare", "docrepair", "--data", pipeline.data, "--reverse", pipeline.reverse,
                     "--forward", pipeline.forward, "--out", out)
    assert result.exit_code == 0, result.output
    assert "reusing the finished stream" in result.stderr
    for name in ("train.src.bin", "train.tgt.bin", "valid.src.bin", "valid.docs"):
        assert (out / name).read_bytes() == (repair_corpus / name).read_bytes()


def test_translate_with_repair_keeps_lines_and_documents(pipeline, repair_corpus, two_documents, tmp_path):
    repair = train(RECIPES / "docrepair_repair.yaml", repair_corpus, tmp_path / "repair")
    text = two_documents.read_text().split("\n\n")
    docs = tmp_path / "docs.txt"                                          # 2 documents; a blank line inside one
    docs.write_text(text[0].strip() + "\n\n" + text[1].strip() + "\n", encoding="utf-8")
    out = tmp_path / "out.txt"
    result = run_cli("translate", docs, "-c", pipeline.forward, "--repair", repair, "-o", out)
    assert result.exit_code == 0, result.output
    src, hyp = docs.read_text().splitlines(), out.read_text().splitlines()
    assert len(hyp) == len(src)
    assert [i for i, s in enumerate(src) if not s.strip()] == [i for i, h in enumerate(hyp) if not h.strip()]
    result = run_cli("translate", docs, "-c", pipeline.forward, "--repair", pipeline.forward, "-o", out, "--force")
    assert result.exit_code == 2 and "not a DocRepair model" in result.stderr
