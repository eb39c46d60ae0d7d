"""Output projection and label-smoothed cross-entropy fused, block by block (the training loss's hot path).

The plain path materialises logits (N, V), their log-softmax (N, V) and in backward the gradient of
each (N, V): several vocabulary-sized tensors per update, each a fresh allocation (on CPU, a fresh
``mmap`` whose pages fault in one by one). Here one float32 (N, V) buffer is filled block of rows by
block of rows with the projection, turned into the softmax *in place* (the only vocabulary-sized tensor
kept for backward) and the per-token loss is read off it; backward turns the same buffer into the
logits' gradient in place and multiplies it out. Padding positions are projected too (their loss and
gradient are zero): selecting the real rows would make a GPU wait for the host to learn how many there are.

Precision: both matrix multiplies of the backward, like the forward's, run in the autocast dtype when the
loss is called under autocast (bf16/fp16: the hidden states and the output weight are cast once and saved
cast), whatever dtype the final hidden state arrives in; the logits, their softmax statistics and the
weight gradient's accumulation over blocks are float32.

Block size (:func:`block_rows`) depends on the device only: on a CPU about 32 MB of logits per block, so a
block stays in cache between the matmul that writes it and the passes that read it (a measured CPU win);
on a GPU a budget of gigabytes (:data:`GPU_BLOCK_BYTES`), so a 25k-token batch of a 32k vocabulary is one
block and the loss is a handful of kernels, not thousands of launches from a Python loop.

With label smoothing ε over V classes (PyTorch's definition), per token with target y:
    loss = (1-ε)·(lse - z_y) + ε·(lse - mean(z)),    ∂loss/∂z = softmax(z) - (1-ε)·onehot(y) - ε/V.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext

import torch
from torch import Tensor

from ctxmt_cli.core.logits import exp_shift_, logit_chunk_rows

#: on a GPU, bytes of float32 logits one block may hold: no cache to keep warm, every block costs launches
GPU_BLOCK_BYTES = 4 << 30
#: the device type whose blocks are used whatever the tensors' device (:func:`blocks_as_on`); None: their own
_BLOCKS_AS: str | None = None


@contextmanager
def blocks_as_on(device_type: str) -> Iterator[None]:
    """Within the block, size loss blocks as on ``device_type`` (``cuda``: count or test a GPU's loss on the CPU)."""
    global _BLOCKS_AS
    before, _BLOCKS_AS = _BLOCKS_AS, device_type
    try:
        yield
    finally:
        _BLOCKS_AS = before


def block_rows(vocab: int, device_type: str) -> int:
    """Rows of one (rows, vocab) float32 logit block on a device of ``device_type`` (see the module docstring)."""
    if (_BLOCKS_AS or device_type) == "cuda":
        return max(1, GPU_BLOCK_BYTES // (4 * vocab))
    return logit_chunk_rows(vocab)


def compute_dtype(tensor: Tensor) -> torch.dtype:
    """The dtype the loss's matrix multiplies run in: autocast's on ``tensor``'s device when it is on, else its own."""
    kind = tensor.device.type
    if torch.amp.is_autocast_available(kind) and torch.is_autocast_enabled(kind):
        return torch.get_autocast_dtype(kind)
    return tensor.dtype


class _ProjectedCrossEntropy(torch.autograd.Function):
    """Per-row label-smoothed cross-entropy of ``hidden @ weightᵀ`` (see the module docstring)."""

    @staticmethod
    def forward(ctx, hidden: Tensor, weight: Tensor, target: Tensor, pad: int, smoothing: float,
                bias: Tensor | None = None) -> Tensor:
        dtype, kind = compute_dtype(hidden), hidden.device.type
        h, w = hidden.to(dtype), weight.to(dtype)                          # (N, C), (V, C): cast once, kept cast
        n, v = h.size(0), w.size(0)
        # compiled: one block, a loop whose trip count depends on the batch would recompile per batch shape
        rows = max(n, 1) if torch.compiler.is_compiling() else min(max(n, 1), block_rows(v, kind))
        probs = torch.empty(n, v, dtype=torch.float32, device=h.device)  # (N, V): logits, then softmax
        losses = torch.empty(n, dtype=torch.float32, device=h.device)    # (N,)
        off = torch.autocast(kind, enabled=False) if torch.amp.is_autocast_available(kind) else nullcontext()
        with off:                                                          # the casts above are the only ones
            for i in range(0, n, rows):
                z = probs[i:i + rows]                                      # (r, V) view, contiguous
                if dtype == torch.float32:
                    torch.mm(h[i:i + rows], w.t(), out=z)
                else:
                    z.copy_(h[i:i + rows] @ w.t())                         # low-precision matmul, fp32 statistics
                if bias is not None:                                       # an output bias (Marian's), added in fp32
                    z.add_(bias.float())
                picked = z.gather(1, target[i:i + rows, None]).squeeze(1)  # (r,)
                mean = z.mean(1)                                           # (r,)
                lse, total = exp_shift_(z)                                 # z now holds exp(z - max z)
                torch.sub(lse, torch.lerp(picked, mean, smoothing), out=losses[i:i + rows])
                z.div_(total)                                              # softmax, kept for backward
        losses.masked_fill_(target == pad, 0.0)
        ctx.save_for_backward(h, w, target, probs)
        ctx.rows, ctx.smoothing, ctx.pad, ctx.dtypes = rows, smoothing, pad, (hidden.dtype, weight.dtype)
        ctx.bias_dtype = None if bias is None else bias.dtype
        return losses

    @staticmethod
    def backward(ctx, grad: Tensor):
        h, w, target, probs = ctx.saved_tensors
        eps, rows, n, v = ctx.smoothing, ctx.rows, h.size(0), w.size(0)
        grad = grad.float().masked_fill(target == ctx.pad, 0.0)[:, None]  # (N, 1): padding has no gradient
        onehot = torch.full((n, 1), eps - 1.0, dtype=torch.float32, device=h.device)  # (N, 1)
        grad_hidden, grad_weight = torch.empty_like(h), None              # (N, C) in the compute dtype
        grad_bias = torch.zeros(v, dtype=torch.float32, device=h.device) if ctx.bias_dtype is not None else None
        for i in range(0, n, rows):
            g = probs[i:i + rows].sub_(eps / v)                            # (r, V) softmax -> dloss/dz in place
            g.scatter_add_(1, target[i:i + rows, None], onehot[i:i + rows])
            g = g.mul_(grad[i:i + rows])
            if grad_bias is not None:                                      # dloss/dbias: the rows' dloss/dz summed
                grad_bias.add_(g.sum(0))
            g = g.to(h.dtype)                                              # no-op in float32
            torch.mm(g, w, out=grad_hidden[i:i + rows])                    # (r, C)
            part = g.t() @ h[i:i + rows]                                   # (V, C)
            # float32 accumulation over blocks; one block (a GPU's usual case) casts once at the end
            grad_weight = part if grad_weight is None else grad_weight.float().add_(part)
        if grad_weight is None:                                            # no rows at all
            grad_weight = torch.zeros_like(w)
        if grad_bias is not None:
            grad_bias = grad_bias.to(ctx.bias_dtype)
        return grad_hidden.to(ctx.dtypes[0]), grad_weight.to(ctx.dtypes[1]), None, None, None, grad_bias


def projected_token_losses(hidden: Tensor, weight: Tensor, target: Tensor, pad: int, smoothing: float,
                           bias: Tensor | None = None) -> Tensor:
    """Label-smoothed cross-entropy per target token (B, T) of ``hidden`` (B, T, C) projected by ``weight``
    (V, C) and ``bias`` (V,) if any; 0 at padding. Equal to ``F.cross_entropy(hidden @ weightᵀ + bias, target,
    ignore_index=pad, label_smoothing=smoothing, reduction="none")`` (under autocast: of the autocast
    ``F.linear``), with a fraction of its memory."""
    flat = hidden.reshape(-1, hidden.size(-1))                             # (B*T, C)
    losses = _ProjectedCrossEntropy.apply(flat, weight, target.reshape(-1), pad, float(smoothing), bias)  # (B*T,)
    return losses.view(target.shape)
