"""The chunked-batch path of the core forward pass.

A training batch of whole groups (``Batch.chunks``) carries its rows sorted by length and cut into
consecutive chunks; the model runs each chunk at its own width in one forward pass (one backward,
one DDP forward), so the rows of one group need not share one padded tensor: the batch-level step
(the ``encode_parts`` hook) once, then the decoder chunk by chunk. The decoder states come back
packed, (N, C) in :meth:`~ctxmt_cli.core.batch.Batch.pack` order.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ctxmt_cli.core.batch import Batch
from ctxmt_cli.core.probe import AttentionProbe


def chunked_hidden(model, batch: Batch, probe: AttentionProbe | None = None) -> tuple[Tensor, dict]:
    """Decoder states of a chunked batch, (N, C) in :meth:`Batch.pack` order, and the batch's loss terms:
    ``model.encode_parts`` once, then the decoder chunk by chunk, each at its own width."""
    if probe is not None:
        raise ValueError("an attention probe reads whole batches: collate this batch without chunks")
    parts = batch.parts()
    encs, terms = model.encode_parts(parts)
    hidden = []
    for part, enc in zip(parts, encs, strict=True):
        h, _ = model._decode_full(part.tgt_in, enc, model.cross_kv(enc), context=model.context_kv(enc))
        hidden.append(h.reshape(-1, h.size(-1)))                            # (rows x width, C)
    return torch.cat(hidden), terms
