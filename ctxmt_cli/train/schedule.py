"""Learning-rate schedule: linear warm-up, then inverse square-root decay (Vaswani et al., 2017).

``lr(step) = lr_max · min(step / warmup, sqrt(warmup / step))`` for update
numbers ``step = 1, 2, …``: the two branches meet at ``step = warmup`` where the
rate peaks at ``lr_max``. The rate is a pure function of the update number, so a
resumed run needs nothing but the step to continue the schedule exactly.
"""

from __future__ import annotations

import math


def inverse_sqrt_lr(step: int, lr_max: float, warmup: int) -> float:
    """Learning rate of update ``step`` (1-based).

    ``warmup = 0`` means no warm-up: the decay starts at the first update as if
    ``warmup`` were 1 (``lr_max / sqrt(step)``), which keeps the formula finite.
    """
    if step < 1:
        raise ValueError(f"update numbers start at 1, got {step}")
    warm = max(int(warmup), 1)
    return lr_max * min(step / warm, math.sqrt(warm / step))


class InverseSqrtSchedule:
    """Sets the optimiser's learning rate before each update (stateless apart from its settings)."""

    def __init__(self, optimizer, lr_max: float, warmup: int):
        self.optimizer, self.lr_max, self.warmup = optimizer, lr_max, warmup

    def lr(self, step: int) -> float:
        """Rate of update ``step`` (1-based)."""
        return inverse_sqrt_lr(step, self.lr_max, self.warmup)

    def apply(self, step: int) -> float:
        """Write the rate of update ``step`` into every parameter group and return it."""
        lr = self.lr(step)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        return lr
