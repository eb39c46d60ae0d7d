"""The training objective: the label-smoothed window loss plus the family's loss terms.

Every target token of a window carries a label-smoothed loss ℓ (its sentence is
found by counting ``<brk>``; the final ``</s>`` belongs to the current sentence).
A family adds named :class:`~ctxmt_cli.core.model.LossTerm` s (the context discount
of Lupo et al. 2022 for concat; a classifier loss elsewhere), and the objective is

    (Σ_tokens ℓ + Σ_terms weight · sum) / (tokens + Σ_terms [normalizes] weight · count).

Per batch everything is kept as sums in one vector (:class:`LossLayout`), so that
accumulation and DDP add vectors and take the quotients once, on the global
batch. With no term of non-zero weight the objective is exactly the window loss.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from ctxmt_cli.core.batch import LossTerm
from ctxmt_cli.core.positions import current_sentence_mask

#: the sums every family has, in their order at the head of the loss vector
CORE_SUMS = ("objective", "normalizer", "window", "tokens", "current", "current_tokens")
OBJECTIVE, NORMALIZER, WINDOW, TOKENS = range(4)


class LossLayout:
    """The loss vector of a model: :data:`CORE_SUMS`, then (sum, count) of each term in ``terms`` order.

    The objective's numerator is also returned as a tensor with its autograd graph (``objective``):
    gradients are taken of that sum and divided by the global normaliser afterwards.
    """

    def __init__(self, terms: Sequence[str] = ()):
        self.terms = tuple(terms)
        self.names = CORE_SUMS + tuple(f"{t}.{part}" for t in self.terms for part in ("sum", "count"))

    def __len__(self) -> int:
        return len(self.names)

    def sums(self, token_loss: Tensor, target: Tensor, pad: int, brk: int,
             terms: dict[str, LossTerm]) -> tuple[Tensor, Tensor]:
        """(objective numerator () with gradient, loss vector (len(self),) detached) of one batch."""
        if set(terms) != set(self.terms):
            raise RuntimeError(f"the model returned loss terms {sorted(terms)} but declares {list(self.terms)}")
        real = target != pad                                                # (B, T)
        current = current_sentence_mask(target, brk) & real
        window, tokens = token_loss.sum(), real.sum(dtype=torch.float32)
        objective, normalizer = window, tokens
        for name in self.terms:
            term = terms[name]
            if term.weight != 0.0:                             # weight 0: a statistic, exactly nothing added
                objective = objective + term.weight * term.sum
                if term.normalizes:
                    normalizer = normalizer + term.weight * term.count
        parts = [objective, normalizer, window, tokens, (token_loss * current).sum(), current.sum(dtype=torch.float32)]
        for name in self.terms:
            parts += [terms[name].sum, terms[name].count]
        # one stack, one detach: every op here is a kernel launch on a GPU
        scalars = [p if p.dim() == 0 else p.reshape(()) for p in parts]
        return objective, torch.stack(scalars).detach().float()

    def metrics(self, total: Tensor) -> dict[str, float]:
        """Means from an (all-reduced) loss vector: the objective (``discounted_loss``), window and current
        losses, token counts, and each term's ``sum / count`` under its own name."""
        values = dict(zip(self.names, total.tolist(), strict=True))

        def safe(a: float, b: float) -> float:                  # a mean over nothing is NaN, not an error
            return a / b if b > 0 else float("nan")

        out = {
            "discounted_loss": safe(values["objective"], values["normalizer"]),
            "window_loss": safe(values["window"], values["tokens"]),
            "current_loss": safe(values["current"], values["current_tokens"]),
            "tokens": values["tokens"], "current_tokens": values["current_tokens"],
        }
        for name in self.terms:
            out[name] = safe(values[f"{name}.sum"], values[f"{name}.count"])
        return out
