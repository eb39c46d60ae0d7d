"""``ctxmt import marian DIR --out MODEL``: a Hugging Face ``MarianMTModel`` folder as a ctxmt sentence-level
checkpoint that carries its tokenizer.

The folder holds ``config.json`` (:mod:`ctxmt_cli.convert.marian_config`), the weights (``model.safetensors``, or
``pytorch_model.bin`` read with ``torch.load(weights_only=True)``: a file that would run code is refused, never
run), ``source.spm``, ``target.spm`` and ``vocab.json`` (:mod:`ctxmt_cli.convert.marian_vocab`). The checkpoint is
the one ``ctxmt train`` writes for a sentence-level model (no optimiser state), plus ``imported_from``: the folder,
its model name (``_name_or_path``) and the sha256 of every file read, which ``ctxmt inspect`` shows. Everything is
checked before anything is written; the output file appears whole or not at all.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import torch

from ctxmt_cli.config import recipe_to_dict, validate_recipe
from ctxmt_cli.convert.marian_config import HINT, decode_section, model_section, read_json
from ctxmt_cli.convert.marian_vocab import MUTED_BIAS, Table, build_table
from ctxmt_cli.core.batch import VocabInfo
from ctxmt_cli.errors import CtxmtError, option
from ctxmt_cli.outputs import file_sha256
from ctxmt_cli.paths import check_output_file

#: Hugging Face parameter names (after ``model.encoder.`` / ``model.decoder.``) -> ctxmt's, per layer
ENCODER_NAMES = {"self_attn_layer_norm": "attn_block.norm", "fc1": "ffn.fc1", "fc2": "ffn.fc2",
                 "final_layer_norm": "ffn_block.norm", "self_attn": "self_attn"}
DECODER_NAMES = {"self_attn_layer_norm": "self_block.norm", "encoder_attn_layer_norm": "cross_block.norm",
                 "encoder_attn": "cross_attn", "fc1": "ffn.fc1", "fc2": "ffn.fc2",
                 "final_layer_norm": "ffn_block.norm", "self_attn": "self_attn"}
LAYER = re.compile(r"^model\.(encoder|decoder)\.layers\.(\d+)\.([a-z_0-9]+)\.(.+)$")
#: the shared embedding under each name a checkpoint may store it (tied: the same numbers)
EMBEDDINGS = ("model.shared.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight",
              "lm_head.weight")
POSITIONS = ("model.encoder.embed_positions.weight", "model.decoder.embed_positions.weight")
#: the seed of the ``<brk>`` row's draw (the same import gives the same file)
BRK_SEED = 36


def read_weights(folder: Path) -> tuple[dict, Path]:
    """The folder's tensors (float32, CPU) and the file they came from."""
    safe, pickled = folder / "model.safetensors", folder / "pytorch_model.bin"
    if safe.is_file():
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        try:
            state = load_file(str(safe))
        except (SafetensorError, OSError, ValueError) as err:
            raise CtxmtError(f"{safe} is not a readable safetensors file ({str(err)[:80]}); download it "
                             "again") from None
        return {k: v.float() for k, v in state.items()}, safe
    if pickled.is_file():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                state = torch.load(pickled, map_location="cpu", weights_only=True)
        except Exception as err:  # noqa: BLE001 - a pickle that needs code, or a damaged file: refused alike
            raise CtxmtError(f"{pickled} cannot be read as plain tensors ({type(err).__name__}); ctxmt never runs "
                             "code from a pickle: convert it to model.safetensors or download it again") from None
        if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
            raise CtxmtError(f"{pickled} holds no state dict of tensors; give the folder save_pretrained wrote")
        return {k: v.float() for k, v in state.items()}, pickled
    hint = " (sharded weights: merge them with save_pretrained(max_shard_size=...))" if any(
        folder.glob("*.index.json")) else ""
    raise CtxmtError(f"{folder} has neither model.safetensors nor pytorch_model.bin{hint}; {HINT}")


def _embedding(state: dict, where: Path) -> torch.Tensor:
    found = [state[k] for k in EMBEDDINGS if k in state]
    if not found:
        raise CtxmtError(f"{where} has no token embedding (model.shared.weight); give a MarianMTModel's weights")
    if any(t.shape != found[0].shape or not torch.equal(t, found[0]) for t in found[1:]):
        raise CtxmtError(f"{where}: the encoder, decoder and output embeddings differ (untied embeddings); ctxmt "
                         "imports models with one shared embedding table")
    return found[0]


def layer_state(state: dict, where: Path) -> dict:
    """The per-layer tensors under ctxmt's names (attention projections still separate: the model fuses them on
    load); an unknown tensor is one line naming it."""
    out = {}
    for key, value in state.items():
        if key in EMBEDDINGS or key in POSITIONS or key == "final_logits_bias":
            continue
        m = LAYER.match(key)
        names = None if m is None else (ENCODER_NAMES if m.group(1) == "encoder" else DECODER_NAMES)
        if m is None or m.group(3) not in names:
            raise CtxmtError(f"{where}: tensor {key} is not part of the Marian architecture ctxmt computes "
                             "(a layer norm on embeddings, a final layer norm?); it cannot be imported")
        out[f"{m.group(1)}_layers.{m.group(2)}.{names[m.group(3)]}.{m.group(4)}"] = value
    return out


def mapped_state(state: dict, table: Table, where: Path) -> dict:
    """The Marian tensors as a ctxmt sentence model's state dict (embedding rows in ctxmt's id order, the output
    bias with its muted ids)."""
    emb = _embedding(state, where)
    if emb.size(0) <= max(r for r in table.rows if r is not None):
        raise CtxmtError(f"{where}: the embedding has {emb.size(0)} rows, fewer than vocab.json's ids")
    rows = torch.tensor([0 if r is None else r for r in table.rows])
    weight = emb.index_select(0, rows).clone()                              # (V', C)
    fresh = [i for i, r in enumerate(table.rows) if r is None]
    gen = torch.Generator().manual_seed(BRK_SEED)
    weight[fresh] = torch.randn(len(fresh), emb.size(1), generator=gen) * emb.std()   # as wide as the others
    bias = state.get("final_logits_bias", torch.zeros(1, emb.size(0))).reshape(-1)
    if bias.numel() != emb.size(0):
        raise CtxmtError(f"{where}: final_logits_bias has {bias.numel()} entries for {emb.size(0)} tokens")
    bias = bias.index_select(0, rows).clone()
    bias[table.muted] = MUTED_BIAS
    out = {"src_embed.weight": weight, "tgt_embed.weight": weight, "output.weight": weight, "output.bias": bias}
    out.update(layer_state(state, where))
    return out


def check_positions(state: dict, model, where: Path) -> None:
    """A stored position table must be Marian's sinusoids (ours): another table would compute another model."""
    for key in POSITIONS:
        if key in state:
            stored = state[key]
            ours = model.src_pos.first(stored.size(0), torch.device("cpu"))[0]
            if stored.shape != ours.shape or not torch.allclose(stored, ours, atol=1e-4):
                raise CtxmtError(f"{where}: {key} is not Marian's sinusoidal table (learned positions?); ctxmt "
                                 "imports models with Marian's sinusoidal positions")


def read_folder(folder: Path) -> tuple[dict, dict, Table, dict, list[Path], dict]:
    """Everything of a MarianMTModel folder, checked: the recipe dict, the ctxmt state dict, the vocabulary table,
    the import record, the files read and the folder's own tensors."""
    folder = Path(folder)
    if not folder.is_dir():
        raise CtxmtError(f"DIR {folder} {'is a file' if folder.exists() else 'not found'}: give the folder of a "
                         "MarianMTModel (config.json, model.safetensors, source.spm, target.spm, vocab.json)")
    config_path = folder / "config.json"
    config = read_json(config_path, "config.json")
    section = model_section(config, config_path)
    protos, read = {}, [config_path]
    for side, name in (("src", "source.spm"), ("tgt", "target.spm")):
        path = folder / name
        if not path.is_file():
            raise CtxmtError(f"{path} not found: a MarianMTModel folder has {name}; {HINT}")
        protos[side], read = path.read_bytes(), read + [path]
    vocab_path = folder / "vocab.json"
    vocab = read_json(vocab_path, "vocab.json")
    tok_config = folder / "tokenizer_config.json"
    langs = read_json(tok_config, "") if tok_config.is_file() else {}
    lang = tuple(str(langs.get(k) or d) for k, d in (("source_lang", "src"), ("target_lang", "tgt")))
    table = build_table(protos, vocab, config, vocab_path, lang)
    weights, weights_path = read_weights(folder)
    state = mapped_state(weights, table, weights_path)
    name = str(config.get("_name_or_path") or folder.resolve().name)
    recipe = {"name": name, "description": f"imported from the Marian model {name} (ctxmt import marian)",
              "model": section, "decode": decode_section(folder, config)}
    read += [vocab_path, weights_path] + ([folder / "generation_config.json"]
                                          if (folder / "generation_config.json").is_file() else [])
    record = {"kind": "marian", "folder": str(folder.resolve()), "name_or_path": config.get("_name_or_path"),
              "transformers_version": config.get("transformers_version"),
              "files": {p.name: file_sha256(p) for p in read}, "pieces_added": table.added}
    return recipe, state, table, record, read, weights


def import_marian(folder: Path, out: Path, force: bool = False) -> dict:
    """Write the MarianMTModel folder ``folder`` as the ctxmt checkpoint ``out`` (``.pt``, or ``.safetensors``);
    ``out`` must not exist unless ``force``. Returns the import record."""
    from ctxmt_cli.models.families import build_model
    from ctxmt_cli.models.loading import load_state_strict
    from ctxmt_cli.train.checkpoint import model_payload, save_checkpoint

    out = Path(out)
    check_output_file(out, option("out"), force=force, inputs=(Path(folder),))
    recipe, state, table, record, _, weights = read_folder(folder)
    tok = table.tokenizer
    checked = validate_recipe(recipe, f"{folder} (imported)", stored=True)
    vocab = VocabInfo.of(tok)
    model = build_model(checked.model, vocab)
    check_positions(weights, model, Path(folder))
    load_state_strict(model, state, Path(folder))
    meta = {"src_lang": tok.src_lang, "tgt_lang": tok.tgt_lang, "joint": tok.joint, "moses": False,
            "specials": {"pad": vocab.pad, "unk": vocab.unk, "bos": vocab.bos, "eos": vocab.eos, "brk": vocab.brk},
            "tokenizer_fingerprint": tok.fingerprint()}
    payload = model_payload(recipe_to_dict(checked), tok, vocab, meta, model)
    payload["imported_from"] = record
    save_checkpoint(payload, out)
    return record
