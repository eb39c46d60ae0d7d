"""The bilingual HanoiT pipeline through the CLI (Yang et al., §2.3), on tiny models: prepare a tiny synthetic
corpus, train a sentence-level model, write its first pass over the train and valid splits (``ctxmt first-pass``),
train a bilingual HanoiT on those streams, translate a document with ``--first-pass``, evaluate (the split's
stream, or ``--first-pass``), and the one-line refusals on the way."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.integration.conftest import ROOT, assert_user_error, run_cli, tiny_sets

BILINGUAL = {"family": "hanoit", "preset": None, "d_model": 32, "ffn_dim": 64, "heads": 4, "encoder_layers": 2,
             "decoder_layers": 1, "dropout": 0.0, "src_context_sentences": 1, "src_next_sentences": 1, "q": 0.2,
             "bilingual": True}


def tiny_recipe(data, save) -> list[str]:
    """``--set`` arguments that train a recipe of recipes/yang2023_hanoit/ at tiny dims (1 unified + 1 selection
    layer) for 3 updates on ``data`` into ``save``."""
    sets = [f"data.path={data}", f"train.save_dir={save}", "model.preset=null", "model.d_model=32",
            "model.ffn_dim=64", "model.heads=4", "model.decoder_layers=1", "model.encoder_layers=2",
            "model.unified_layers=1", "model.selection_layers=1", "train.max_steps=3", "train.valid_every=3",
            "train.warmup_steps=2", "data.max_tokens=400", "train.threads=1"]
    return [a for s in sets for a in ("--set", s)]


def translates_and_evaluates(data, sentence, ckpt, tmp_path) -> None:
    """``ckpt`` translates three sentences of a test document with the first pass of ``sentence``, refuses to go
    without one (writing nothing), and evaluates on the valid split's first-pass stream."""
    doc = tmp_path / "doc.txt"
    doc.write_text("\n".join((data / "raw" / "test.src").read_text().split("\n\n")[0].strip().splitlines()[:3]) + "\n")
    result = run_cli("translate", doc, "-c", ckpt, "--first-pass", sentence, "--beam", 1, "-o", tmp_path / "out.txt")
    assert result.exit_code == 0, result.output
    assert len((tmp_path / "out.txt").read_text().splitlines()) == 3
    assert_user_error(run_cli("translate", doc, "-c", ckpt, "-o", tmp_path / "x.txt"), "--first-pass SENTENCE_CKPT")
    assert not (tmp_path / "x.txt").exists()
    result = run_cli("evaluate", "-c", ckpt, "--split", "valid", "--beam", 1)
    assert result.exit_code == 0 and "BLEU" in result.stdout, result.output


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    """(root, data, sentence-level checkpoint, bilingual recipe, bilingual checkpoint), built through the CLI."""
    root = tmp_path_factory.mktemp("bilingual")
    data = root / "data"
    result = run_cli("prepare", "synthetic", "--out", data, "--docs", 41, "--seed", 1)
    assert result.exit_code == 0, result.output
    result = run_cli("train", ROOT / "recipes" / "lupo2022_focused_concat" / "en_de_base.yaml",
                     *tiny_sets(data, root / "sentence"), "--set", "train.early_stop_on=window_loss")
    assert result.exit_code == 0, result.output
    sentence = root / "sentence" / "checkpoint_best.pt"
    recipe = root / "bilingual.yaml"
    recipe.write_text(yaml.safe_dump({"data": {"path": str(data)}, "model": BILINGUAL,
                                      "train": {"save_dir": str(root / "bilingual"), "threads": 1}}))
    result = run_cli("train", recipe, *tiny_sets(data, root / "bilingual"), "--set", "model.encoder_layers=2")
    assert_user_error(result, "first-pass stream 'first-pass' of split 'train'", "ctxmt first-pass -c SENTENCE_CKPT")
    assert not (root / "bilingual").exists()                                # refused before anything was written
    for split in ("train", "valid"):
        result = run_cli("first-pass", "-c", sentence, "--data", data, "--split", split, "--beam", 1)
        assert result.exit_code == 0, result.output
    result = run_cli("train", recipe, *tiny_sets(data, root / "bilingual"), "--set", "model.encoder_layers=2")
    assert result.exit_code == 0, result.output
    return root, data, sentence, recipe, root / "bilingual" / "checkpoint_best.pt"


def test_training_logs_both_sides_kept_shares(pipeline):
    root = pipeline[0]
    records = [json.loads(line) for line in (root / "bilingual" / "metrics.jsonl").read_text().splitlines()]
    valid = [r for r in records if r.get("kind") == "valid"]
    assert valid and all(0 <= r["kept_target_context_layer2"] <= 1 and 0 <= r["kept_context_layer2"] <= 1
                         for r in valid)


def test_translate_with_a_first_pass(pipeline, tmp_path):
    root, data, sentence, _, bilingual = pipeline
    lines = (data / "raw" / "test.src").read_text().split("\n\n")[:2]
    doc = tmp_path / "doc.txt"
    doc.write_text("\n\n".join("\n".join(d.strip().splitlines()[:3]) for d in lines) + "\n")
    out = tmp_path / "out.txt"
    result = run_cli("translate", doc, "-c", bilingual, "--first-pass", sentence, "-o", out, "--beam", 1)
    assert result.exit_code == 0, result.output
    src, hyp = doc.read_text().splitlines(), out.read_text().splitlines()
    assert len(hyp) == len(src) and [i for i, s in enumerate(src) if not s] == [i for i, h in enumerate(hyp) if not h]
    assert_user_error(run_cli("translate", doc, "-c", bilingual, "-o", tmp_path / "x.txt"),
                      "--first-pass SENTENCE_CKPT")
    assert_user_error(run_cli("translate", doc, "-c", sentence, "--first-pass", sentence, "-o", tmp_path / "y.txt"),
                      "reads no target context")
    assert_user_error(run_cli("translate", doc, "-c", sentence, "--first-pass", bilingual, "-o", tmp_path / "z.txt"),
                      "reads no target context")
    assert_user_error(run_cli("translate", doc, "-c", bilingual, "--first-pass", bilingual, "-o", tmp_path / "w.txt"),
                      "itself reads target context")
    assert not any((tmp_path / f"{n}.txt").exists() for n in "xyzw")


def test_evaluate_reads_the_split_stream_or_a_first_pass(pipeline, tmp_path):
    _, data, sentence, _, bilingual = pipeline
    out = tmp_path / "valid.json"
    result = run_cli("evaluate", "-c", bilingual, "--split", "valid", "--beam", 1, "--out", out)
    assert result.exit_code == 0, result.output
    assert "BLEU" in result.stdout and json.loads(out.read_text())["segments"] == 167
    assert_user_error(run_cli("evaluate", "-c", bilingual, "--split", "test", "--beam", 1),
                      "no first-pass stream 'first-pass'", "--first-pass SENTENCE_CKPT")
    result = run_cli("evaluate", "-c", sentence, "-c", bilingual, "--split", "test", "--beam", 1,
                     "--first-pass", sentence)
    assert result.exit_code == 0, result.output
    assert_user_error(run_cli("evaluate", "-c", sentence, "--split", "test", "--first-pass", sentence),
                      "no checkpoint reads target context")
    assert_user_error(run_cli("first-pass", "-c", bilingual, "--data", data, "--split", "test", "--name", "x"),
                      "is a hanoit model reading target context")


def test_table2_recipe_trains_on_the_first_pass_and_translates(pipeline, tmp_path):
    """recipes/yang2023_hanoit/table2_iwslt17_hanoit.yaml on tiny dims (1 unified + 1 selection layer) over the
    streams the pipeline wrote, then translated with its first pass."""
    root, data, sentence, _, _ = pipeline
    recipe = ROOT / "recipes" / "yang2023_hanoit" / "table2_iwslt17_hanoit.yaml"
    save = tmp_path / "table2"
    result = run_cli("train", recipe, *tiny_recipe(data, save))
    assert result.exit_code == 0, result.output
    doc = tmp_path / "doc.txt"
    doc.write_text("\n".join((data / "raw" / "test.src").read_text().split("\n\n")[0].strip().splitlines()[:3]) + "\n")
    result = run_cli("translate", doc, "-c", save / "checkpoint_best.pt", "--first-pass", sentence, "--beam", 1,
                     "-o", tmp_path / "out.txt")
    assert result.exit_code == 0, result.output
    assert len((tmp_path / "out.txt").read_text().splitlines()) == 3


def test_target_context_row_trains_on_the_first_pass_translates_and_evaluates(pipeline, tmp_path):
    """recipes/yang2023_hanoit/table2_iwslt17_hanoit_target.yaml (context_side: target) on tiny dims over the
    streams the pipeline wrote: its kept shares are the target context's, and it translates and evaluates with a
    first pass (and refuses to go without one)."""
    root, data, sentence, _, _ = pipeline
    recipe = ROOT / "recipes" / "yang2023_hanoit" / "table2_iwslt17_hanoit_target.yaml"
    save = tmp_path / "target"
    result = run_cli("train", recipe, *tiny_recipe(data, save))
    assert result.exit_code == 0, result.output
    valid = [r for r in map(json.loads, (save / "metrics.jsonl").read_text().splitlines()) if r.get("kind") == "valid"]
    assert valid and 0 <= valid[-1]["kept_target_context_layer2"] <= 1 and "kept_context_layer2" not in valid[-1]
    translates_and_evaluates(data, sentence, save / "checkpoint_best.pt", tmp_path)


@pytest.mark.parametrize("system", ["ect", "dual_encoder"])
def test_table2_baseline_recipes_train_on_the_first_pass_translate_and_evaluate(pipeline, tmp_path, system):
    """recipes/yang2023_hanoit/table2_iwslt17_{ect,dual_encoder}.yaml (concat / caching with bilingual: true) on
    tiny dims over the streams the pipeline wrote, then translated and evaluated with its first pass (and refusing
    to go without one)."""
    _, data, sentence, _, _ = pipeline
    save = tmp_path / system
    sets = [f"data.path={data}", f"train.save_dir={save}", "model.preset=null", "model.d_model=32", "model.ffn_dim=64",
            "model.heads=4", "model.decoder_layers=1", "model.encoder_layers=1", "train.max_steps=3",
            "train.valid_every=3", "train.warmup_steps=2", "data.max_tokens=400", "train.threads=1"]
    result = run_cli("train", ROOT / "recipes" / "yang2023_hanoit" / f"table2_iwslt17_{system}.yaml",
                     *[a for s in sets for a in ("--set", s)])
    assert result.exit_code == 0, result.output
    translates_and_evaluates(data, sentence, save / "checkpoint_best.pt", tmp_path)
