"""ctxmt's encoder-decoder as a CTranslate2 ``TransformerSpec``: the weight mapping.

Shared by ``ctxmt export ctranslate2`` (:mod:`ctxmt_cli.export.ct2_export`) and the inference benchmarks'
CTranslate2 peer (``ctxmt_cli/benchmarks/peer_ct2.py``), so the exported model is the very one the peer times.

CTranslate2's Transformer and ctxmt's core (:mod:`ctxmt_cli.core.model`) compute the same function when the
model has: ReLU, GELU or swish feed-forward layers, embeddings scaled by sqrt(d_model) or not, position codes *added
once* at the input and indexed by the token's place in its sequence (a table: ctxmt's sinusoids, in either layout,
written out for ``max_positions`` places), pre- or post-LayerNorm (the final LayerNorm of a pre-norm stack), an
output projection with or without a bias.
The query, key and value projections are fused into one matrix (self-attention) or key and value (cross-
attention), as CTranslate2 stores them. Which models qualify is decided by :func:`ctxmt_cli.export.ct2_export.
refusal`; this module maps weights and imports ``ctranslate2`` only inside :func:`transformer_spec`.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor


def _np(t: Tensor) -> np.ndarray:
    return t.detach().float().cpu().contiguous().numpy()


def _linear(spec, *layers) -> None:
    """Fill a CTranslate2 linear spec with ``layers`` stacked along the output axis (fused projections)."""
    spec.weight = _np(torch.cat([layer.weight for layer in layers]))
    spec.bias = _np(torch.cat([layer.bias for layer in layers]))


def _norm(spec, norm) -> None:
    spec.gamma, spec.beta = _np(norm.weight), _np(norm.bias)


def _self_attention(spec, block, attn) -> None:
    _norm(spec.layer_norm, block.norm)
    _linear(spec.linear[0], attn.qkv_proj)
    _linear(spec.linear[1], attn.out_proj)


def _ffn(spec, block, ffn) -> None:
    _norm(spec.layer_norm, block.norm)
    _linear(spec.linear_0, ffn.fc1)
    _linear(spec.linear_1, ffn.fc2)


def _positions(pos_module, length: int) -> np.ndarray:
    """The model's own position codes for positions 0..length-1 of a one-sentence window: (length, C)."""
    return _np(pos_module(torch.arange(length).unsqueeze(0), None)[0])


def _encoder(spec, model, max_positions: int, pre_norm: bool) -> None:
    spec.embeddings[0].weight = _np(model.src_embed.weight)
    spec.position_encodings.encodings = _positions(model.src_pos, max_positions)
    for layer_spec, layer in zip(spec.layer, model.encoder_layers, strict=True):
        _self_attention(layer_spec.self_attention, layer.attn_block, layer.self_attn)
        _ffn(layer_spec.ffn, layer.ffn_block, layer.ffn)
    if pre_norm:                                    # post-norm stacks end with their last sublayer's norm
        _norm(spec.layer_norm, model.encoder_norm)


def _decoder(spec, model, max_positions: int, pre_norm: bool) -> None:
    spec.embeddings.weight = _np(model.tgt_embed.weight)
    spec.position_encodings.encodings = _positions(model.tgt_pos, max_positions)
    for layer_spec, layer in zip(spec.layer, model.decoder_layers, strict=True):
        _self_attention(layer_spec.self_attention, layer.self_block, layer.self_attn)
        cross = layer_spec.attention
        _norm(cross.layer_norm, layer.cross_block.norm)
        _linear(cross.linear[0], layer.cross_attn.q_proj)
        _linear(cross.linear[1], layer.cross_attn.kv_proj)
        _linear(cross.linear[2], layer.cross_attn.out_proj)
        _ffn(layer_spec.ffn, layer.ffn_block, layer.ffn)
    if pre_norm:
        _norm(spec.layer_norm, model.decoder_norm)
    spec.projection.weight = _np(model.output.weight)
    if model.output.bias is not None:                   # model.output_bias (Marian's final logits bias)
        spec.projection.bias = _np(model.output.bias)


def transformer_spec(model, max_positions: int):
    """A CTranslate2 ``TransformerSpec`` holding ``model``'s weights, with position codes for ``max_positions``
    places on each side (a sentence-level model, or a concatenation model whose windows are plain sequences).

    Vocabularies are not registered here: the caller adds the token strings of its ids.
    """
    from ctranslate2.specs import common_spec
    from ctranslate2.specs import transformer_spec as ts

    cfg = model.cfg
    pre_norm = bool(cfg.normalize_before)
    activation = {"relu": common_spec.Activation.RELU, "gelu": common_spec.Activation.GELU,
                  "swish": common_spec.Activation.SWISH}[cfg.activation]
    spec = ts.TransformerSpec.from_config((cfg.encoder_layers, cfg.decoder_layers), cfg.heads, pre_norm=pre_norm,
                                          activation=activation)
    if not cfg.scale_embeddings:                        # model.scale_embeddings false (Marian's scale_embedding)
        spec.encoder.scale_embeddings = spec.decoder.scale_embeddings = False
    spec.config.layer_norm_epsilon = model.encoder_layers[0].attn_block.norm.eps
    _encoder(spec.encoder, model, max_positions, pre_norm)
    _decoder(spec.decoder, model, max_positions, pre_norm)
    return spec
