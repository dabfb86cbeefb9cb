"""Input checks shared by every module: bad input raises a ValueError that names the problem.

Shape legend used throughout tfm_ref:
    B batch · T query positions · S key positions · D model width · H query heads
    G key/value heads · Dh head width · F feed-forward width · V vocabulary size
"""
from __future__ import annotations

import torch


def check_divisible(numerator: int, denominator: int, what: str, by: str) -> None:
    if denominator <= 0:
        raise ValueError(f"{by} must be a positive integer, got {denominator}")
    if numerator % denominator:
        raise ValueError(f"{what} ({numerator}) is not divisible by {by} ({denominator})")


def check_positive(**values: int | float) -> None:
    for name, value in values.items():
        if value <= 0:
            raise ValueError(f"{name} must be positive, got {value}")


def check_last_dim(x: torch.Tensor, expected: int, name: str) -> None:
    if x.dim() < 1 or x.shape[-1] != expected:
        raise ValueError(f"{name} must have last dimension {expected}, got shape {tuple(x.shape)}")


def check_mask(mask: torch.Tensor, scores_shape: torch.Size | tuple[int, ...]) -> None:
    """A mask is boolean (True = may attend) and broadcasts to the scores' shape (…, T, S)."""
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        got = mask.dtype if isinstance(mask, torch.Tensor) else type(mask).__name__
        raise ValueError(
            f"mask must be a boolean tensor (True = may attend), got {got}; "
            "additive float masks are not accepted"
        )
    try:
        broadcast = torch.broadcast_shapes(mask.shape, tuple(scores_shape))
    except RuntimeError:
        broadcast = None
    if broadcast != tuple(scores_shape):
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} does not broadcast to the attention "
            f"scores' shape {tuple(scores_shape)} (…, T queries, S keys)"
        )
