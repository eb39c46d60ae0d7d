"""Checkpoints a user can give: crafted or damaged files, safetensors, ``--resume`` with a changed recipe.

Each crafted checkpoint (built from the trained ``concat_checkpoint`` with ``torch.save`` of a modified dict, or
written as safetensors) goes to every command that loads one: exit 2, one line naming the file and what is wrong,
no traceback, the checkpoint, the scratch directory and the fixtures byte-identical afterwards
(:func:`tests.integration.test_bad_inputs.check_bad_input`). Then a safetensors export translates and scores as
its ``.pt`` does, and ``--resume`` refuses a changed recipe unless ``--allow-changed`` names the keys.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from ctxmt_cli import api
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.models.loading import read_checkpoint
from ctxmt_cli.models.tensor_hashes import FIELD
from ctxmt_cli.train.checkpoint import save_checkpoint
from tests.integration import test_bad_inputs
from tests.integration.conftest import QUICKSTART, TINY_SETS, run_cli
from tests.integration.test_bad_inputs import check_bad_input, placeholders
from tests.unit.test_tensor_hashes import flip_bytes

ws = test_bad_inputs.ws            # the scratch directory fixture of the bad-input battery


def _edit(good: Path, change) -> dict:
    ckpt = torch.load(good, map_location="cpu", weights_only=True)
    change(ckpt)
    return ckpt


def _first_state(ckpt: dict) -> torch.Tensor:
    return next(t for state in ckpt["optimizer"]["state"].values() for t in state.values() if t.numel() > 1)


def _one_value_changed(good: Path, path: Path) -> None:
    """The good checkpoint with the first value of its first weight raised by 1."""
    def change(ckpt: dict) -> None:
        next(iter(ckpt["model"].values())).view(-1)[0].add_(1)

    torch.save(_edit(good, change), path)


def _safetensors_with(path: Path, metadata: dict | None) -> None:
    save_file({"w": torch.zeros(2)}, str(path), metadata=metadata)


def _flipped_pt(good: Path, path: Path) -> None:
    """The good checkpoint with 16 bytes flipped in every tensor's storage, the zip around them intact."""
    shutil.copyfile(good, path)
    assert flip_bytes(path)


def _flipped_safetensors(good: Path, path: Path) -> None:
    """The good checkpoint exported to safetensors, then 16 bytes flipped in the middle of every weight."""
    save_checkpoint(read_checkpoint(good), path)
    data = bytearray(path.read_bytes())
    header_len = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + header_len])
    for name, entry in header.items():
        begin, end = entry["data_offsets"] if name != "__metadata__" else (0, 0)
        if end - begin >= 16 and not name.startswith("__ctxmt__"):
            at = 8 + header_len + (begin + end - 16) // 2
            data[at:at + 16] = bytes(b ^ 0xFF for b in data[at:at + 16])
    path.write_bytes(bytes(data))


DAMAGED = ["it is damaged: tensor '", "does not match the sha256 recorded when ctxmt wrote it"]

#: name → (how to build it from the good checkpoint into a folder, fragments its error line must hold)
CRAFTED = {
    "flipped.pt": (_flipped_pt, DAMAGED),
    "flipped.safetensors": (_flipped_safetensors, DAMAGED),
    "one_value.pt": (_one_value_changed, DAMAGED),
    "optimizer_value.pt": (lambda g, p: torch.save(_edit(g, lambda c: _first_state(c).add_(1)), p),
                           ["it is damaged: tensor 'optimizer/state/", "does not match the sha256"]),
    "bad_hashes.pt": (lambda g, p: torch.save(_edit(g, lambda c: c.update(tensor_hashes={"tensors": []})), p),
                      ["its 'tensor_hashes' record is not {algorithm, tensors"]),
    "no_vocab.pt": (lambda g, p: torch.save(_edit(g, lambda c: c.pop("vocab")), p), ["no 'vocab'"]),
    "vocab_list.pt": (lambda g, p: torch.save(_edit(g, lambda c: c.update(vocab=[400, 400])), p),
                      ["'vocab' is a list"]),
    "vocab_size.pt": (lambda g, p: torch.save(_edit(g, lambda c: c["vocab"].update(src_size="400")), p),
                      ["'vocab.src_size' is '400'"]),
    "no_tokenizer.pt": (lambda g, p: torch.save(_edit(g, lambda c: c.pop("tokenizer")), p), ["no 'tokenizer'"]),
    "corrupt_spm.pt": (lambda g, p: torch.save(_edit(g, lambda c: c["tokenizer"].update(src_model=b"x" * 64)), p),
                       ["SentencePiece model is corrupt"]),
    "old_recipe.pt": (lambda g, p: torch.save(_edit(g, lambda c: c["recipe"]["train"].update(retired=1)), p),
                      ["unknown key 'train.retired'", "does not validate"]),
    "wider.pt": (lambda g, p: torch.save(_edit(g, lambda c: c["recipe"]["model"].update(d_model=64)), p),
                 ["weights do not fit", "(400, 32) instead of (400, 64)"]),
    "lost_tensor.pt": (lambda g, p: torch.save(_edit(g, lambda c: c["model"].pop(next(iter(c["model"])))), p),
                       ["weights do not fit", "missing 1 tensors"]),
    "bad_state.pt": (lambda g, p: torch.save(_edit(g, lambda c: c["state"].update(step="four")), p),
                     ["'state.step' is a str"]),
    "a_list.pt": (lambda g, p: torch.save([1, 2, 3], p), ["holds a list", "not ctxmt's fields"]),
    "empty.pt": (lambda g, p: p.write_bytes(b""), ["not a readable ctxmt checkpoint"]),
    "text.pt": (lambda g, p: p.write_text("model: yes\nrecipe: no\n"), ["not a readable ctxmt checkpoint"]),
    "truncated.pt": (lambda g, p: p.write_bytes(g.read_bytes()[: g.stat().st_size // 2]),
                     ["not a readable ctxmt checkpoint"]),
    "foreign.safetensors": (lambda g, p: _safetensors_with(p, {"format": "pt"}), ["no 'ctxmt' metadata"]),
    "not_json.safetensors": (lambda g, p: _safetensors_with(p, {"ctxmt": "{not json"}), ["metadata is not JSON"]),
    "no_vocab.safetensors": (lambda g, p: _safetensors_with(p, {"ctxmt": json.dumps({"recipe": {}, "vocab": 1})}),
                             ["no 'tokenizer'"]),
}

#: every command that loads a checkpoint, with {bad} for the crafted file
LOADERS = {
    "inspect": ["inspect", "-c", "{bad}"],
    "translate": ["translate", "doc.txt", "-c", "{bad}", "-o", "out.txt"],
    "evaluate": ["evaluate", "-c", "{bad}", "--data", "{data}", "--out", "scores.json"],
    "contrastive": ["contrastive", "synthetic:{data}", "-c", "{bad}", "--out", "res"],
    "cxmi": ["cxmi", "-c", "{bad}", "--data", "{data}", "--out", "cxmi.json"],
    "average": ["average", "-c", "{bad}", "-c", "{ckpt}", "-o", "avg.pt"],
    "export-ct2": ["export", "ctranslate2", "-c", "{bad}", "-o", "ct2"],
    "export-safetensors": ["export", "safetensors", "-c", "{bad}", "-o", "out.safetensors"],
    "first-pass": ["first-pass", "-c", "{bad}", "--data", "{data}", "--split", "test", "--name", "fp"],
    "analyze-attention": ["analyze-attention", "-c", "{bad}", "--data", "{data}", "--out", "attn"],
    "serve": ["serve", "-c", "{bad}", "--port", "0"],
    "prepare-docrepair": ["prepare", "docrepair", "--data", "{data}", "--reverse", "{bad}", "--forward", "{ckpt}",
                          "--out", "dr"],
    "translate-repair": ["translate", "doc.txt", "-c", "{ckpt}", "--repair", "{bad}", "-o", "out.txt"],
}


@pytest.fixture(scope="module")
def crafted(concat_checkpoint, tmp_path_factory) -> Path:
    """Every file of :data:`CRAFTED`, built once."""
    folder = tmp_path_factory.mktemp("crafted")
    for name, (build, _) in CRAFTED.items():
        build(concat_checkpoint, folder / name)
    return folder


#: run by default: every crafted file through inspect and translate, every loader with three files; the rest
#: of the matrix (each loader goes through the same check at load) is marked slow (``pytest -m slow``)
EVERY_FILE_THROUGH = ("inspect", "translate")
EVERY_LOADER_WITH = ("no_vocab.pt", "wider.pt", "truncated.pt", "flipped.pt")
MATRIX = [pytest.param(name, command, id=f"{name}-{command}",
                       marks=() if command in EVERY_FILE_THROUGH or name in EVERY_LOADER_WITH else pytest.mark.slow)
          for name in CRAFTED for command in LOADERS]


@pytest.mark.parametrize("name,command", MATRIX)
def test_a_crafted_checkpoint_is_one_line_for_every_loader(name, command, crafted, ws, synthetic_dir,
                                                           concat_checkpoint):
    shutil.copyfile(crafted / name, ws / name)
    paths = {**placeholders(data=synthetic_dir, ckpt=concat_checkpoint), "bad": name}
    check_bad_input(LOADERS[command], [name, *CRAFTED[name][1]], ws, paths)


@pytest.mark.parametrize("name", list(CRAFTED))
def test_api_load_refuses_a_crafted_checkpoint_in_one_line(name, crafted):
    before = (crafted / name).read_bytes()
    with pytest.raises(CtxmtError) as err:
        api.load(crafted / name, device="cpu")
    assert "\n" not in str(err.value) and name in str(err.value)
    assert all(needle in str(err.value) for needle in CRAFTED[name][1]), str(err.value)
    assert (crafted / name).read_bytes() == before


def test_every_checkpoint_ctxmt_writes_carries_its_hashes(concat_checkpoint, tmp_path):
    for path in sorted(concat_checkpoint.parent.glob("checkpoint_*.pt")):
        record = torch.load(path, map_location="cpu", weights_only=True)[FIELD]
        assert record["algorithm"] == "sha256" and any(k.startswith("optimizer/") for k in record["tensors"]), path
    shown = json.loads(run_cli("inspect", "-c", concat_checkpoint, "--json").stdout)["tensor_hashes"]
    assert shown == len(torch.load(concat_checkpoint, weights_only=True)[FIELD]["tensors"])
    averaged = run_cli("average", "-c", concat_checkpoint, "-c", concat_checkpoint, "-o", tmp_path / "avg.pt")
    assert averaged.exit_code == 0
    assert set(torch.load(tmp_path / "avg.pt", weights_only=True)[FIELD]["tensors"]) >= {
        f"model/{k}" for k in read_checkpoint(concat_checkpoint)["model"]}


def test_a_checkpoint_from_before_hashes_still_loads_and_translates(concat_checkpoint, ws):
    old = torch.load(concat_checkpoint, map_location="cpu", weights_only=True)
    del old[FIELD]
    torch.save(old, ws / "old.pt")
    result = run_cli("translate", "doc.txt", "-c", "old.pt", "-o", "out.txt", "--device", "cpu")
    assert result.exit_code == 0 and "warning" not in result.stderr and "damaged" not in result.stderr, result.output
    reference = run_cli("translate", "doc.txt", "-c", concat_checkpoint, "-o", "ref.txt", "--device", "cpu")
    assert reference.exit_code == 0 and (ws / "out.txt").read_text() == (ws / "ref.txt").read_text()
    assert json.loads(run_cli("inspect", "-c", "old.pt", "--json").stdout)["tensor_hashes"] is None
    assert "tensor hashes" in run_cli("inspect", "-c", "old.pt").stdout


@pytest.mark.filterwarnings("ignore::DeprecationWarning")     # torch.jit.script itself is deprecated
def test_inspect_on_a_torchscript_file_prints_only_the_error(ws):
    """torch warns about a TorchScript archive before refusing it: that warning is not a second line."""
    torch.jit.script(torch.nn.Linear(2, 2)).save(str(ws / "script.pt"))
    check_bad_input(["inspect", "-c", "script.pt"], ["script.pt", "not a readable ctxmt checkpoint"], ws,
                    placeholders())


# ---- safetensors ----------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def exported(concat_checkpoint, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("safetensors") / "model.safetensors"
    result = run_cli("export", "safetensors", "-c", concat_checkpoint, "-o", out)
    assert result.exit_code == 0, result.output
    return out


def test_safetensors_holds_the_same_model_and_no_pickle(exported, concat_checkpoint):
    pt, st = read_checkpoint(concat_checkpoint), read_checkpoint(exported)
    assert exported.read_bytes()[8:9] == b"{" and b"PK\x03\x04" not in exported.read_bytes()[:16]
    assert pt["model"].keys() == st["model"].keys()
    assert all(torch.equal(pt["model"][k], st["model"][k]) for k in pt["model"])
    for key in ("recipe", "vocab", "vocab_fingerprint", "meta", "tokenizer", "state"):
        assert st[key] == pt[key], key
    assert "optimizer" not in st and "rng" not in st                          # for sharing, not for --resume
    assert exported.stat().st_size < concat_checkpoint.stat().st_size


def test_safetensors_translates_and_scores_as_the_pt(exported, concat_checkpoint, two_documents, tmp_path):
    docs = tmp_path / "docs.jsonl"
    lines = [d.splitlines()[:4] for d in two_documents.read_text().strip().split("\n\n")]
    docs.write_text("".join(json.dumps({"doc_id": f"d{i}", "src": d}) + "\n" for i, d in enumerate(lines)))
    outputs = {}
    for ckpt in (concat_checkpoint, exported):
        out = tmp_path / f"{ckpt.suffix[1:]}.jsonl"
        result = run_cli("translate", docs, "-c", ckpt, "-o", out, "--input-format", "jsonl", "--scores",
                         "--beam", 2, "--device", "cpu")
        assert result.exit_code == 0, result.output
        outputs[ckpt.suffix] = out.read_text()
    assert outputs[".pt"] == outputs[".safetensors"] and '"scores"' in outputs[".pt"]


def test_inspect_reads_safetensors_and_averaging_writes_it(exported, concat_checkpoint, tmp_path):
    result = run_cli("inspect", "-c", exported, "--json")
    assert result.exit_code == 0, result.output
    info = json.loads(result.stdout)
    reference = json.loads(run_cli("inspect", "-c", concat_checkpoint, "--json").stdout)
    assert info["container"] == "safetensors" and reference["container"] == "torch"
    assert info["training"]["resumable"] is False and reference["training"]["resumable"] is True
    for key in ("name", "family", "parameters", "vocabulary", "recipe"):
        assert info[key] == reference[key], key
    averaged = tmp_path / "avg.safetensors"
    assert run_cli("average", "-c", exported, "-c", concat_checkpoint, "-o", averaged).exit_code == 0
    mean = read_checkpoint(averaged)["model"]
    assert all(torch.equal(mean[k], v) for k, v in read_checkpoint(concat_checkpoint)["model"].items())


EXPORT = [
    (["export", "safetensors", "-c", "{ckpt}", "-o", "out.pt"], ["--out out.pt", "NAME.safetensors"]),
    (["export", "safetensors", "-c", "{ckpt}", "-o", "adir"], ["adir"]),
    (["export", "safetensors", "-c", "{ckpt}", "-o", "taken.safetensors"],
     ["taken.safetensors already exists", "--force"]),
    (["export", "safetensors", "-c", "taken.safetensors", "-o", "taken.safetensors", "--force"], ["is also an input"]),
    (["export", "safetensors", "-c", "{ckpt}", "-o", "afile/x.safetensors"], ["afile is a file"]),
    (["export", "safetensors", "-c", "none.pt", "-o", "x.safetensors"], ["checkpoint not found", "none.pt"]),
]


@pytest.mark.parametrize("args,needles", EXPORT)
def test_export_safetensors_bad_inputs(args, needles, ws, concat_checkpoint, exported):
    shutil.copyfile(exported, ws / "taken.safetensors")
    check_bad_input(args, needles, ws, placeholders(ckpt=concat_checkpoint))


# ---- --resume with a changed recipe ---------------------------------------------------------------------------

def _resume_args(save_dir: str, *extra: str) -> list[str]:
    sets = ["data.path={data}", f"train.save_dir={save_dir}", *TINY_SETS, *extra]
    return ["train", str(QUICKSTART), "--resume", *[a for s in sets for a in ("--set", s)]]


RESUME = [
    (_resume_args("run", "train.lr=0.01", "model.dropout=0.3"),
     ["checkpoint_last.pt was trained with other recipe values", "model.dropout 0.1 → 0.3", "train.lr 0.002 → 0.01",
      "--allow-changed model.dropout,train.lr"]),
    (_resume_args("run", "train.lr=0.01", "train.max_steps=6", "train.seed=7") + ["--allow-changed", "train.lr"],
     ["train.max_steps 4 → 6", "train.seed 1 → 7", "--allow-changed train.max_steps,train.seed"]),
    (_resume_args("run", "data.max_tokens=300", "train.label_smoothing=0.2"),
     ["data.max_tokens 400 → 300", "train.label_smoothing 0.1 → 0.2"]),
    (_resume_args("run") + ["--allow-changed", "train.lrr"], ["--allow-changed train.lrr", "no such key",
                                                                "train.lr"]),
    (["train", str(QUICKSTART), "--dry-run", "--allow-changed", "train.lr"], ["--allow-changed applies to --resume"]),
    (_resume_args("bare"), ["bare/checkpoint_last.pt", "no optimiser state", "--resume"]),
    (_resume_args("junk"), ["junk/checkpoint_last.pt", "no 'vocab'"]),
]


@pytest.mark.parametrize("args,needles", RESUME)
def test_resume_refuses_a_changed_recipe_or_an_unusable_checkpoint(args, needles, ws, synthetic_dir,
                                                                   concat_checkpoint, exported, crafted):
    shutil.copytree(concat_checkpoint.parent, ws / "run")
    (ws / "bare").mkdir()
    shutil.copyfile(exported, ws / "bare" / "checkpoint_last.pt")             # safetensors: weights only
    (ws / "junk").mkdir()
    shutil.copyfile(crafted / "no_vocab.pt", ws / "junk" / "checkpoint_last.pt")
    check_bad_input(args, needles, ws, placeholders(data=synthetic_dir))


def test_resume_with_allowed_changes_trains_on_and_records_them(ws, synthetic_dir, concat_checkpoint):
    run = shutil.copytree(concat_checkpoint.parent, ws / "run")
    args = [a.format(data=synthetic_dir) for a in _resume_args(str(run), "train.max_steps=6", "train.lr=0.01",
                                                                "train.log_every=3")]
    result = run_cli(*args, "--allow-changed", "train.max_steps,train.lr", "--log-format", "plain")
    assert result.exit_code == 0, result.output
    assert "with changed recipe values (--allow-changed): train.lr 0.002 → 0.01, train.max_steps 4 → 6" in result.stdout
    last = read_checkpoint(run / "checkpoint_last.pt")
    assert last["state"]["step"] == 6 and last["recipe"]["train"]["lr"] == 0.01
    assert last["state"]["recipe_history"] == [{"step": 4, "changed": {"train.lr": [0.002, 0.01],
                                                                       "train.max_steps": [4, 6]}}]
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    notes = [r for r in rows if r["kind"] == "message"]
    assert len(notes) == 1 and notes[0]["step"] == 4 and notes[0]["changed"]["train.lr"] == [0.002, 0.01]
    assert [r["step"] for r in rows if r["kind"] == "valid"] == [2, 4, 6]
    shown = json.loads(run_cli("inspect", "-c", run / "checkpoint_last.pt", "--json").stdout)["training"]
    assert shown["recipe_changes"] == last["state"]["recipe_history"]
