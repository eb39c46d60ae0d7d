"""Tiny random checkpoints and their CTranslate2 exports, shared by the export and engine tests (unit and CLI)."""

from __future__ import annotations

from pathlib import Path

import torch

from ctxmt_cli.config import recipe_to_dict, validate_recipe
from ctxmt_cli.core.batch import VocabInfo
from ctxmt_cli.data.prepare import PrepareSpec, SplitInput, prepare_corpus
from ctxmt_cli.data.store import PreparedData
from ctxmt_cli.models.families import build_model, resolve_model_config
from ctxmt_cli.outputs import torch_save
from ctxmt_cli.train.checkpoint import model_payload

TINY = {"preset": None, "d_model": 32, "ffn_dim": 64, "heads": 4, "encoder_layers": 1, "decoder_layers": 1}
SENTENCE = {"family": "sentence"}
CONCAT = {"family": "concat", "src_context_sentences": 2, "tgt_context_sentences": 2}        # s3to3
# short outputs keep random models fast and make rows reach their length limit (the cut-and-retry path)
DECODE = {"beam": 3, "max_len_a": 1.0, "max_len_b": 3, "batch_docs": 4}


def write_checkpoint(prepared: Path, out: Path, model: dict, *, data: dict | None = None, seed: int = 0,
                     edit=None) -> Path:
    """A checkpoint of a tiny model (``model``: the recipe's model section, on tiny dims) with random, peaked
    weights and ``prepared``'s vocabulary; ``edit(model)`` changes the weights before saving."""
    prepared_data = PreparedData(prepared)
    tok = prepared_data.tokenizer
    recipe = validate_recipe({"data": {"path": str(prepared), **(data or {})}, "model": {**TINY, **model},
                              "decode": DECODE})
    recipe = recipe.model_copy(update={"model": resolve_model_config(recipe.model, prepared_data.meta)})
    vocab = VocabInfo(src_size=tok.src_vocab_size, tgt_size=tok.tgt_vocab_size, brk=tok.brk_id, joint=tok.joint)
    torch.manual_seed(seed)
    net = build_model(recipe.model, vocab)
    with torch.no_grad():                                                   # varied outputs, not one token
        for p in net.parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.35)
        if edit is not None:
            edit(net)
    return torch_save(model_payload(recipe_to_dict(recipe), tok, vocab, prepared_data.meta, net), out)


def prepare_per_side(root: Path, raw: Path) -> Path:
    """The tiny synthetic corpus of ``raw`` prepared with one SentencePiece model per side."""
    splits = {s: SplitInput(raw / f"{s}.src", raw / f"{s}.tgt") for s in ("train", "valid")}
    out = root / "prepared-per-side"
    prepare_corpus(PrepareSpec(fmt="text", splits=splits, src_lang="src", tgt_lang="tgt", out=out, vocab_size=120,
                               joint=False))
    return out


def read_documents(prepared: Path, sizes=(3, 1, 5, 4)) -> list[list[str]]:
    """The first sentences of the first test documents of the synthetic corpus behind ``prepared``."""
    docs = (prepared.parent / "raw" / "test.src").read_text(encoding="utf-8").strip().split("\n\n")
    return [doc.splitlines()[:n] for doc, n in zip(docs, sizes, strict=False)]
