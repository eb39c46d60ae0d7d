"""CTranslate2 peer for the inference benchmarks (score, decode): ctxmt's own weights in CTranslate2's engine.

CTranslate2 has no random-init path and its Marian converter needs a real vocabulary, so the peer is
built from a :class:`~ctranslate2.specs.TransformerSpec` filled with the weights of the very ctxmt model
it is timed against (pre-norm, ReLU, sinusoidal positions, tied embeddings, LayerNorm eps 1e-5). The
same weights make the comparison checkable: greedy search of both engines must return the same tokens
(``tests/unit/test_bench_peers.py``). Tokens are the strings ``w<ID>`` with ctxmt's special ids in place.
CTranslate2 runs float32 with ``intra_threads`` = the benchmark's thread count, one translator thread.
Only when ``ctranslate2`` imports (``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import importlib.util
import tempfile
from typing import Optional

import numpy as np
import torch
from bench_util import EOS, PAD
from torch import Tensor

from ctxmt_cli.core.batch import Batch

SPECIALS = ["<blank>", "<unk>", "<s>", "</s>", "<brk>"]     # ctxmt's ids 0..4 (PAD, UNK, BOS, EOS, BRK)
BANNED = [["<blank>"], ["<s>"]]                             # never generated, as in ctxmt's search


def _np(t: Tensor) -> np.ndarray:
    return t.detach().float().contiguous().numpy()


def _linear(spec, *layers) -> None:
    """Fill a CTranslate2 linear spec with ``layers`` stacked along the output axis (fused projections)."""
    spec.weight = _np(torch.cat([layer.weight for layer in layers]))
    spec.bias = _np(torch.cat([layer.bias for layer in layers]))


def _norm(spec, norm) -> None:
    spec.gamma, spec.beta = _np(norm.weight), _np(norm.bias)


def _self_attention(spec, block, attn) -> None:
    _norm(spec.layer_norm, block.norm)
    _linear(spec.linear[0], attn.q_proj, attn.k_proj, attn.v_proj)
    _linear(spec.linear[1], attn.out_proj)


def _ffn(spec, block, ffn) -> None:
    _norm(spec.layer_norm, block.norm)
    _linear(spec.linear_0, ffn.fc1)
    _linear(spec.linear_1, ffn.fc2)


def _positions(pos_module, length: int) -> np.ndarray:
    """The model's own position codes for positions 0..length-1 of a one-sentence window: (length, C)."""
    return _np(pos_module(torch.arange(length).unsqueeze(0), None)[0])


def transformer_spec(model, max_positions: int):
    """A CTranslate2 ``TransformerSpec`` holding ``model``'s weights (a pre-norm sentence-level ctxmt model)."""
    from ctranslate2.specs import transformer_spec as ts

    cfg = model.cfg
    if not cfg.normalize_before:
        raise ValueError("the CTranslate2 peer maps pre-norm models only")
    spec = ts.TransformerSpec.from_config((cfg.encoder_layers, cfg.decoder_layers), cfg.heads, pre_norm=True)
    spec.config.layer_norm_epsilon = model.encoder_norm.eps
    enc, dec = spec.encoder, spec.decoder
    enc.embeddings[0].weight = _np(model.src_embed.weight)
    enc.position_encodings.encodings = _positions(model.src_pos, max_positions)
    for layer_spec, layer in zip(enc.layer, model.encoder_layers):
        _self_attention(layer_spec.self_attention, layer.attn_block, layer.self_attn)
        _ffn(layer_spec.ffn, layer.ffn_block, layer.ffn)
    _norm(enc.layer_norm, model.encoder_norm)
    dec.embeddings.weight = _np(model.tgt_embed.weight)
    dec.position_encodings.encodings = _positions(model.tgt_pos, max_positions)
    for layer_spec, layer in zip(dec.layer, model.decoder_layers):
        _self_attention(layer_spec.self_attention, layer.self_block, layer.self_attn)
        cross = layer_spec.attention
        _norm(cross.layer_norm, layer.cross_block.norm)
        _linear(cross.linear[0], layer.cross_attn.q_proj)
        _linear(cross.linear[1], layer.cross_attn.k_proj, layer.cross_attn.v_proj)
        _linear(cross.linear[2], layer.cross_attn.out_proj)
        _ffn(layer_spec.ffn, layer.ffn_block, layer.ffn)
    _norm(dec.layer_norm, model.decoder_norm)
    dec.projection.weight = _np(model.output.weight)
    return spec


class CT2Peer:
    """CTranslate2 ``Translator`` over a ctxmt model's weights (see the module docstring); inference only."""

    name = "ct2"

    def __init__(self, model, vocab: int, max_positions: int, threads: int):
        import ctranslate2

        spec = transformer_spec(model, max_positions)
        self.tokens = SPECIALS + [f"w{i}" for i in range(len(SPECIALS), vocab)]
        spec.register_source_vocabulary(self.tokens)
        spec.register_target_vocabulary(self.tokens)
        spec.validate()
        spec.optimize(quantization="float32")
        self._dir = tempfile.TemporaryDirectory(prefix="ctxmt-ct2-")
        spec.save(self._dir.name)
        self.translator = ctranslate2.Translator(self._dir.name, device="cpu", compute_type="float32",
                                                 intra_threads=threads, inter_threads=1)
        self.version = ctranslate2.__version__

    def describe(self) -> str:
        return f"ctranslate2 {self.version}, float32"

    def _strings(self, rows: Tensor, drop_eos: bool = False) -> list[list[str]]:
        out = []
        for row in rows.tolist():
            ids = [i for i in row if i != PAD]
            if drop_eos and ids and ids[-1] == EOS:
                ids = ids[:-1]
            out.append([self.tokens[i] for i in ids])
        return out

    def score(self, batch: Batch) -> Tensor:
        """Summed log-probability of every target row; CTranslate2 appends ``</s>`` to the target itself."""
        results = self.translator.score_batch(self._strings(batch.src), self._strings(batch.tgt_out, drop_eos=True))
        return torch.tensor([sum(r.log_probs) for r in results])

    def greedy(self, batch: Batch, new: int) -> Tensor:
        return self.beam(batch, 1, new)

    def beam(self, batch: Batch, k: int, new: int) -> Tensor:
        """``translate_batch`` with min = max decoding length: every row gets exactly ``new`` tokens."""
        results = self.translator.translate_batch(
            self._strings(batch.src), beam_size=k, min_decoding_length=new, max_decoding_length=new,
            suppress_sequences=BANNED)
        index = {token: i for i, token in enumerate(self.tokens)}
        return torch.tensor([[index[t] for t in r.hypotheses[0]] for r in results])


def ct2_peer(model, vocab: int, max_positions: int, threads: int, say=print) -> Optional[CT2Peer]:
    """:class:`CT2Peer`, or None with one printed line when ``ctranslate2`` is not installed."""
    if importlib.util.find_spec("ctranslate2") is None:
        say("note: peer ct2 skipped: ctranslate2 is not installed (pip install -e '.[bench]')")
        return None
    peer = CT2Peer(model, vocab, max_positions, threads)
    say(f"peer ct2: Translator ({peer.describe()})")
    return peer
