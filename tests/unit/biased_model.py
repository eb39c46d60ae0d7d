"""One wrapper for search and translation tests: a model whose next-token logits are nudged.

Random tiny models tend to repeat one token forever; a bias on ``</s>`` gives varied output
lengths, a bias or rule on ``<brk>`` exercises the generate mode's separator checks.
"""

from __future__ import annotations

import torch
from torch import nn


class Biased(nn.Module):
    """Wraps a model, adds ``eos``/``brk`` to those logits (decoding and forward alike); the rest of the
    contract passes through unchanged.

    ``brk_rule``: ``"free"`` (only the bias), ``"ban"`` (never emit ``<brk>``) or ``"script"`` (emit exactly
    the context separators first, while fewer than n_sent - 1 were seen, then none; decoding only).
    ``calls`` records the number of rows fed to each ``decode_step``.
    """

    def __init__(self, inner: nn.Module, eos: float = 0.0, brk: float = 0.0, brk_rule: str = "free"):
        super().__init__()
        self.inner, self.vocab, self.cfg = inner, inner.vocab, inner.cfg
        self.eos, self.brk, self.brk_rule = eos, brk, brk_rule
        self.context_aware = inner.context_aware
        self.calls: list[int] = []

    def _bias(self, logits: torch.Tensor) -> torch.Tensor:
        logits = logits.clone()                                             # (..., V)
        logits[..., self.vocab.eos] += self.eos
        logits[..., self.vocab.brk] += self.brk
        return logits

    def forward(self, batch, **kwargs):
        out = self.inner(batch, **kwargs)
        if out.logits is not None:
            out.logits = self._bias(out.logits)
        return out

    def encode(self, batch):
        return self.inner.encode(batch)

    def init_state(self, enc, batch):
        return self.inner.init_state(enc, batch)

    def reorder_state(self, state, index):
        return self.inner.reorder_state(state, index)

    def decode_step(self, tokens, state):
        self.calls.append(tokens.size(0))
        logits, state = self.inner.decode_step(tokens, state)
        logits, brk = self._bias(logits), self.vocab.brk                    # (B, V)
        if self.brk_rule == "ban":
            logits[:, brk] = float("-inf")
        elif self.brk_rule == "script":
            want = state.sent_idx < state.n_sent - 1                        # (B,) separators still due
            logits[:, brk] = float("-inf")
            logits[want] = float("-inf")
            logits[want, brk] = 0.0
        return logits, state
