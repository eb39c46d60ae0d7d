"""Next-sentence context through the CLI: a tiny offline HanoiT model (1 previous + 1 next sentence, Yang et al.'s
offline setting) trains on windows that hold the next sentence, translates with it (the whole source document is known)
and is scored with it by ``ctxmt cxmi``; ``--context 0`` takes it away."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from tests.integration.conftest import run_cli, tiny_sets

MODEL = {"family": "hanoit", "preset": None, "d_model": 32, "ffn_dim": 64, "heads": 4, "encoder_layers": 2,
         "decoder_layers": 1, "dropout": 0.0, "src_context_sentences": 1, "src_next_sentences": 1, "q": 0.2}


@pytest.fixture(scope="module")
def offline(synthetic_dir, tmp_path_factory):
    """(recipe path, checkpoint) of a tiny offline HanoiT model trained a few steps on the synthetic data."""
    root = tmp_path_factory.mktemp("hanoit")
    recipe = root / "hanoit.yaml"
    recipe.write_text(yaml.safe_dump({"data": {"path": str(synthetic_dir)}, "model": MODEL,
                                      "train": {"save_dir": str(root / "model"), "threads": 1}}))
    result = run_cli("train", recipe, *tiny_sets(synthetic_dir, root / "model"), "--set", "model.encoder_layers=2")
    assert result.exit_code == 0, result.output
    return recipe, root / "model" / "checkpoint_best.pt"


def test_training_windows_hold_the_next_sentence(offline, synthetic_dir):
    from ctxmt_cli.config import load_recipe
    from ctxmt_cli.core.batch import VocabInfo
    from ctxmt_cli.data.batching import window_batch
    from ctxmt_cli.data.store import PreparedData
    from ctxmt_cli.train.setup import window_dataset

    recipe, checkpoint = offline
    data = PreparedData(synthetic_dir)
    vocab = VocabInfo.of(data.tokenizer)
    ds = window_dataset(data, "train", load_recipe(recipe), vocab, "train")
    assert ds.spec.src_next_sentences == 1
    last = np.asarray(data.split("train").doc_offsets)[1:] - 1            # each document's last sentence
    assert not ds.src_next[last].any() and ds.src_next.sum() == len(ds.src_next) - len(last)
    batch = window_batch(ds, ds.indices[:16], vocab.pad, vocab.bos)
    assert batch.src_next.tolist() == ds.src_next[ds.indices[:16]].tolist()


def test_translation_reads_the_next_sentence(offline, synthetic_dir, tmp_path, monkeypatch):
    import ctxmt_cli.decode.slots as translator
    from ctxmt_cli.data.store import PreparedData

    seen, real = [], translator.beam_search
    monkeypatch.setattr(translator, "beam_search", lambda model, batch, **kw: (seen.append(batch.to("cpu")),
                                                                                real(model, batch, **kw))[1])
    lines = (synthetic_dir / "raw" / "test.src").read_text().split("\n\n")[0].strip().splitlines()[:3]
    doc, out = tmp_path / "doc.txt", tmp_path / "out.txt"
    doc.write_text("\n".join(lines) + "\n")
    result = run_cli("translate", doc, "-c", offline[1], "-o", out, "--beam", 1)
    assert result.exit_code == 0, result.output
    assert len(out.read_text().splitlines()) == 3
    tok = PreparedData(synthetic_dir).tokenizer
    ids = [tok.encode_src(s) for s in lines]
    rows = sorted(([t for t in row.tolist() if t != tok.pad_id], int(n))     # every searched row, whatever its step
                  for b in seen for row, n in zip(b.src, b.src_next, strict=True))
    assert rows == sorted([(ids[1] + [tok.brk_id] + ids[0] + [tok.eos_id], 1),   # sentence 1 reads sentence 2
                           (ids[0] + [tok.brk_id] + ids[2] + [tok.brk_id] + ids[1] + [tok.eos_id], 1),
                           (ids[1] + [tok.brk_id] + ids[2] + [tok.eos_id], 0)])   # the last: the document ends
    seen.clear()
    result = run_cli("translate", doc, "-c", offline[1], "-o", tmp_path / "k0.txt", "--beam", 1, "--context", 0)
    assert result.exit_code == 0, result.output
    rows = sorted([t for t in row.tolist() if t != tok.pad_id] for b in seen for row in b.src)
    assert rows == sorted(i + [tok.eos_id] for i in ids) and all(b.src_next is None for b in seen)


def test_cxmi_scores_with_the_next_sentence(offline, synthetic_dir, tmp_path):
    out, lines = tmp_path / "cxmi.json", tmp_path / "cxmi.jsonl"
    result = run_cli("cxmi", "-c", offline[1], "--data", synthetic_dir, "--out", out, "--per-sentence", lines)
    assert result.exit_code == 0, result.output
    figures, per_sentence = json.loads(out.read_text()), [json.loads(x) for x in lines.read_text().splitlines()]
    assert figures["context_sentences"] == {"src": 1, "tgt": 0, "src_next": 1} and "+ 1 next" in result.stdout
    first = [x for x in per_sentence if x["sentence"] == 0]                # no previous sentence, one next
    assert all(x["next_sentences"] == 1 and x["has_context"] for x in first)
    assert figures["n_with_context"] == figures["n"] and figures["cxmi_per_token"] != 0.0
