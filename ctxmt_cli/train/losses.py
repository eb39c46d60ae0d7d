"""Label-smoothed cross-entropy with the context discount of Lupo et al. (2022, seed 001 eq. 2).

L = CD · L_context + L_current. Each target token is attributed to a sentence of
the window by counting ``<brk>`` (the final ``</s>`` counts as current); label
smoothing applies per token, inside each part. With ``cd_normalize:
window_tokens`` (the reference implementation) the weighted sum is divided by
the number of target tokens in the whole window, with ``weight_sum`` by Σw.
CD = 1 gives exactly the plain loss.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from ctxmt_cli.core.positions import current_sentence_mask


@dataclass
class LossSums:
    """Sums over a batch; divide by the counts (after all-reducing across workers)."""

    weighted: Tensor          # Σ w·ℓ  (the training objective's numerator)
    normalizer: Tensor        # window tokens or Σw
    window: Tensor            # Σ ℓ over all target tokens
    tokens: Tensor
    current: Tensor           # Σ ℓ over current-sentence tokens
    current_tokens: Tensor
    context: Tensor           # Σ ℓ over context tokens
    context_tokens: Tensor

    def as_tensor(self) -> Tensor:
        return torch.stack([v.detach().float() for v in self.__dict__.values()])

    @staticmethod
    def metrics(total: Tensor) -> dict[str, float]:
        """Mean losses from an (all-reduced) ``as_tensor`` vector."""
        w, norm, win, tok, cur, ctok, ctx, xtok = total.tolist()
        safe = lambda a, b: a / b if b > 0 else float("nan")  # noqa: E731
        return {
            "discounted_loss": safe(w, norm), "window_loss": safe(win, tok),
            "current_loss": safe(cur, ctok), "context_loss": safe(ctx, xtok),
            "tokens": tok, "current_tokens": ctok,
        }


def token_losses(logits: Tensor, target: Tensor, pad: int, label_smoothing: float) -> Tensor:
    """Label-smoothed per-token loss (B, T); 0 at padding."""
    b, t, v = logits.shape
    loss = F.cross_entropy(
        logits.float().reshape(b * t, v), target.reshape(b * t), ignore_index=pad,
        reduction="none", label_smoothing=label_smoothing,
    )
    return loss.view(b, t)


def window_loss(
    logits: Tensor, target: Tensor, pad: int, brk: int, label_smoothing: float = 0.0,
    cd: float = 1.0, cd_normalize: str = "window_tokens",
) -> LossSums:
    """Context-discounted loss sums for logits (B, T, V) and labels (B, T)."""
    return window_sums(token_losses(logits, target, pad, label_smoothing), target, pad, brk, cd, cd_normalize)


def window_sums(loss: Tensor, target: Tensor, pad: int, brk: int, cd: float = 1.0,
                cd_normalize: str = "window_tokens") -> LossSums:
    """Context-discounted loss sums from per-token losses (B, T) (0 at padding) and labels (B, T)."""
    real = target != pad
    current = current_sentence_mask(target, brk) & real
    context = real & ~current
    weights = torch.where(current, 1.0, cd) * real                          # (B, T)
    tokens = real.sum()
    normalizer = tokens.float() if cd_normalize == "window_tokens" else weights.sum()
    return LossSums(
        weighted=(weights * loss).sum(), normalizer=normalizer, window=loss.sum(), tokens=tokens.float(),
        current=(loss * current).sum(), current_tokens=current.sum().float(),
        context=(loss * context).sum(), context_tokens=context.sum().float(),
    )
