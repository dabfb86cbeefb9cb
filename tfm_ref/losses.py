"""Chapter 8 in practice — the training loss: cross-entropy against label-smoothed targets.

    target distribution = (1 − ε) · one-hot + ε / V        (Szegedy et al. 2016; Vaswani et al. 2017, §5.4)
    loss = − Σ_v target_v · log softmax(logits)_v, averaged over the positions that are not ignored

The correct class gets 1 − ε + ε/V, as in ``F.cross_entropy(..., label_smoothing=ε)``.

Shapes: B batch · T positions · V vocabulary.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .tokens import PAD_ID

__all__ = ["label_smoothed_cross_entropy"]


def label_smoothed_cross_entropy(logits: torch.Tensor, target: torch.Tensor, smoothing: float = 0.1,
                                 ignore_index: int = PAD_ID, *, reduction: str = "mean") -> torch.Tensor:
    """Cross-entropy against (1 − ε)·one-hot + ε/V over the positions whose target is not ``ignore_index``.

    Args:
        logits: (B, T, V).  target: (B, T) ids.  smoothing: ε.
        reduction: "mean" over the scored positions, or "sum" (a training loop that divides by
            a count of its own, e.g. the global count under data parallelism).
    Returns:
        a scalar.
    """
    return F.cross_entropy(logits.flatten(0, -2), target.flatten(), ignore_index=ignore_index,
                           label_smoothing=smoothing, reduction=reduction)  # (B·T, V) and (B·T,)
