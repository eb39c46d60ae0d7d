"""Previous source sentences as context (an sNto1 window). Hooks: ``context_aware``, ``loss_term_names``,
``loss_terms`` (the source window's mean length, a statistic). Inputs: the plain ones."""

from __future__ import annotations

import torch

from ctxmt_cli.core.batch import LossTerm
from ctxmt_cli.core.model import EncoderDecoder


class PrevSrc(EncoderDecoder):
    """The plain Transformer reading its source window, logging how long the windows are."""

    context_aware = True
    loss_term_names = ("src_window_tokens",)

    def loss_terms(self, batch, token_loss, output):
        """The source window's mean length in tokens: a statistic (weight 0: logged and validated, no gradient)."""
        real = batch.src != self.vocab.pad                                   # (B, S)
        rows = torch.tensor(float(real.size(0)), device=real.device)
        return {"src_window_tokens": LossTerm(real.sum().float(), rows, weight=0.0)}


VARIANTS = {"c1": {}, "c2": {"src_context_sentences": 2}}
#: started from a sentence-level model (train.init_from), it is that model on a one-sentence window: it adds no
#: parameter, and its statistic has no weight
EXACT_FROM_SENTENCE = frozenset(VARIANTS)
