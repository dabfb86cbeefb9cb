"""Where precision matters (softmax, normalisation), compute in at least float32.

Half-precision inputs are upcast and the result cast back; float64 stays float64.
"""
from __future__ import annotations

import torch

__all__ = ["at_least_float32"]


def at_least_float32(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.promote_types(x.dtype, torch.float32))
