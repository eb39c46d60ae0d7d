"""Peer implementations for the speed benchmarks: same dims, same vocabulary, random weights.

Only the peers' *cost* matters here, never their outputs. Every peer offers the same four workloads:
``train_step(batch)`` (forward, label-smoothed cross-entropy, backward, Adam step), ``score(batch)``
(summed target log-probability per row), ``greedy(batch, new)`` and ``beam(batch, k, new)`` (exactly
``new`` generated tokens per row: ``</s>`` is banned until then, as the benchmarks force the length).

* :class:`TorchPeer` -- the plain reference: ``nn.Embedding`` (tied with the output projection, as
  ctxmt ties them for a joint vocabulary), sinusoidal positions, ``nn.Transformer(batch_first=True,
  norm_first=True)`` (pre-norm like ctxmt's default) and an output ``nn.Linear``. ``nn.Transformer``
  has no key/value cache, so its incremental decoding reruns the decoder over the whole prefix at every
  step (quadratic in the output length): that *is* this peer's real cost, not a handicap we added.
* :class:`HFPeer` -- Hugging Face ``transformers`` ``MarianMTModel`` from a ``MarianConfig`` with the
  same dims (relu, sinusoidal positions, scaled and tied embeddings; Marian is post-norm, which costs
  the same). Decoding is ``model.generate``; training is a forward with ``decoder_input_ids`` and the
  same label-smoothed loss, which is what HF's ``Trainer`` does with ``label_smoothing_factor`` (it takes
  the labels out of the inputs and smooths the logits itself). Only when ``transformers`` imports.

Dropout is off everywhere (ctxmt too): the figures compare the matrix work, not mask generation.
Every peer is built on the benchmark's device (``device``) and makes its own tensors on its input's device.
The CTranslate2 peer of the inference benchmarks runs on the CPU, or on CUDA where its build has CUDA (otherwise left
out with one line).
"""

from __future__ import annotations

import importlib.util
import math
import warnings

import torch
import torch.nn.functional as F
from bench_util import BOS, EOS, PAD, Dims
from peer_ct2 import ct2_peer
from torch import Tensor, nn

from ctxmt_cli.core.batch import Batch

LABEL_SMOOTHING = 0.1                 # ctxmt's recipe default, used by every implementation
ADAM = dict(lr=7e-4, betas=(0.9, 0.98), eps=1e-9)  # ctxmt's recipe defaults


def adam(parameters, device) -> torch.optim.Adam:
    """The peers' Adam: ctxmt's settings, fused on a GPU as ctxmt's trainer does (so the optimiser is no margin)."""
    return torch.optim.Adam(parameters, **ADAM, fused=torch.device(device).type == "cuda")


def smoothed_loss(logits: Tensor, target: Tensor) -> Tensor:
    """Label-smoothed cross-entropy per target token (padding ignored): the peers' training objective."""
    v = logits.size(-1)
    total = F.cross_entropy(logits.float().reshape(-1, v), target.reshape(-1), ignore_index=PAD,
                            label_smoothing=LABEL_SMOOTHING, reduction="sum")
    return total / (target != PAD).sum()


def gather_logprobs(logits: Tensor, target: Tensor) -> Tensor:
    """Summed log-probability of ``target`` (B, T) under ``logits`` (B, T, V), padding excluded: (B,)."""
    lp = torch.log_softmax(logits.float(), dim=-1).gather(2, target.unsqueeze(2)).squeeze(2)
    return (lp * (target != PAD)).sum(1)


def sinusoid_table(length: int, dim: int) -> Tensor:
    """Vaswani et al.'s fixed position codes (length, dim): sines in the first half, cosines in the second."""
    half = dim // 2
    freq = torch.exp(torch.arange(half, dtype=torch.float32) * -(math.log(10000.0) / max(half - 1, 1)))
    angles = torch.arange(length, dtype=torch.float32).unsqueeze(1) * freq.unsqueeze(0)
    return torch.cat([angles.sin(), angles.cos()], dim=1)


def _banned(lp: Tensor) -> Tensor:
    """Pad, ``<s>`` and ``</s>`` can never be chosen: the benchmarks force exactly N new tokens."""
    lp[:, [PAD, BOS, EOS]] = float("-inf")
    return lp


class TorchPeer(nn.Module):
    """``torch.nn.Transformer`` reference model with the four benchmark workloads (see the module docstring)."""

    name = "torch"

    def __init__(self, dims: Dims, seed: int = 0, device: str = "cpu"):
        super().__init__()
        torch.manual_seed(seed)
        self.scale = dims.d_model ** 0.5
        self.embed = nn.Embedding(dims.vocab, dims.d_model, padding_idx=PAD)
        self.register_buffer("pe", sinusoid_table(dims.max_positions, dims.d_model), persistent=False)
        with warnings.catch_warnings():       # pre-norm disables the nested-tensor path; it says so once
            warnings.simplefilter("ignore", UserWarning)
            self.core = nn.Transformer(dims.d_model, dims.heads, dims.enc_layers, dims.dec_layers, dims.ffn,
                                       dropout=0.0, batch_first=True, norm_first=True)
        self.out = nn.Linear(dims.d_model, dims.vocab, bias=False)
        self.out.weight = self.embed.weight
        self.to(device)                       # before the optimiser: its state is made where the weights are
        self.optimizer = adam(self.parameters(), device)

    def embed_tokens(self, tokens: Tensor) -> Tensor:
        return self.embed(tokens) * self.scale + self.pe[: tokens.size(1)]

    def encode(self, src: Tensor) -> Tensor:
        return self.core.encoder(self.embed_tokens(src), src_key_padding_mask=src == PAD)

    def decode(self, tokens: Tensor, memory: Tensor, src_pad: Tensor) -> Tensor:
        """Decoder over the whole prefix ``tokens`` (B, T) with a causal mask: hidden states (B, T, C)."""
        t = tokens.size(1)                    # bool like the padding masks (mixed kinds are deprecated)
        causal = torch.ones(t, t, dtype=torch.bool, device=tokens.device).triu(1)
        return self.core.decoder(self.embed_tokens(tokens), memory, tgt_mask=causal, tgt_is_causal=True,
                                 tgt_key_padding_mask=tokens == PAD, memory_key_padding_mask=src_pad)

    def logits(self, batch: Batch) -> Tensor:
        return self.out(self.decode(batch.tgt_in, self.encode(batch.src), batch.src == PAD))

    def train_step(self, batch: Batch) -> None:
        self.train()
        smoothed_loss(self.logits(batch), batch.tgt_out).backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    @torch.inference_mode()
    def score(self, batch: Batch) -> Tensor:
        self.eval()
        return gather_logprobs(self.logits(batch), batch.tgt_out)

    @torch.inference_mode()
    def greedy(self, batch: Batch, new: int) -> Tensor:
        """Argmax decoding of ``new`` tokens; each step reruns the decoder over the prefix (no cache exists)."""
        return self.beam(batch, 1, new)

    @torch.inference_mode()
    def beam(self, batch: Batch, k: int, new: int) -> Tensor:
        """Beam search for exactly ``new`` tokens: nothing can finish early, so no finished-hypothesis bookkeeping.

        Beams are adjacent rows; each step reruns the decoder over every beam's whole prefix.
        """
        self.eval()
        b, device = batch.src.size(0), batch.src.device
        src_pad = (batch.src == PAD).repeat_interleave(k, 0)
        memory = self.encode(batch.src).repeat_interleave(k, 0)            # (B*k, S, C)
        tokens = torch.full((b * k, 1), BOS, dtype=torch.long, device=device)
        scores = torch.zeros(b, k, device=device)
        scores[:, 1:] = float("-inf")                                      # step 1: only beam 0 may extend <s>
        base = (torch.arange(b, device=device) * k).unsqueeze(1)
        for _ in range(new):
            hidden = self.decode(tokens, memory, src_pad)[:, -1]           # only the last position is used
            lp = _banned(torch.log_softmax(self.out(hidden).float(), dim=-1))  # (B*k, V)
            v = lp.size(1)
            top_s, top_i = (scores.unsqueeze(2) + lp.view(b, k, v)).view(b, k * v).topk(k, dim=1)
            rows = (base + torch.div(top_i, v, rounding_mode="floor")).view(-1)
            tokens = torch.cat([tokens[rows], (top_i % v).view(-1, 1)], dim=1)
            scores = top_s
        return tokens.view(b, k, -1)[:, 0, 1:]


class HFPeer:
    """Hugging Face ``MarianMTModel`` with ctxmt's dims (see the module docstring)."""

    name = "hf"

    def __init__(self, dims: Dims, seed: int = 0, device: str = "cpu"):
        from transformers import MarianConfig, MarianMTModel

        config = MarianConfig(
            vocab_size=dims.vocab, decoder_vocab_size=dims.vocab, d_model=dims.d_model,
            encoder_layers=dims.enc_layers, decoder_layers=dims.dec_layers,
            encoder_attention_heads=dims.heads, decoder_attention_heads=dims.heads,
            encoder_ffn_dim=dims.ffn, decoder_ffn_dim=dims.ffn, max_position_embeddings=dims.max_positions,
            activation_function="relu", dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
            scale_embedding=True, pad_token_id=PAD, eos_token_id=EOS, decoder_start_token_id=BOS,
            forced_eos_token_id=None, share_encoder_decoder_embeddings=True, tie_word_embeddings=True,
        )
        torch.manual_seed(seed)
        self.model = MarianMTModel(config).to(device)
        self.optimizer = adam(self.model.parameters(), device)

    def describe(self) -> str:
        import transformers

        return f"transformers {transformers.__version__}, attention {self.model.config._attn_implementation}"

    def logits(self, batch: Batch) -> Tensor:
        return self.model(input_ids=batch.src, attention_mask=batch.src != PAD, decoder_input_ids=batch.tgt_in,
                          decoder_attention_mask=batch.tgt_in != PAD, use_cache=False).logits

    def train_step(self, batch: Batch) -> None:
        self.model.train()
        smoothed_loss(self.logits(batch), batch.tgt_out).backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    @torch.inference_mode()
    def score(self, batch: Batch) -> Tensor:
        self.model.eval()
        return gather_logprobs(self.logits(batch), batch.tgt_out)

    def greedy(self, batch: Batch, new: int) -> Tensor:
        return self.beam(batch, 1, new)

    @torch.inference_mode()
    def beam(self, batch: Batch, k: int, new: int) -> Tensor:
        """``generate`` with min = max new tokens, so every row gets exactly ``new`` tokens."""
        self.model.eval()
        return self.model.generate(input_ids=batch.src, attention_mask=batch.src != PAD, num_beams=k,
                                   do_sample=False, max_new_tokens=new, min_new_tokens=new)


def make_peers(dims: Dims, seed: int, say=print, inference_of=None, threads: int = 2, device: str = "cpu") -> list:
    """The peers this environment can run on ``device``: the torch reference always, HF when ``transformers``
    imports.

    ``inference_of``: the ctxmt model of an inference benchmark; CTranslate2 then joins with its weights
    (when ``ctranslate2`` imports), running ``threads`` threads, on the CPU or the first CUDA device (left out
    elsewhere, one line).
    """
    peers: list = [TorchPeer(dims, seed, device), hf_peer(dims, seed, say, device)]
    kind = device.partition(":")[0]
    if inference_of is not None and kind not in ("cpu", "cuda"):
        say(f"note: ct2 peer skipped on {kind} (the benchmark's CTranslate2 peer runs on the CPU or CUDA)")
    elif inference_of is not None:
        peers.append(ct2_peer(inference_of, dims.vocab, dims.max_positions, threads, say, device=kind))
    return [peer for peer in peers if peer is not None]


def hf_peer(dims: Dims, seed: int, say=print, device: str = "cpu") -> HFPeer | None:
    """:class:`HFPeer` on ``device``, or None with one printed line when ``transformers`` is not installed."""
    if importlib.util.find_spec("transformers") is None:
        say("note: peer hf skipped: transformers is not installed (pip install -e '.[bench]')")
        return None
    peer = HFPeer(dims, seed, device)
    say(f"peer hf: MarianMTModel ({peer.describe()})")
    return peer
