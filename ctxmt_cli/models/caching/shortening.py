"""Sequence shortening of encoder states for context-aware MT (Sequence Shortening for Context-Aware MT, 2023).

Implements the context representations of "Sequence Shortening for
Context-Aware Machine Translation" (2023):

* ``tokens``   -- every token state, unchanged (plain caching);
* ``sentence`` -- the mean of the sentence's real token states (one vector);
* ``pooling``  -- eq. 1: max / avg / linear pooling over non-overlapping
  groups of k consecutive tokens (linear pooling after Nawrot et al., 2022),
  followed by eq. 2;
* ``grouping`` -- Latent Grouping, sec. 4.1, eq. 3-4: a categorising FFN
  assigns every token a distribution over K groups (softmax or sparsemax),
  each group is the weighted sum of the token states, followed by eq. 2;
* ``selecting`` -- Latent Selecting, sec. 4.2: the same network, normalised
  over the sequence axis, so each group selects tokens; followed by eq. 2.

Eq. 2 lets the shortened tokens attend back to the full sequence:
``G = LayerNorm(G~ + Attn(G~, H, H))``.

Masks follow the ctxmt convention (bool, True = real token, padding on the
right). Padding never contributes to a pool, a group or a selection: padded
states are zeroed on entry and masked scores use ``torch.finfo(dtype).min``
(fp16/bf16 safe, never ``-inf`` constants).
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.autograd.function import once_differentiable

from ctxmt_cli.core.layers import MultiheadAttention

REPRS = ("tokens", "sentence", "pooling", "grouping", "selecting")
POOLINGS = ("max", "avg", "linear")
NORMALIZERS = ("softmax", "sparsemax")


class _Sparsemax(torch.autograd.Function):
    """Sparsemax along the last axis with its closed-form Jacobian-vector product."""

    @staticmethod
    def forward(ctx, x: Tensor) -> Tensor:
        # Half precision cumsums lose the threshold; work in at least float32.
        z = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
        # Shifting by the max changes nothing (sparsemax is shift invariant) but keeps sums finite.
        z = z - z.amax(-1, keepdim=True)
        zs = z.sort(-1, descending=True).values                           # (..., n)
        rank = torch.arange(1, z.size(-1) + 1, dtype=z.dtype, device=z.device)
        cums = zs.cumsum(-1)                                                # (..., n)
        # Support size: largest k with 1 + k * z_(k) > sum_{j<=k} z_(j); always >= 1.
        k = (1 + rank * zs > cums).sum(-1, keepdim=True)                    # (..., 1)
        tau = (cums.gather(-1, k - 1) - 1) / k.to(z.dtype)                  # (..., 1)
        p = (z - tau).clamp_min(0)                                          # (..., n)
        ctx.save_for_backward(p)
        return p.to(x.dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor) -> Tensor:
        (p,) = ctx.saved_tensors
        s = p > 0                                                           # support indicator
        g = grad.to(p.dtype)
        mean = (g * s).sum(-1, keepdim=True) / s.sum(-1, keepdim=True)      # (..., 1)
        return torch.where(s, g - mean, torch.zeros_like(g)).to(grad.dtype)


def sparsemax(x: Tensor, dim: int = -1) -> Tensor:
    """Exact sparsemax (Martins & Astudillo, 2016) along ``dim``.

    The Euclidean projection of ``x`` onto the probability simplex; the
    backward is the closed form ``s * (g - mean of g over the support)``.
    """
    return _Sparsemax.apply(x.movedim(dim, -1)).movedim(-1, dim)


def normalize(
    scores: Tensor, mask: Tensor | None, dim: int, kind: Literal["softmax", "sparsemax"]
) -> Tensor:
    """Softmax or sparsemax of ``scores`` along ``dim``; positions where ``mask`` is False get exactly 0.

    ``mask`` is bool and broadcastable to ``scores``. A slice whose positions
    are all masked returns zeros (not NaN).
    """
    if kind not in NORMALIZERS:
        raise ValueError(f"normalize: kind must be one of {NORMALIZERS}, got {kind!r}")
    if mask is not None:
        # The dtype's own minimum cannot overflow to NaN in fp16/bf16 the way -1e9 or -inf arithmetic can.
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = scores.softmax(dim) if kind == "softmax" else sparsemax(scores, dim)
    if mask is not None:
        # A fully masked slice normalises to a uniform distribution over fillers; zero it explicitly.
        weights = weights.masked_fill(~mask, 0.0)
    return weights


def pooling_windows(states: Tensor, mask: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """Split each row into consecutive windows of ``k`` slots, the tokens one pooled vector stands for (eq. 1).

    Rows are right-padded, so real tokens form a prefix and the first
    ceil(len/k) groups are exactly the groups of real tokens. Returns the slots
    (N, M, k, C) with padded slots zeroed and the slot mask (N, M, k), M = ceil(L/k).
    """
    n, length, c = states.shape
    m = -(-length // k)
    pad = m * k - length
    states = F.pad(states, (0, 0, 0, pad))                                  # (N, M*k, C)
    mask = F.pad(mask, (0, pad), value=False)                               # (N, M*k)
    states = states.masked_fill(~mask.unsqueeze(-1), 0.0)
    return states.view(n, m, k, c), mask.view(n, m, k)                      # (N, M, k, C), (N, M, k)


def pool(
    states: Tensor, mask: Tensor, kind: Literal["max", "avg", "linear"], k: int,
    proj: nn.Linear | None = None,
) -> tuple[Tensor, Tensor]:
    """Eq. 1: pool groups of ``k`` consecutive real tokens; returns pooled (N, M, C) and pooled_mask (N, M).

    ``max`` ignores padding (it is filled with the dtype minimum), ``avg``
    divides by the number of real tokens in the group, ``linear`` applies
    ``proj`` (Linear(k*C, C)) to the concatenated slots with zeros for padding.
    Groups without any real token are all-zero and masked out.
    """
    slots, slot_mask = pooling_windows(states, mask, k)                        # (N, M, k, C), (N, M, k)
    pooled_mask = slot_mask.any(-1)                                         # (N, M)
    if kind == "max":
        filler = torch.finfo(slots.dtype).min
        pooled = slots.masked_fill(~slot_mask.unsqueeze(-1), filler).amax(2)  # (N, M, C)
    elif kind == "avg":
        count = slot_mask.sum(-1, keepdim=True).clamp_min(1).to(slots.dtype)  # (N, M, 1)
        pooled = slots.sum(2) / count                                       # (N, M, C)
    elif kind == "linear":
        if proj is None:
            raise ValueError("pool: linear pooling needs a Linear(k*C, C) projection")
        n, m, _, c = slots.shape
        pooled = proj(slots.reshape(n, m, k * c))                           # (N, M, C)
    else:
        raise ValueError(f"pool: kind must be one of {POOLINGS}, got {kind!r}")
    # Empty groups would otherwise hold the dtype minimum (max) or the bias (linear).
    return pooled.masked_fill(~pooled_mask.unsqueeze(-1), 0.0), pooled_mask


class AttendBack(nn.Module):
    """Eq. 2: ``G = LayerNorm(G~ + Attn(G~, H, H))``, shortened tokens attend to the full sequence.

    ``dropout`` on the attention branch is an option (ctxmt's ``shortening_dropout``) that eq. 2 and the paper's
    code do not have; the default 0 leaves the branch as eq. 2 writes it.
    """

    def __init__(self, d_model: int, heads: int, dropout: float, attention_dropout: float):
        super().__init__()
        self.attn = MultiheadAttention(d_model, heads, attention_dropout)
        self.dropout = nn.Dropout(dropout)
        self.norm = nn.LayerNorm(d_model)

    def forward(self, short: Tensor, states: Tensor, mask: Tensor) -> Tensor:
        """``short`` (N, M, C) queries; ``states`` (N, L, C) keys/values; ``mask`` (N, L) key mask."""
        k, v = self.attn.project_kv(states)                                 # (N, H, L, D)
        out, _ = self.attn.attend(short, k, v, mask[:, None, None, :])      # (N, M, C)
        return self.norm(short + self.dropout(out))                         # (N, M, C)


def _validate(repr: str, d_model: int, heads: int, pooling: str | None, pool_size: int,
              groups: int | None, normalizer: str) -> None:
    """Reject option combinations that cannot build a shortener, with a message naming the option."""
    if repr not in REPRS:
        raise ValueError(f"shortening: repr must be one of {REPRS}, got {repr!r}")
    if repr == "pooling" and pooling is None:
        raise ValueError("shortening: repr 'pooling' needs `pooling` set to one of max | avg | linear")
    if pooling is not None and pooling not in POOLINGS:
        raise ValueError(f"shortening: pooling must be one of {POOLINGS}, got {pooling!r}")
    if pool_size < 1:
        raise ValueError(f"shortening: pool_size must be >= 1, got {pool_size}")
    if repr in ("grouping", "selecting") and groups is None:
        raise ValueError(f"shortening: repr {repr!r} needs `groups` (the number of groups K)")
    if groups is not None and groups < 1:
        raise ValueError(f"shortening: groups must be >= 1, got {groups}")
    if normalizer not in NORMALIZERS:
        raise ValueError(f"shortening: normalizer must be one of {NORMALIZERS}, got {normalizer!r}")
    if repr in ("pooling", "grouping", "selecting") and d_model % heads:
        raise ValueError(f"shortening: d_model {d_model} is not divisible by heads {heads}")


class Shortener(nn.Module):
    """Shortens encoder states of single sentences into the context representation ``repr``.

    ``pooling``/``pool_size`` apply to ``repr='pooling'``; ``groups`` (K),
    ``normalizer`` and ``hidden`` (the categorising FFN's hidden size) to
    ``grouping``/``selecting``. Options that do not apply to ``repr`` are ignored.
    """

    def __init__(
        self,
        repr: Literal["tokens", "sentence", "pooling", "grouping", "selecting"],
        d_model: int,
        heads: int,
        *,
        pooling: Literal["max", "avg", "linear"] | None = None,
        pool_size: int = 2,
        groups: int | None = None,
        normalizer: Literal["softmax", "sparsemax"] = "sparsemax",
        hidden: int = 512,
        dropout: float = 0.0,
        attention_dropout: float = 0.0,
    ):
        super().__init__()
        _validate(repr, d_model, heads, pooling, pool_size, groups, normalizer)
        self.repr, self.pooling, self.pool_size = repr, pooling, pool_size
        self.groups, self.normalizer = groups, normalizer
        self.proj: nn.Linear | None = None
        self.categorize: nn.Sequential | None = None
        self.attend_back: AttendBack | None = None
        if repr == "pooling" and pooling == "linear":
            self.proj = nn.Linear(pool_size * d_model, d_model)
        if repr in ("grouping", "selecting"):
            # Eq. 3's FFN with one hidden layer: one score per (token, group).
            self.categorize = nn.Sequential(nn.Linear(d_model, hidden), nn.ReLU(), nn.Linear(hidden, groups))
        if repr in ("pooling", "grouping", "selecting"):
            self.attend_back = AttendBack(d_model, heads, dropout, attention_dropout)

    def forward(self, states: Tensor, mask: Tensor) -> tuple[Tensor, Tensor, dict]:
        """Shorten ``states`` (N, L, C) with ``mask`` (N, L) bool (every row has >= 1 real token).

        Returns ``short`` (N, M, C), ``short_mask`` (N, M) bool and ``info``
        (``{"weights": (N, L, K)}`` for grouping/selecting, else empty).
        """
        if self.repr == "tokens":
            return states, mask, {}
        # Zero padded states once so that no value there (even NaN) can reach any output.
        h = states.masked_fill(~mask.unsqueeze(-1), 0.0)                    # (N, L, C)
        if self.repr == "sentence":
            count = mask.sum(1, keepdim=True).clamp_min(1).to(h.dtype)      # (N, 1)
            short = (h.sum(1) / count).unsqueeze(1)                         # (N, 1, C)
            return short, mask.new_ones(short.shape[:2]), {}
        info: dict = {}
        if self.repr == "pooling":
            short, short_mask = pool(h, mask, self.pooling, self.pool_size, self.proj)  # (N, M, C), (N, M)
        else:
            weights = self._categorize(h, mask)                             # (N, L, K)
            short = weights.transpose(1, 2) @ h                             # (N, K, C), eq. 4
            short_mask = mask.new_ones(short.shape[:2])                     # (N, K)
            info["weights"] = weights
        short = self.attend_back(short, h, mask)                            # (N, M, C), eq. 2
        # Empty pooled groups carry no information; keep them at zero rather than attention noise.
        return short.masked_fill(~short_mask.unsqueeze(-1), 0.0), short_mask, info

    def _categorize(self, h: Tensor, mask: Tensor) -> Tensor:
        """Eq. 3: categorisation weights (N, L, K), zero at padded tokens.

        Grouping normalises each token over the K groups; selecting normalises
        each group over the real tokens of the sequence.
        """
        scores = self.categorize(h)                                         # (N, L, K)
        dim = -1 if self.repr == "grouping" else 1
        # (N, L, 1) broadcasts: a padded token is masked for every group, so grouping gives it all zeros.
        return normalize(scores, mask.unsqueeze(-1), dim, self.normalizer)  # (N, L, K)
