"""The ctxmt part of an exported CTranslate2 folder: ``ctxmt.json`` and the SentencePiece model(s).

``ctxmt.json`` holds what translation needs besides the network: the family and its model settings (context
sizes, ``max_window_tokens``: the windows), the decoding defaults (beam, length penalty, length limits, target
context mode, documents per batch), the tokenizer's languages, Moses flag and user symbols (``<brk>``), the
vocabulary's special ids, the quantization, the position table's size and the ctxmt version that wrote it. The
SentencePiece model is ``sentencepiece.model`` for a joint vocabulary, else ``source.spm`` and ``target.spm``
(``.model`` each). Imports nothing heavy: reading a folder needs neither torch nor CTranslate2.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from ctxmt_cli.errors import CtxmtError, option

META_FILE = "ctxmt.json"
FORMAT = "ctxmt-ctranslate2"
FORMAT_VERSION = 1
JOINT_SPM, SOURCE_SPM, TARGET_SPM = "sentencepiece.model", "source.spm.model", "target.spm.model"


def spm_files(tokenizer) -> dict[str, bytes]:
    """File name -> SentencePiece model bytes of ``tokenizer`` (one joint model, or one per side)."""
    state = tokenizer.to_state()
    if state["tgt_model"] is None:
        return {JOINT_SPM: state["src_model"]}
    return {SOURCE_SPM: state["src_model"], TARGET_SPM: state["tgt_model"]}


def metadata(recipe, tokenizer, vocab, quantization: str, positions: int) -> dict:
    """The content of ``ctxmt.json`` for a model trained with ``recipe``."""
    import ctxmt_cli

    state = tokenizer.to_state()
    return {
        "format": FORMAT, "format_version": FORMAT_VERSION, "ctxmt_version": ctxmt_cli.__version__,
        "family": recipe.model.family,
        "model": recipe.model.model_dump(mode="json"),
        "window": {"max_window_tokens": recipe.data.max_window_tokens, "separator": "<brk>",
                   "positions": positions},
        "decode": recipe.decode.model_dump(mode="json"),
        "tokenizer": {"src_lang": state["src_lang"], "tgt_lang": state["tgt_lang"], "moses": state["moses"],
                      "user_symbols": state["user_symbols"], "sentencepiece": sorted(spm_files(tokenizer))},
        "vocab": asdict(vocab),
        "quantization": quantization,
    }


def read_metadata(folder: Path) -> dict:
    """``ctxmt.json`` of an exported folder; anything else (a checkpoint file, another folder) is one line."""
    folder = Path(folder)
    hint = "export a checkpoint with: ctxmt export ctranslate2 -c CKPT -o DIR"
    if not folder.exists():
        raise CtxmtError(f"{folder} not found; {option('engine')} ctranslate2 takes the folder ctxmt export "
                         "ctranslate2 wrote")
    if folder.is_file():
        raise CtxmtError(f"{folder} is a file; {option('engine')} ctranslate2 takes the folder ctxmt export "
                         f"ctranslate2 wrote (or use {option('engine')} torch for a checkpoint)")
    if not (folder / META_FILE).is_file():
        raise CtxmtError(f"{folder} is not a folder written by ctxmt export ctranslate2 (no {META_FILE}); {hint}")
    try:
        meta = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise CtxmtError(f"{folder / META_FILE} is not valid JSON ({err}); {hint} again") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise CtxmtError(f"{folder / META_FILE} is not ctxmt's export metadata; {hint}")
    if meta.get("format_version") != FORMAT_VERSION:
        raise CtxmtError(f"{folder} was exported in format version {meta.get('format_version')}; this ctxmt reads "
                         f"version {FORMAT_VERSION}: export the checkpoint again")
    return meta


def read_recipe(meta: dict, folder: Path):
    """The recipe translation reads (model, window limit, decoding defaults) rebuilt from ``ctxmt.json``."""
    from ctxmt_cli.config import validate_recipe

    raw = {"model": meta["model"], "data": {"max_window_tokens": meta["window"]["max_window_tokens"]},
           "decode": meta["decode"]}
    return validate_recipe(raw, str(Path(folder) / META_FILE), stored=True)


def read_tokenizer(meta: dict, folder: Path):
    """The tokenizer of the exported model, from its SentencePiece file(s) and ``ctxmt.json``."""
    from ctxmt_cli.data.tokenize import Tokenizer

    folder, info = Path(folder), meta["tokenizer"]
    names = info["sentencepiece"]
    missing = [n for n in names if not (folder / n).is_file()]
    if missing:
        raise CtxmtError(f"{folder / missing[0]} is missing; export the checkpoint again")
    joint = names == [JOINT_SPM]
    src = (folder / (JOINT_SPM if joint else SOURCE_SPM)).read_bytes()
    tgt = None if joint else (folder / TARGET_SPM).read_bytes()
    return Tokenizer(src, tgt, moses=info["moses"], src_lang=info["src_lang"], tgt_lang=info["tgt_lang"],
                     user_symbols=info["user_symbols"])
