"""The position axis of encoder and decoder rows: vectors put before a row (the input prefix), positions
dropped from it (the between-layers hook's narrowed mask). Both keep the core's mask convention: bool,
True = real, padding on the right."""

from __future__ import annotations

import torch
from torch import Tensor


def with_prefix(prefix: Tensor, x: Tensor, again: Tensor | None, mask: Tensor | None,
                current: Tensor | None):
    """Put ``prefix`` (B, P, C) before ``x`` (B, T, C): no positions (``again`` gets zeros), real, not current
    (a mask left None, because nobody reads it, stays None)."""
    b, p = prefix.shape[:2]
    x = torch.cat([prefix.to(x.dtype), x], 1)                               # (B, P + T, C)
    if again is not None:
        again = torch.cat([again.new_zeros(b, p, again.size(2)), again], 1)
    mask = None if mask is None else torch.cat([mask.new_ones(b, p), mask], 1)
    current = None if current is None else torch.cat([current.new_zeros(b, p), current], 1)
    return x, again, mask, current


def compact(mask: Tensor, *tensors: Tensor | None) -> tuple[Tensor | None, ...]:
    """Drop the positions ``mask`` (B, S) no longer keeps: each row's kept positions move left in their order
    and the columns no row needs are cut. Returns ``mask`` and ``tensors`` (B, S, ...) or None, at width S' <= S."""
    width = int(mask.sum(1).max())
    if width == mask.size(1):
        return (mask, *tensors)
    order = torch.sort((~mask).to(torch.int8), dim=1, stable=True).indices[:, :width]   # (B, S') kept first

    def take(t: Tensor | None) -> Tensor | None:
        if t is None:
            return None
        index = order.view(*order.shape, *([1] * (t.dim() - 2))).expand(-1, -1, *t.shape[2:])
        return t.gather(1, index)

    return tuple(take(t) for t in (mask, *tensors))
