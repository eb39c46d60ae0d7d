"""Vocabulary-sized work without vocabulary-sized tensors: block sizes for the fused training loss and the
log-partition function that scoring uses (log Σ_v exp z_v, projected slice by slice)."""

from __future__ import annotations

import torch
from torch import Tensor

from ctxmt_cli.core.linear import linear

#: bytes of one block of float32 logits where the fused training loss projects them block by block
LOGIT_CHUNK_BYTES = 32 << 20


def logit_chunk_rows(vocab: int) -> int:
    """Rows of a (rows, vocab) float32 logit block within :data:`LOGIT_CHUNK_BYTES`."""
    return max(1, LOGIT_CHUNK_BYTES // (4 * vocab))


#: scoring projects the vocabulary in slices of about this many bytes of float32 logits: small enough to
#: stay in the CPU's cache between the matmul that writes a slice and the log-softmax that reads it
SCORE_SLICE_BYTES = 4 << 20
#: narrowest slice: a narrower matmul would lose more than the cache saves (slices are multiples of 256 columns)
SCORE_MIN_WIDTH = 512
#: rows of one scoring block (memory stays bounded whatever the scoring batch)
SCORE_ROWS = 2048


def slice_width(rows: int, vocab: int, device: torch.device | None = None) -> int:
    """Vocabulary columns per slice for ``rows`` rows (see :data:`SCORE_SLICE_BYTES`); the whole vocabulary
    when that fits, and always on a GPU: there no cache is to be kept warm, and every slice costs kernel launches
    (32 slices of a 16k vocabulary made scoring on an H200 0.6x as fast as one projection), while a block's
    logits (at most :data:`SCORE_ROWS` rows) fit its memory."""
    if device is not None and device.type == "cuda":
        return vocab
    width = (SCORE_SLICE_BYTES // (4 * max(rows, 1))) // 256 * 256
    return min(vocab, max(SCORE_MIN_WIDTH, width))


@torch.no_grad()
def log_partition(states: Tensor, weight: Tensor, width: int | None = None, bias: Tensor | None = None) -> Tensor:
    """log Σ_v exp(states · weight_v + bias_v) per row: (N,) float32 for ``states`` (N, C), ``weight`` (V, C),
    ``bias`` (V,) or None.

    The (N, V) logits are never held. The vocabulary is projected one slice of ``width`` columns at a
    time (default :func:`slice_width`), and each slice's log-sum-exp comes from one log-softmax into a
    reused buffer (a single fused, row-wise pass, where max, subtract, exp and sum would be four passes
    over memory): lse = z_0 - log_softmax(z)_0 for the slice's first column z_0. Slices combine with
    ``logaddexp``.
    """
    n, v = states.size(0), weight.size(0)
    width = min(v, width or slice_width(n, v, states.device))
    logprobs = torch.empty(n, width, dtype=torch.float32, device=states.device)   # (N, w), reused by every slice
    total = None
    for j in range(0, v, width):
        z = linear(states, weight[j:j + width], None if bias is None else bias[j:j + width])   # (N, w')
        lp = logprobs[:, :z.size(1)]
        torch.log_softmax(z, 1, dtype=torch.float32, out=lp)
        lse = z[:, 0].float() - lp[:, 0]                                    # (N,)
        total = lse if total is None else torch.logaddexp(total, lse)
    return total


def exp_shift_(logits: Tensor) -> tuple[Tensor, Tensor]:
    """Turn ``logits`` (r, V) into exp(z - max z) in place; return log Σ exp z (r,) and Σ exp(z - max z) (r, 1)."""
    top = logits.amax(1, keepdim=True)                                      # (r, 1): exp cannot overflow
    total = logits.sub_(top).exp_().sum(1, keepdim=True)                    # (r, 1)
    return (total.log() + top).squeeze(1), total
