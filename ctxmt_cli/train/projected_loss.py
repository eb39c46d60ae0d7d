"""Output projection and label-smoothed cross-entropy fused, chunk by chunk (the training loss's hot path).

The plain path materialises logits (N, V), their log-softmax (N, V) and in backward the gradient of
each (N, V): several vocabulary-sized tensors per update, each a fresh allocation (on CPU, a fresh
``mmap`` whose pages fault in one by one). Here each chunk of rows is projected, turned into its
softmax *in place* (the only (rows, V) tensor kept for backward) and the per-token loss is read off
it; backward turns the same buffer into the logits' gradient in place and multiplies it out.
Padding positions are projected too (their loss and gradient are zero): selecting the real rows
would make a GPU wait for the host to learn how many there are, and ctxmt's batches pad little.

With label smoothing ε over V classes (PyTorch's definition), per token with target y:
    loss = (1-ε)·(lse - z_y) + ε·(lse - mean(z)),    ∂loss/∂z = softmax(z) - (1-ε)·onehot(y) - ε/V.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ctxmt_cli.core.logits import exp_shift_, logit_chunk_rows


class _ProjectedCrossEntropy(torch.autograd.Function):
    """Per-row label-smoothed cross-entropy of ``hidden @ weightᵀ`` (see the module docstring)."""

    @staticmethod
    def forward(ctx, hidden: Tensor, weight: Tensor, target: Tensor, pad: int, smoothing: float) -> Tensor:
        n, v = hidden.size(0), weight.size(0)
        rows = logit_chunk_rows(v)
        w = weight.to(hidden.dtype)                                       # bf16 under autocast
        losses, probs = hidden.new_empty(n, dtype=torch.float32), []
        for i in range(0, n, rows):
            logits = (hidden[i:i + rows] @ w.t()).float()                  # (r, V)
            picked = logits.gather(1, target[i:i + rows, None]).squeeze(1)  # (r,)
            mean = logits.mean(1)
            lse, total = exp_shift_(logits)                                # logits now hold exp(z - max z)
            loss = (1 - smoothing) * (lse - picked) + smoothing * (lse - mean)
            losses[i:i + rows] = loss.masked_fill_(target[i:i + rows] == pad, 0.0)
            probs.append(logits.div_(total))                               # softmax, kept for backward
        ctx.save_for_backward(hidden, weight, target)
        ctx.probs, ctx.rows, ctx.smoothing, ctx.pad = probs, rows, smoothing, pad
        return losses

    @staticmethod
    def backward(ctx, grad: Tensor):
        hidden, weight, target = ctx.saved_tensors
        w, eps, rows = weight.to(hidden.dtype), ctx.smoothing, ctx.rows
        grad = grad.masked_fill(target == ctx.pad, 0.0)                    # padding: no loss, no gradient
        grad_hidden, grad_weight = torch.empty_like(hidden), torch.zeros_like(weight, dtype=torch.float32)
        for chunk, i in enumerate(range(0, hidden.size(0), rows)):
            g = ctx.probs[chunk]                                           # (r, V) softmax -> dloss/dz in place
            g.sub_(eps / g.size(1))
            g[torch.arange(g.size(0), device=g.device), target[i:i + rows]] -= 1 - eps
            g = g.mul_(grad[i:i + rows, None]).to(hidden.dtype)
            grad_hidden[i:i + rows] = g @ w                                # (r, C)
            grad_weight += (g.t() @ hidden[i:i + rows]).float()            # (V, C)
        ctx.probs = None
        return grad_hidden, grad_weight.to(weight.dtype), None, None, None


def projected_token_losses(hidden: Tensor, weight: Tensor, target: Tensor, pad: int, smoothing: float) -> Tensor:
    """Label-smoothed cross-entropy per target token (B, T) of ``hidden`` (B, T, C) projected by ``weight``
    (V, C); 0 at padding. Equal to ``F.cross_entropy(hidden @ weightᵀ, target, ignore_index=pad,
    label_smoothing=smoothing, reduction="none")``, with a fraction of its memory."""
    flat = hidden.reshape(-1, hidden.size(-1))                             # (B*T, C)
    losses = _ProjectedCrossEntropy.apply(flat, weight, target.reshape(-1), pad, float(smoothing))  # (B*T,)
    return losses.view(target.shape)
