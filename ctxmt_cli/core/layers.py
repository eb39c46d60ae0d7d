"""Transformer building blocks: multi-head attention (via SDPA), feed-forward, encoder/decoder layers."""

from __future__ import annotations

import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ctxmt_cli.core.linear import Linear

#: queries per row up to which CPU inference (no autograd) uses :meth:`MultiheadAttention._small_query`
#: (on GPUs SDPA's kernels serve decoding steps well)
SMALL_QUERY = 8


class MultiheadAttention(nn.Module):
    """Multi-head attention on ``F.scaled_dot_product_attention``.

    Keys/values can be projected once (:meth:`project_kv`) and reused: the
    decoder caches them for self-attention and computes cross-attention keys
    once per sentence. ``mask`` is bool, broadcastable to (B, H, Tq, Tk),
    True = may attend.
    """

    def __init__(self, d_model: int, heads: int, dropout: float = 0.0):
        super().__init__()
        self.heads, self.head_dim, self.dropout = heads, d_model // heads, dropout
        self.q_proj = Linear(d_model, d_model)
        self.k_proj = Linear(d_model, d_model)
        self.v_proj = Linear(d_model, d_model)
        self.out_proj = Linear(d_model, d_model)

    def _split(self, x: Tensor) -> Tensor:
        b, t, _ = x.shape
        return x.view(b, t, self.heads, self.head_dim).transpose(1, 2)  # (B, H, T, D)

    def project_kv(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """Keys and values of ``x`` (B, T, C) as (B, H, T, D) each."""
        return self._split(self.k_proj(x)), self._split(self.v_proj(x))

    def attend(
        self, x: Tensor, k: Tensor, v: Tensor, mask: Optional[Tensor] = None,
        causal: bool = False, need_weights: bool = False,
    ) -> tuple[Tensor, Optional[Tensor]]:
        """Queries from ``x`` (B, Tq, C) attend to ``k``/``v``; returns (B, Tq, C) and optional (B, H, Tq, Tk)."""
        q = self._split(self.q_proj(x))                                     # (B, H, Tq, D)
        p = self.dropout if self.training else 0.0
        if need_weights:
            out, weights = self._explicit(q, k, v, mask, causal, p)
        elif q.size(2) <= SMALL_QUERY and not causal and p == 0.0 and q.device.type == "cpu" and not torch.is_grad_enabled():
            out, weights = self._small_query(q, k, v, mask), None
        else:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p, is_causal=causal)
            weights = None
        b, h, t, d = out.shape
        return self.out_proj(out.transpose(1, 2).reshape(b, t, h * d)), weights

    def attend_folded(self, x: Tensor, k: Tensor, v: Tensor, mask: Tensor, fold: int = 1,
                      need_weights: bool = False) -> tuple[Tensor, Optional[Tensor]]:
        """Like :meth:`attend`, where each group of ``fold`` adjacent rows of ``x`` (B, T, C) shares one
        key/value row (B/fold, H, M, D) and mask row (B/fold, 1, 1, M): the group's queries form one block."""
        b, t, c = x.shape
        out, weights = self.attend(x.reshape(b // fold, fold * t, c), k, v, mask, need_weights=need_weights)
        return out.reshape(b, t, c), weights                                # (B, T, C)

    def _small_query(self, q: Tensor, k: Tensor, v: Tensor, mask: Optional[Tensor]) -> Tensor:
        """Attention of a few queries (a CPU decoding step): two batched matmuls beat SDPA's fused CPU kernel there.

        Same result as SDPA, including its zero output for a query whose keys are all masked.
        """
        scores = torch.matmul(q, k.transpose(-1, -2)).mul_(self.head_dim ** -0.5)  # (B, H, Tq, Tk)
        if mask is not None:
            scores.masked_fill_(~mask, float("-inf"))
        weights = torch.nan_to_num_(scores.softmax(-1), nan=0.0)           # all-masked rows: 0/0 -> 0
        return torch.matmul(weights, v)                                     # (B, H, Tq, D)

    def _explicit(self, q, k, v, mask, causal, p):
        # The same computation as SDPA, keeping the weights for analysis.
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim)        # (B, H, Tq, Tk)
        if causal:
            tq, tk = scores.shape[-2:]
            mask = torch.ones(tq, tk, dtype=torch.bool, device=q.device).tril(tk - tq)
        if mask is not None:
            scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
        weights = scores.softmax(-1)
        return F.dropout(weights, p) @ v, weights


class FeedForward(nn.Module):
    """Position-wise ReLU feed-forward block."""

    def __init__(self, d_model: int, ffn_dim: int, activation_dropout: float):
        super().__init__()
        self.fc1, self.fc2 = Linear(d_model, ffn_dim), Linear(ffn_dim, d_model)
        self.dropout = nn.Dropout(activation_dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(self.dropout(F.relu(self.fc1(x))))


class Sublayer(nn.Module):
    """Residual wrapper with pre- or post-LayerNorm and dropout."""

    def __init__(self, d_model: int, dropout: float, normalize_before: bool):
        super().__init__()
        self.norm, self.dropout, self.pre = nn.LayerNorm(d_model), nn.Dropout(dropout), normalize_before

    def forward(self, x: Tensor, fn) -> tuple[Tensor, Optional[Tensor]]:
        out, extra = fn(self.norm(x) if self.pre else x)
        x = x + self.dropout(out)
        return (x if self.pre else self.norm(x)), extra


class EncoderLayer(nn.Module):
    """Self-attention + feed-forward."""

    def __init__(self, d_model, heads, ffn_dim, dropout, attention_dropout, activation_dropout, normalize_before):
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, heads, attention_dropout)
        self.ffn = FeedForward(d_model, ffn_dim, activation_dropout)
        self.attn_block = Sublayer(d_model, dropout, normalize_before)
        self.ffn_block = Sublayer(d_model, dropout, normalize_before)

    def forward(self, x: Tensor, mask: Tensor, need_weights: bool = False) -> tuple[Tensor, Optional[Tensor]]:
        """``x`` (B, S, C); ``mask`` (B, 1, 1, S) bool."""
        def attn(h):
            k, v = self.self_attn.project_kv(h)
            return self.self_attn.attend(h, k, v, mask, need_weights=need_weights)

        x, weights = self.attn_block(x, attn)
        x, _ = self.ffn_block(x, lambda h: (self.ffn(h), None))
        return x, weights


class ContextAttention(nn.Module):
    """Attention from decoder states to a context memory, with the optional sigmoid gate of eq. 5 of
    "Sequence Shortening for Context-Aware Machine Translation" (2023).

    ``parallel`` places it beside cross-attention (one residual branch each,
    same input); otherwise it is its own sub-layer after cross-attention.
    ``mix`` (parallel only): how the branch joins cross-attention, ``mix(cross, context, on)`` -> (B, T, C), where
    ``on`` (B,) says which rows have any context; None: the two are added (caching). With a ``mix`` a row whose
    memory is empty (mask all False) is allowed: it attends to its padding to stay finite and ``mix`` is told it
    has none (HanoiT's gate then gives the cross-attention output alone).
    """

    def __init__(self, d_model: int, heads: int, attention_dropout: float, gate: bool, parallel: bool,
                 mix: Optional[nn.Module] = None):
        super().__init__()
        self.attn = MultiheadAttention(d_model, heads, attention_dropout)
        self.gate = nn.Linear(d_model, 1) if gate else None
        self.parallel = parallel
        self.mix = mix

    def forward(self, h: Tensor, kv: tuple[Tensor, Tensor], mask: Tensor, fold: int = 1, need_weights: bool = False):
        """``h`` (B, T, C) attends to context keys/values (B/fold, H, Mc, D) under ``mask`` (B/fold, 1, 1, Mc).

        ``fold`` > 1: each group of ``fold`` adjacent rows (the beams of one document) shares one context row;
        their queries are attended as one block instead of copying the context per beam.
        """
        if self.mix is not None:                                                   # an empty memory: finite, unused
            mask = mask | ~mask.any(-1, keepdim=True)
        out, weights = self.attn.attend_folded(h, *kv, mask, fold, need_weights)     # (B, T, C)
        if self.gate is not None:
            out = torch.sigmoid(self.gate(out)) * out                              # eq. 5: lambda_i * h_i
        return out, weights

    def join(self, cross: Tensor, context: Tensor, mask: Tensor, fold: int = 1) -> Tensor:
        """The parallel branch joined to the cross-attention output, both (B, T, C); ``mask`` (B/fold, 1, 1, Mc)."""
        if self.mix is None:
            return cross + context
        on = mask.reshape(mask.size(0), -1).any(1).repeat_interleave(fold)         # (B,) rows with a memory
        return self.mix(cross, context, on)


class DecoderLayer(nn.Module):
    """Causal self-attention (with an optional key/value cache) + cross-attention [+ context attention] + feed-forward."""

    def __init__(self, d_model, heads, ffn_dim, dropout, attention_dropout, activation_dropout, normalize_before,
                 context: Optional[ContextAttention] = None):
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, heads, attention_dropout)
        self.cross_attn = MultiheadAttention(d_model, heads, attention_dropout)
        self.ffn = FeedForward(d_model, ffn_dim, activation_dropout)
        self.self_block = Sublayer(d_model, dropout, normalize_before)
        self.cross_block = Sublayer(d_model, dropout, normalize_before)
        self.ffn_block = Sublayer(d_model, dropout, normalize_before)
        self.context = context
        self.context_block = Sublayer(d_model, dropout, normalize_before) if context is not None and not context.parallel else None

    def forward(
        self, x: Tensor, cross: tuple, past: Optional[tuple[Tensor, Tensor]] = None,
        self_mask: Optional[Tensor] = None, need_weights: bool = False, context: Optional[tuple] = None,
    ) -> tuple[Tensor, tuple[Tensor, Tensor], dict]:
        """One decoder layer.

        Without ``past`` the self-attention is causal over ``x`` (B, T, C). With
        ``past`` (cached keys/values) ``x`` holds new positions only and
        ``self_mask`` (B, 1, Tq, Tpast+Tq) says which keys each query may see.
        ``cross`` = (encoder keys/values (G, H, S, D), mask (G, 1, 1, S), fold) and, when the layer has
        context attention, ``context`` = (context keys/values, mask (G, 1, 1, Mc), fold): groups of
        ``fold`` adjacent rows share one key/value row (see :meth:`MultiheadAttention.attend_folded`).
        Returns the output, this layer's full keys/values, and attention weights.
        """
        kv: dict = {}

        def self_attention(h):
            k, v = self.self_attn.project_kv(h)                           # (B, H, Tq, D)
            if past is not None:
                k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)
            kv["self"] = (k, v)
            causal = past is None
            return self.self_attn.attend(h, k, v, None if causal else self_mask, causal, need_weights)

        weights = {"context": None}

        def cross_attention(h):
            (k, v), mask, fold = cross
            out, w = self.cross_attn.attend_folded(h, k, v, mask, fold, need_weights)
            if self.context is not None and self.context.parallel:          # both branches read the same input
                ctx, weights["context"] = self.context(h, *context, need_weights=need_weights)
                out = self.context.join(out, ctx, context[1], context[2])
            return out, w

        x, self_w = self.self_block(x, self_attention)
        x, cross_w = self.cross_block(x, cross_attention)
        if self.context_block is not None:
            x, weights["context"] = self.context_block(x, lambda h: self.context(h, *context, need_weights=need_weights))
        x, _ = self.ffn_block(x, lambda h: (self.ffn(h), None))
        return x, kv["self"], {"self": self_w, "cross": cross_w, **weights}
