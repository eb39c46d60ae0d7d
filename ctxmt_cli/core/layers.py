"""Transformer building blocks: multi-head attention (via SDPA), feed-forward, encoder/decoder layers."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ctxmt_cli.core.batch import Fold
from ctxmt_cli.core.linear import Linear


def _autocast_probes():
    """``is_autocast_enabled(device)`` / ``get_autocast_dtype(device)`` on every supported PyTorch (2.4 added them;
    before, only CPU and CUDA had a probe, and another device counts as without autocast)."""
    if hasattr(torch, "get_autocast_dtype"):
        return torch.is_autocast_enabled, torch.get_autocast_dtype
    old = {"cpu": (torch.is_autocast_cpu_enabled, torch.get_autocast_cpu_dtype),
           "cuda": (torch.is_autocast_enabled, torch.get_autocast_gpu_dtype)}
    return (lambda kind: kind in old and old[kind][0]()), (lambda kind: old[kind][1]())


_autocast_enabled, _autocast_dtype = _autocast_probes()

#: queries per row up to which CPU inference (no autograd) uses :meth:`MultiheadAttention._small_query`
#: (on GPUs SDPA's kernels serve decoding steps well)
SMALL_QUERY = 8


class MultiheadAttention(nn.Module):
    """Multi-head attention on ``F.scaled_dot_product_attention``.

    ``self_attention``: queries, keys and values come from one sequence and are projected by one matmul
    (``qkv_proj``, C -> 3C; :meth:`self_attend`). Otherwise queries (``q_proj``) attend to another sequence
    whose keys and values are projected together (``kv_proj``, C -> 2C) once (:meth:`project_kv`) and reused:
    the decoder computes cross-attention keys once per sentence. Checkpoints written with separate
    ``q_proj``/``k_proj``/``v_proj`` load unchanged (:func:`fuse_separate_projections`).
    ``mask``: bool, broadcastable to (B, H, Tq, Tk), True = may attend; or the same mask in additive form
    (0 / -inf in the queries' dtype, :func:`additive_mask`), which SDPA takes without converting it.
    """

    def __init__(self, d_model: int, heads: int, dropout: float = 0.0, self_attention: bool = False):
        super().__init__()
        self.heads, self.head_dim, self.dropout = heads, d_model // heads, dropout
        self.self_attention = self_attention
        if self_attention:
            self.qkv_proj = Linear(d_model, 3 * d_model, blocks=3)
        else:
            self.q_proj = Linear(d_model, d_model)
            self.kv_proj = Linear(d_model, 2 * d_model, blocks=2)
        self.out_proj = Linear(d_model, d_model)

    def _split(self, x: Tensor, n: int) -> tuple[Tensor, ...]:
        """``x`` (B, T, n*C) as ``n`` tensors (B, H, T, D): views, no copy."""
        b, t, _ = x.shape
        if n == 1:
            return (x.view(b, t, self.heads, self.head_dim).transpose(1, 2),)
        # unbind the (B, T, n, H, D) view on its own axis: its backward stacks the n gradients straight into the
        # projection's (B, T, n*C) layout (a permute first would need one more copy there)
        return tuple(y.transpose(1, 2) for y in x.view(b, t, n, self.heads, self.head_dim).unbind(2))

    def project_kv(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """Keys and values of ``x`` (B, T, C) as (B, H, T, D) each (attention to another sequence)."""
        k, v = self._split(self.kv_proj(x), 2)
        return k, v

    def self_attend(
        self, x: Tensor, past: tuple[Tensor, Tensor] | None = None, mask: Tensor | None = None,
        causal: bool = False, need_weights: bool = False, shared: tuple | None = None,
    ) -> tuple[Tensor, Tensor | None, tuple[Tensor, Tensor]]:
        """Self-attention of ``x`` (B, T, C) after the cached keys/values ``past`` (B, H, Tp, D) each, if any.

        ``shared``: keys/values before ``past`` that groups of rows share (a forced target prefix, identical for the
        beams of one sentence): ``((k, v) (G, H, P, D), additive mask (G, 1, 1, P), fold)`` (:class:`Fold`); the
        keys a row sees are then its group's P shared ones followed by its own, and ``mask`` (additive) covers its
        own. Returns the output (B, T, C), the optional weights (B, H, T, [P +] Tp + T) and the row's own keys/values
        (B, H, Tp + T, D): what the next step's ``past`` is.
        """
        q, k, v = self._split(self.qkv_proj(x), 3)                          # (B, H, T, D) each
        if past is not None:
            k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)
        if shared is None:
            out, weights = self._attend(q, k, v, mask, causal, need_weights)
        elif self._small_step(q, causal, need_weights):
            out, weights = self._project(self._small_query_shared(q, k, v, mask, shared)), None
        else:                                           # weights asked for, or not a CPU step: the plain layout
            out, weights = self._attend(q, *joined_keys(shared, k, v, mask), False, need_weights)
        return out, weights, (k, v)

    def attend(
        self, x: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None,
        causal: bool = False, need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """Queries from ``x`` (B, Tq, C) attend to ``k``/``v``; returns (B, Tq, C) and optional (B, H, Tq, Tk)."""
        (q,) = self._split(self.q_proj(x), 1)                               # (B, H, Tq, D)
        return self._attend(q, k, v, mask, causal, need_weights)

    def _attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, causal: bool,
                need_weights: bool) -> tuple[Tensor, Tensor | None]:
        """Attention of projected heads (B, H, Tq, D) to (B, H, Tk, D), through the output projection."""
        out, weights = self._heads(q, k, v, mask, causal, need_weights)
        return self._project(out), weights

    def _heads(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, causal: bool,
               need_weights: bool) -> tuple[Tensor, Tensor | None]:
        """Attention of heads (B, H, Tq, D) to (B, H, Tk, D): the output heads (B, H, Tq, D) and the optional weights;
        explicit where the weights are kept, two matmuls for a CPU decoding step, SDPA otherwise."""
        p = self.dropout if self.training else 0.0
        if need_weights:
            return self._explicit(q, k, v, mask, causal, p)
        if self._small_step(q, causal, need_weights):
            return self._small_query(q, k, v, mask), None
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p, is_causal=causal), None

    def _small_step(self, q: Tensor, causal: bool, need_weights: bool) -> bool:
        """Whether queries ``q`` (B, H, Tq, D) are a CPU decoding step: a few queries, inference, no weights kept."""
        p = self.dropout if self.training else 0.0
        return (q.size(2) <= SMALL_QUERY and not causal and not need_weights and p == 0.0 and q.device.type == "cpu"
                and not torch.is_grad_enabled())

    def _project(self, out: Tensor) -> Tensor:
        """Heads (B, H, T, D) joined and through the output projection: (B, T, C)."""
        b, h, t, d = out.shape
        return self.out_proj(out.transpose(1, 2).reshape(b, t, h * d))

    def attend_folded(self, x: Tensor, k: Tensor, v: Tensor, mask: Tensor, fold: Fold = Fold(),
                      need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        """Like :meth:`attend`, where the rows of ``x`` (B, T, C) sit in ``fold.size`` slots per key/value row
        (G, H, M, D) and mask row (G, 1, 1, M) (:class:`~ctxmt_cli.core.batch.Fold`): the queries of one row's
        slots form one block, so the keys are never copied per row; weights (G, H, size*T, M)."""
        g = k.size(0)
        (q,) = self._split(self.q_proj(x), 1)                               # (B, H, T, D)
        q = fold.fold(q, g)                                                 # (G, H, f*T, D)
        if self._small_step(q, False, need_weights):                       # each block of rows reads its own keys
            out, weights = torch.cat([self._small_query(q[a:e], k[a:e, :, :w], v[a:e, :, :w], mask[a:e, ..., :w])
                                      for a, e, w in fold.blocks(g, k.size(2))]), None
        else:
            out, weights = self._heads(q, k, v, mask, False, need_weights)
        return self._project(fold.unfold(out, x.size(1))), weights          # (B, T, C)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        fuse_separate_projections(state_dict, prefix, self.self_attention)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def _small_query(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
        """Attention of a few queries (a CPU decoding step): two batched matmuls beat SDPA's fused CPU kernel there.

        Same result as SDPA, including its zero output for a query whose keys are all masked.
        """
        scores = torch.matmul(q, k.transpose(-1, -2)).mul_(self.head_dim ** -0.5)  # (B, H, Tq, Tk)
        if mask is not None and mask.dtype == torch.bool:
            scores.masked_fill_(~mask, float("-inf"))
        elif mask is not None:
            scores.add_(mask)                                               # additive: 0 or -inf
        weights = torch.nan_to_num_(scores.softmax(-1), nan=0.0)           # all-masked rows: 0/0 -> 0
        return torch.matmul(weights, v)                                     # (B, H, Tq, D)

    def _small_query_shared(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, shared: tuple) -> Tensor:
        """:meth:`_small_query` over a group's shared keys followed by each row's own (:meth:`self_attend`), with
        one softmax over both, computed where a group's rows' queries are folded into one block (:class:`Fold`):
        the shared keys are read once per group and never copied per row, and of the scores only the rows' own few
        move between the two layouts, never the P shared ones. No NaN guard: a query always sees its own key."""
        (k_shared, v_shared), shared_mask, fold = shared                    # (G, H, P, D), (G, 1, 1, P)
        _, h, tq, d = q.shape
        g, f, n, tk = k_shared.size(0), fold.size, k_shared.size(2), k.size(2)
        q = q * d ** -0.5
        own = torch.matmul(q, k.transpose(-1, -2))                          # (B, H, Tq, Tk)
        if mask is not None:
            own = own.masked_fill_(~mask, float("-inf")) if mask.dtype == torch.bool else own.add_(mask)
        scores, q = q.new_empty(g, h, f * tq, n + tk), fold.fold(q, g)     # (G, H, f*Tq, P+Tk), (G, H, f*Tq, D)
        blocks = fold.blocks(g, n)                                         # each block of groups reads its own keys
        for a, e, w in blocks:
            scores[a:e, ..., :w] = torch.matmul(q[a:e], k_shared[a:e, :, :w].transpose(-1, -2)).add_(
                shared_mask[a:e, ..., :w])
            scores[a:e, ..., w:n] = float("-inf")                          # keys beyond the block's width
        scores[..., n:] = fold.fold(own, g)
        weights = scores.softmax(-1)                                       # (G, H, f*Tq, P+Tk)
        out = torch.cat([torch.matmul(weights[a:e, ..., :w], v_shared[a:e, :, :w]) for a, e, w in blocks])
        return fold.unfold(out, tq) + torch.matmul(fold.unfold(weights[..., n:], tq), v)  # (B, H, Tq, D)

    def _explicit(self, q, k, v, mask, causal, p):
        # The same computation as SDPA, keeping the weights for analysis.
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim)        # (B, H, Tq, Tk)
        if causal:
            tq, tk = scores.shape[-2:]
            mask = torch.ones(tq, tk, dtype=torch.bool, device=q.device).tril(tk - tq)
        if mask is not None and mask.dtype != torch.bool:
            mask = mask == 0                                                # additive form back to bool
        if mask is not None:
            scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
        weights = scores.softmax(-1)
        return F.dropout(weights, p) @ v, weights


def joined_keys(shared: tuple, k: Tensor, v: Tensor, mask: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
    """A group's shared keys/values copied to each of its rows and put before the row's own ``k``/``v``
    (B, H, T, D), with the masks joined likewise (additive; ``mask`` None: every own key visible): the layout
    :meth:`MultiheadAttention.self_attend` reads without ``shared``."""
    (k_shared, v_shared), shared_mask, fold = shared

    def rows(t: Tensor) -> Tensor:                                                  # (G, ...) -> (B, ...)
        return fold.gather(t.repeat_interleave(fold.size, dim=0))

    if mask is None:
        mask = torch.zeros((k.size(0), 1, 1, k.size(2)), dtype=shared_mask.dtype, device=k.device)
    elif mask.dtype == torch.bool:
        mask = additive_mask(mask, shared_mask.dtype)
    before = rows(shared_mask).expand(-1, -1, mask.size(2), -1)                    # (B, 1, Tq, P)
    return (torch.cat([rows(k_shared), k], 2), torch.cat([rows(v_shared), v], 2),  # (B, H, P+T, D)
            torch.cat([before, mask], -1))


def additive_mask(keep: Tensor, dtype: torch.dtype) -> Tensor:
    """The bool mask ``keep`` (True = may attend) as SDPA's additive form: 0 where True, -inf where False, in
    ``dtype`` (the queries' dtype). SDPA makes exactly this of a bool mask on every call; made once per forward
    pass, every layer passes it through without conversion."""
    return torch.zeros(keep.shape, dtype=dtype, device=keep.device).masked_fill_(~keep, float("-inf"))


def compute_dtype(x: Tensor) -> torch.dtype:
    """The dtype the projections of ``x`` come out in: autocast's where it is on for ``x``'s device, else ``x``'s."""
    kind = x.device.type
    try:
        enabled = _autocast_enabled(kind)
    except RuntimeError:                 # a device type autocast does not know (``meta``): never under autocast
        return x.dtype
    return _autocast_dtype(kind) if enabled else x.dtype


def fuse_separate_projections(state: dict, prefix: str, self_attention: bool) -> None:
    """Rewrite, in ``state`` (a state dict, changed in place), the separate ``q_proj``/``k_proj``/``v_proj`` of the
    attention module at ``prefix`` (the layout before fused projections) as the fused ``qkv_proj`` (self-attention)
    or ``q_proj`` + ``kv_proj``: the same numbers stacked along the output axis, so the model computes the same."""
    names = ("q", "k", "v") if self_attention else ("k", "v")
    fused = "qkv_proj" if self_attention else "kv_proj"
    for kind in ("weight", "bias"):
        parts = [f"{prefix}{name}_proj.{kind}" for name in names]
        if f"{prefix}{fused}.{kind}" not in state and all(p in state for p in parts) and \
                len({tuple(state[p].shape[1:]) for p in parts}) == 1:        # else the load reports what is wrong
            state[f"{prefix}{fused}.{kind}"] = torch.cat([state.pop(p) for p in parts])   # (n*C, ...)


def fuse_model_state(model: nn.Module, state: dict) -> dict:
    """``state`` (changed in place, and returned) with every attention module of ``model`` in the fused layout
    (:func:`fuse_separate_projections`): what ``model.load_state_dict`` does on its own, for checks that compare
    a checkpoint's tensors with the model's before loading it."""
    for name, module in model.named_modules():
        if isinstance(module, MultiheadAttention):
            fuse_separate_projections(state, f"{name}." if name else "", module.self_attention)
    return state


class FeedForward(nn.Module):
    """Position-wise feed-forward block; ``activation``: relu (Vaswani et al.), gelu, or swish (SiLU, Marian's)."""

    def __init__(self, d_model: int, ffn_dim: int, activation_dropout: float, activation: str = "relu"):
        super().__init__()
        self.fc1, self.fc2 = Linear(d_model, ffn_dim), Linear(ffn_dim, d_model)
        self.dropout = nn.Dropout(activation_dropout)
        self.act = {"relu": F.relu, "gelu": F.gelu, "swish": F.silu}[activation]

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(self.dropout(self.act(self.fc1(x))))


class Sublayer(nn.Module):
    """Residual wrapper with pre- or post-LayerNorm and dropout."""

    def __init__(self, d_model: int, dropout: float, normalize_before: bool):
        super().__init__()
        self.norm, self.dropout, self.pre = nn.LayerNorm(d_model), nn.Dropout(dropout), normalize_before

    def forward(self, x: Tensor, fn) -> tuple[Tensor, Tensor | None]:
        out, extra = fn(self.norm(x) if self.pre else x)
        x = x + self.dropout(out)
        return (x if self.pre else self.norm(x)), extra


class EncoderLayer(nn.Module):
    """Self-attention + feed-forward."""

    def __init__(self, d_model, heads, ffn_dim, dropout, attention_dropout, activation_dropout, normalize_before,
                 activation="relu"):
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, heads, attention_dropout, self_attention=True)
        self.ffn = FeedForward(d_model, ffn_dim, activation_dropout, activation)
        self.attn_block = Sublayer(d_model, dropout, normalize_before)
        self.ffn_block = Sublayer(d_model, dropout, normalize_before)

    def forward(self, x: Tensor, mask: Tensor, need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        """``x`` (B, S, C); ``mask`` (B, 1, 1, S), bool or additive (see :class:`MultiheadAttention`), or None."""

        def attn(h):
            out, weights, _ = self.self_attn.self_attend(h, mask=mask, need_weights=need_weights)
            return out, weights

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
                 mix: nn.Module | None = None):
        super().__init__()
        self.attn = MultiheadAttention(d_model, heads, attention_dropout)
        self.gate = nn.Linear(d_model, 1) if gate else None
        self.parallel = parallel
        self.mix = mix

    def forward(self, h: Tensor, kv: tuple[Tensor, Tensor], mask: Tensor, fold: Fold = Fold(),
                need_weights: bool = False):
        """``h`` (B, T, C) attends to context keys/values (G, H, Mc, D) under ``mask`` (G, 1, 1, Mc).

        ``fold``: how the rows sit on the context rows (the beams of one document share one context row; their
        queries are attended as one block instead of copying the context per beam, :class:`Fold`).
        """
        if self.mix is not None:                                                   # an empty memory: finite, unused
            mask = mask | ~mask.any(-1, keepdim=True)
        out, weights = self.attn.attend_folded(h, *kv, mask, fold, need_weights)     # (B, T, C)
        if self.gate is not None:
            out = torch.sigmoid(self.gate(out)) * out                              # eq. 5: lambda_i * h_i
        return out, weights

    def join(self, cross: Tensor, context: Tensor, mask: Tensor, fold: Fold = Fold()) -> Tensor:
        """The parallel branch joined to the cross-attention output, both (B, T, C); ``mask`` (G, 1, 1, Mc)."""
        if self.mix is None:
            return cross + context
        on = fold.gather(mask.reshape(mask.size(0), -1).any(1).repeat_interleave(fold.size))  # (B,) rows with a memory
        return self.mix(cross, context, on)


class DecoderLayer(nn.Module):
    """Causal self-attention (with an optional key/value cache) + cross-attention [+ context attention] +
    feed-forward."""

    def __init__(self, d_model, heads, ffn_dim, dropout, attention_dropout, activation_dropout, normalize_before,
                 activation: str = "relu", context: ContextAttention | None = None):
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, heads, attention_dropout, self_attention=True)
        self.cross_attn = MultiheadAttention(d_model, heads, attention_dropout)
        self.ffn = FeedForward(d_model, ffn_dim, activation_dropout, activation)
        self.self_block = Sublayer(d_model, dropout, normalize_before)
        self.cross_block = Sublayer(d_model, dropout, normalize_before)
        self.ffn_block = Sublayer(d_model, dropout, normalize_before)
        self.context = context
        sequential = context is not None and not context.parallel          # parallel: joined in cross-attention
        self.context_block = Sublayer(d_model, dropout, normalize_before) if sequential else None

    def forward(
        self, x: Tensor, cross: tuple, past: tuple[Tensor, Tensor] | None = None,
        self_mask: Tensor | None = None, need_weights: bool = False, context: tuple | None = None,
        shared: tuple | None = None,
    ) -> tuple[Tensor, tuple[Tensor, Tensor], dict]:
        """One decoder layer.

        Without ``past`` the self-attention is causal over ``x`` (B, T, C). With
        ``past`` (cached keys/values) ``x`` holds new positions only and
        ``self_mask`` (B, 1, Tq, Tpast+Tq) says which keys each query may see.
        ``cross`` = (encoder keys/values (G, H, S, D), mask (G, 1, 1, S), bool or additive, fold) and, when the
        layer has context attention, ``context`` = (context keys/values, mask (G, 1, 1, Mc), fold): ``fold``
        (:class:`Fold`) says how the rows share those key/value rows (see :meth:`MultiheadAttention.attend_folded`).
        ``shared``: self-attention keys/values before ``past`` that groups of rows share (a forced target prefix:
        :meth:`MultiheadAttention.self_attend`). Returns the output, this layer's keys/values (the rows' own), and
        attention weights.
        """
        kv: dict = {}

        def self_attention(h):
            causal = past is None
            mask = None if causal else self_mask
            out, w, kv["self"] = self.self_attn.self_attend(h, past, mask, causal, need_weights, shared=shared)
            return out, w

        weights = {"context": None}

        def cross_attention(h):
            (k, v), mask, fold = cross
            out, w = self.cross_attn.attend_folded(h, k, v, mask, fold, need_weights)
            if self.context is not None and self.context.parallel:          # both branches read the same input
                ctx, weights["context"] = self.context(h, *context, need_weights=need_weights)
                out = self.context.join(out, ctx, context[1], context[2])
            return out, w

        def context_attention(h):                                           # the sequential block
            return self.context(h, *context, need_weights=need_weights)

        x, self_w = self.self_block(x, self_attention)
        x, cross_w = self.cross_block(x, cross_attention)
        if self.context_block is not None:
            x, weights["context"] = self.context_block(x, context_attention)
        x, _ = self.ffn_block(x, lambda h: (self.ffn(h), None))
        return x, kv["self"], {"self": self_w, "cross": cross_w, **weights}
