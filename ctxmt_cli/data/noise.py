"""Source-side token noise for training: Voita, Sennrich & Titov (2019) train DocRepair on round-trip translations
with 10% of the input tokens replaced by random ones (their public configuration's "random_word" token dropout),
so the repair model learns not to trust every input token. ``data.input_noise`` sets the share for any recipe."""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from ctxmt_cli.core.batch import VocabInfo


def first_regular_id(vocab: VocabInfo) -> int:
    """The smallest id that is not a special token (padding, unknown, ``<s>``, ``</s>``, ``<brk>``)."""
    return max(vocab.pad, vocab.unk, vocab.bos, vocab.eos, vocab.brk) + 1


def replace_tokens(src: Tensor, share: float, vocab: VocabInfo, rng: np.random.Generator) -> Tensor:
    """``src`` (B, S) with each regular token replaced, with probability ``share``, by a subword drawn uniformly
    from the regular source vocabulary (possibly itself); special tokens (padding, ``<brk>``, ``</s>``) are kept,
    so the window's layout is unchanged. The draws come from ``rng`` alone."""
    first = first_regular_id(vocab)
    ids = src.cpu().numpy()                                                  # (B, S)
    hit = (ids >= first) & (rng.random(ids.shape) < share)                   # (B, S)
    out = ids.copy()
    out[hit] = rng.integers(first, vocab.src_size, int(hit.sum()))
    return torch.from_numpy(out)
