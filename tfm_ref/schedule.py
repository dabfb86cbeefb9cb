"""Chapter 8 in practice — learning-rate schedules: the 2017 one, and warmup then cosine decay.

    noam:    lr(step) = d_model^−0.5 · min(step^−0.5, step · warmup^−1.5)     (Vaswani et al. 2017, eq. 3)
    cosine:  lr rises linearly to its peak over `warmup` steps, then follows half a cosine down
             to peak · min_ratio at the last step

Both are pure functions of the step, so a resumed run needs nothing saved to continue them.
`noam_lr` counts steps from 1, as the paper does; `warmup_cosine_lr` from 0, as a training loop does.
"""
from __future__ import annotations

import math

__all__ = ["noam_lr", "warmup_cosine_lr", "SCHEDULES"]

SCHEDULES = ("cosine", "noam")


def noam_lr(step: int, d_model: int, warmup: int) -> float:
    """d_model^−0.5 · min(step^−0.5, step · warmup^−1.5): linear warmup, then decay as 1/√step.

    Raises:
        ValueError: step < 1 (the paper counts steps from 1).
    """
    if step < 1:
        raise ValueError(f"step counts from 1, got {step}")
    return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def warmup_cosine_lr(step: int, peak: float, warmup: int, total: int, min_ratio: float = 0.0) -> float:
    """Linear warmup to ``peak`` over ``warmup`` steps, then cosine decay to ``peak · min_ratio`` at ``total``.

    Args:
        step: 0, 1, … (the step about to be taken).
    """
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = min((step - warmup) / max(1, total - warmup), 1.0)
    return peak * (min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))
