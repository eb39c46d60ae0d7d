"""A Hugging Face ``MarianConfig`` (``config.json``) as a ctxmt model section, or one line saying why it cannot be.

ctxmt's core computes Hugging Face's ``MarianMTModel`` exactly when the model is post-norm with no embedding or
final LayerNorm, sinusoidal positions in Marian's layout, one embedding table shared by the encoder, the decoder
and the output projection, the same heads and feed-forward width on both sides, and a ReLU, GELU or swish
feed-forward. Every ``config.json`` field that would make the model compute something else is checked here and
refused in one line naming the field and its value; the old BART-style fields of early conversions
(``normalize_before``, ``add_final_layer_norm``, ...) are accepted with their Marian values. No torch here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ctxmt_cli.errors import CtxmtError

#: config.json activation -> model.activation
ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "swish": "swish", "silu": "swish"}
#: fields that must hold this value when present (the value Marian's architecture has)
FIXED = {"normalize_before": False, "normalize_embedding": False, "add_final_layer_norm": False,
         "static_position_embeddings": True, "add_bias_logits": False, "share_encoder_decoder_embeddings": True,
         "tie_word_embeddings": True, "is_decoder": False}
#: ``ctxmt import`` names the file it reads in every message
HINT = "ctxmt imports Hugging Face MarianMTModel folders (Marian / OPUS-MT models)"


def read_json(path: Path, what: str) -> dict:
    """A JSON object file of the folder; missing, unreadable or not an object is one line."""
    if not path.is_file():
        raise CtxmtError(f"{path} not found: a MarianMTModel folder has {what}; {HINT}")
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CtxmtError(f"{path} is not readable JSON ({type(err).__name__}: {str(err)[:80]}); give the folder "
                         "save_pretrained wrote") from None
    if not isinstance(value, dict):
        raise CtxmtError(f"{path} holds a JSON {type(value).__name__}, not an object; give the folder "
                         "save_pretrained wrote")
    return value


def _refuse(path: Path, key: str, value: Any, why: str) -> CtxmtError:
    return CtxmtError(f"{path}: {key}: {json.dumps(value)} is not supported ({why})")


def _int(config: dict, key: str, path: Path, low: int = 1) -> int:
    value = config.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise CtxmtError(f"{path}: {key}: {json.dumps(value)}: expected an integer >= {low}; is it a MarianConfig?")
    return value


def _rate(config: dict, key: str, path: Path) -> float:
    value = config.get(key, 0.0)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
        raise CtxmtError(f"{path}: {key}: {json.dumps(value)}: expected a rate in [0, 1)")
    return float(value)


def check_marian(config: dict, path: Path) -> None:
    """Refuse a config that is not a MarianConfig, or one whose architecture ctxmt cannot compute exactly."""
    kind = config.get("model_type")
    if kind != "marian":
        raise CtxmtError(f"{path}: model_type: {json.dumps(kind)} is not a Marian model; {HINT}")
    for key, want in FIXED.items():
        if key in config and config[key] != want:
            why = f"ctxmt computes Marian's architecture, where it is {json.dumps(want)}"
            raise _refuse(path, key, config[key], why)
    act = config.get("activation_function", "gelu")
    if act not in ACTIVATIONS:
        raise _refuse(path, "activation_function", act, f"use one of {', '.join(ACTIVATIONS)}")
    for enc, dec in (("encoder_attention_heads", "decoder_attention_heads"), ("encoder_ffn_dim", "decoder_ffn_dim")):
        if config.get(enc) != config.get(dec):
            raise _refuse(path, dec, config.get(dec), f"ctxmt has one value for both sides; {enc} is "
                          f"{json.dumps(config.get(enc))}")
    vocab = config.get("vocab_size")
    if config.get("decoder_vocab_size") not in (None, vocab):
        raise _refuse(path, "decoder_vocab_size", config["decoder_vocab_size"], "untied vocabularies: ctxmt shares one "
                      f"table, vocab_size is {json.dumps(vocab)}")
    if config.get("decoder_start_token_id") != config.get("pad_token_id"):
        raise _refuse(path, "decoder_start_token_id", config.get("decoder_start_token_id"),
                      f"Marian starts decoding from pad_token_id {json.dumps(config.get('pad_token_id'))}")
    if _int(config, "d_model", path, 2) % 2:
        raise _refuse(path, "d_model", config["d_model"], "Marian's sinusoidal positions need an even width")


def model_section(config: dict, path: Path) -> dict:
    """The ctxmt ``model`` section (sentence family) computing the Marian model of ``config`` (see the module
    docstring); ``path`` names config.json in the messages."""
    check_marian(config, path)
    d, heads = _int(config, "d_model", path), _int(config, "encoder_attention_heads", path)
    if d % heads:
        raise _refuse(path, "encoder_attention_heads", heads, f"it must divide d_model {d}")
    return {
        "family": "sentence", "preset": None, "d_model": d, "ffn_dim": _int(config, "encoder_ffn_dim", path),
        "heads": heads, "encoder_layers": _int(config, "encoder_layers", path),
        "decoder_layers": _int(config, "decoder_layers", path),
        "dropout": _rate(config, "dropout", path), "attention_dropout": _rate(config, "attention_dropout", path),
        "activation_dropout": _rate(config, "activation_dropout", path),
        "max_positions": max(16, _int(config, "max_position_embeddings", path)),
        "normalize_before": False, "share_embeddings": "all",
        "activation": ACTIVATIONS[config.get("activation_function", "gelu")],
        "scale_embeddings": bool(config.get("scale_embedding", False)), "sinusoid": "marian", "output_bias": True,
    }


def decode_section(folder: Path, config: dict) -> dict:
    """Translation defaults from the folder's ``generation_config.json`` (or the old keys of config.json): its beam
    size and length penalty, which have the meaning of ctxmt's ``beam`` and ``lenpen``."""
    path = folder / "generation_config.json"
    generation = read_json(path, "generation_config.json") if path.is_file() else config
    beam, lenpen = generation.get("num_beams", 1), generation.get("length_penalty", 1.0)
    section = {}
    if isinstance(beam, int) and not isinstance(beam, bool) and beam >= 1:
        section["beam"] = beam
    if isinstance(lenpen, (int, float)) and not isinstance(lenpen, bool) and lenpen >= 0:
        section["lenpen"] = float(lenpen)
    return section
