"""Chapter 6 — the position-wise feed-forward network.

    FFN(x)    = W₂ act(W₁ x + b₁) + b₂                     (Vaswani et al. 2017, eq. 2)
    SwiGLU(x) = W_down (SiLU(W_gate x) ⊙ W_up x)           (Shazeer 2020)

SwiGLU has three matrices instead of two; with a hidden width of ⅔·F it has the parameters
of a two-matrix FFN of width F (`swiglu_hidden_size`).

Shapes: B batch · T positions · D model width · F hidden width.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .shapes import check_positive

__all__ = ["FeedForward", "SwiGLU", "swiglu_hidden_size", "ACTIVATIONS"]

ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu}  # exact (erf) GELU, as nn.Transformer uses


class FeedForward(nn.Module):
    """Two linear maps with an activation between, applied to every position alone."""

    def __init__(self, d_model: int, d_ff: int, activation: str = "relu", dropout: float = 0.0, bias: bool = True):
        super().__init__()
        check_positive(d_model=d_model, d_ff=d_ff)
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
        self.activation = activation
        self.up_proj = nn.Linear(d_model, d_ff, bias=bias)
        self.down_proj = nn.Linear(d_ff, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = ACTIVATIONS[self.activation](self.up_proj(x))  # (B, T, F)
        return self.down_proj(self.dropout(hidden))  # (B, T, D)


class SwiGLU(nn.Module):
    """A gated FFN: the SiLU of one projection gates another."""

    def __init__(self, d_model: int, d_hidden: int, bias: bool = False, dropout: float = 0.0):
        super().__init__()
        check_positive(d_model=d_model, d_hidden=d_hidden)
        self.gate_proj = nn.Linear(d_model, d_hidden, bias=bias)
        self.up_proj = nn.Linear(d_model, d_hidden, bias=bias)
        self.down_proj = nn.Linear(d_hidden, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = F.silu(self.gate_proj(x)) * self.up_proj(x)  # (B, T, F)
        return self.down_proj(self.dropout(hidden))  # (B, T, D)


def swiglu_hidden_size(d_ff: int, multiple_of: int = 1) -> int:
    """The SwiGLU width with the parameters of a ReLU FFN of width ``d_ff``: ⅔·d_ff, rounded up."""
    check_positive(d_ff=d_ff, multiple_of=multiple_of)
    return multiple_of * math.ceil(2 * d_ff / 3 / multiple_of)
