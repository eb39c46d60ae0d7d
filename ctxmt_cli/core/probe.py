"""The attention probe: attention maps handed out one layer at a time, for analysis.

``forward(batch, probe=fn)`` computes every attention map explicitly (the same
numbers as the fused kernel, probabilities taken *before* attention dropout) and
calls ``fn(view)`` once per layer and attention kind, right after that layer ran;
the map is then dropped. A probe therefore reduces each map on the fly (entropy,
shares) and an analysis never holds more than one layer's map of one batch.

Kinds: ``encoder_self``, ``decoder_self``, ``cross``, ``context`` (a family's
context attention over its context memory) and ``assignment`` (the caching
family's Latent Grouping / Selecting weights: queries = tokens, keys = groups).

Which positions belong to the *current* sentence (the one being translated):
on the source side a token belongs to the sentence it is part of (``<brk>``
closes its sentence, ``</s>`` closes the current one); on the target side a
decoder position belongs to the sentence of the token it *predicts*
(``tgt_out``), so ``<s>`` is in the first sentence and the last ``<brk>``
input, which predicts the current sentence's first word, is in the current one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

KINDS = ("encoder_self", "decoder_self", "cross", "context")


@dataclass
class AttentionView:
    """One attention map of one layer, with what its rows (queries) and columns (keys) are."""

    kind: str                                    # one of KINDS, or "assignment"
    layer: int
    weights: Tensor                              # (B, H, Tq, Tk) probabilities, 0 at masked keys
    query_mask: Tensor                           # (B, Tq) bool, real queries
    key_mask: Tensor                             # (B, Tk) bool, real keys
    query_current: Tensor                        # (B, Tq) bool, queries of the current sentence
    key_current: Tensor                          # (B, Tk) bool, keys of the current sentence
    causal: bool = False                         # query t sees keys 0..t only (decoder self-attention)


AttentionProbe = Callable[[AttentionView], None]


class Collect:
    """A probe that keeps every map (tests and single-window figures): ``maps[kind][layer]`` = (B, H, Tq, Tk)."""

    def __init__(self):
        self.maps: dict[str, list[Tensor]] = {}
        self.views: dict[str, list[AttentionView]] = {}

    def __call__(self, view: AttentionView) -> None:
        self.maps.setdefault(view.kind, []).append(view.weights.detach())
        self.views.setdefault(view.kind, []).append(view)


def target_current(tokens: Tensor, brk: int, pad: int) -> Tensor:
    """Decoder positions (B, T) of teacher-forced inputs ``tokens`` that predict a token of the current sentence.

    The position holding the last ``<brk>`` predicts the current sentence's first token, so it counts:
    a position is current when the ``<brk>`` count up to *and including* it equals the row's total.
    """
    is_brk = (tokens == brk).long()                                         # (B, T)
    return (is_brk.cumsum(1) == is_brk.sum(1, keepdim=True)) & (tokens != pad)


def report_decoder(probe: AttentionProbe, layer: int, weights: dict, query_mask: Tensor, query_current: Tensor,
                   enc, key_mask: Tensor) -> None:
    """Hand one decoder layer's maps (``weights``: self, cross, context) to ``probe``; ``enc`` is the EncoderOut.

    ``key_mask`` of the self-attention differs from ``query_mask`` where the decoder has prefix positions: keys
    every query sees, but no query of their own (their output is dropped)."""
    probe(AttentionView("decoder_self", layer, weights["self"], query_mask, key_mask, query_current, query_current,
                        causal=True))
    probe(AttentionView("cross", layer, weights["cross"], query_mask, enc.mask, query_current, enc.current))
    if weights.get("context") is not None:
        memory = enc.context
        current = memory.current if memory.current is not None else torch.zeros_like(memory.mask)
        probe(AttentionView("context", layer, weights["context"], query_mask, memory.mask, query_current, current))
