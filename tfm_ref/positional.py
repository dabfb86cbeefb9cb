"""Chapter 5 — positional information: sinusoidal and learned encodings, and RoPE.

Sinusoidal (Vaswani et al. 2017, §3.5), for position p and pair index i = 0 … D/2 − 1:

    PE[p, 2i]   = sin(p / 10000^(2i/D))
    PE[p, 2i+1] = cos(p / 10000^(2i/D))

RoPE (Su et al. 2021) rotates each pair of query/key features by an angle proportional to
the position, so q·k depends on the offset between positions only. We pair feature j with
feature j + Dh/2 ("rotate half"), the layout of GPT-NeoX and Llama.

Shapes: B batch · T positions · D model width · H heads · Dh head width.
"""
from __future__ import annotations

import torch
from torch import nn

from .precision import at_least_float32
from .shapes import check_positive

__all__ = [
    "sinusoidal_positional_encoding",
    "SinusoidalPositionalEncoding",
    "LearnedPositionalEncoding",
    "RotaryEmbedding",
    "apply_rope",
]


def sinusoidal_positional_encoding(
    n_positions: int, d_model: int, *, base: float = 10000.0, device=None, dtype=torch.float32
) -> torch.Tensor:
    """The table PE of the paper: (n_positions, d_model).

    Raises:
        ValueError: odd ``d_model`` (sin and cos come in pairs), non-positive sizes.
    """
    check_positive(n_positions=n_positions, d_model=d_model)
    if d_model % 2:
        raise ValueError(f"sinusoidal positional encoding needs an even d_model, got {d_model}")
    position = torch.arange(n_positions, device=device, dtype=torch.float64)[:, None]  # (P, 1)
    two_i = torch.arange(0, d_model, 2, device=device, dtype=torch.float64)  # (D/2,)
    angle = position / base ** (two_i / d_model)  # (P, D/2)
    pe = torch.empty(n_positions, d_model, device=device, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)  # even features: sin
    pe[:, 1::2] = torch.cos(angle)  # odd features: cos
    return pe.to(dtype)


class _AddedPositionalEncoding(nn.Module):
    """x + PE[offset : offset + T]; ``offset`` is the number of positions already decoded."""

    max_len: int

    def table(self) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        length = x.shape[-2]
        if offset + length > self.max_len:
            raise ValueError(f"sequence of {offset + length} positions is longer than max_len={self.max_len}")
        return x + self.table()[offset : offset + length].to(x.dtype)  # (B, T, D)


class SinusoidalPositionalEncoding(_AddedPositionalEncoding):
    def __init__(self, d_model: int, max_len: int) -> None:
        super().__init__()
        self.max_len = max_len
        self.register_buffer("pe", sinusoidal_positional_encoding(max_len, d_model), persistent=False)

    def table(self) -> torch.Tensor:
        return self.pe


class LearnedPositionalEncoding(_AddedPositionalEncoding):
    """One trained vector per position (BERT, GPT-2); cannot go past ``max_len``."""

    def __init__(self, d_model: int, max_len: int) -> None:
        super().__init__()
        check_positive(d_model=d_model, max_len=max_len)
        self.max_len = max_len
        self.weight = nn.Parameter(torch.randn(max_len, d_model) * 0.02)

    def table(self) -> torch.Tensor:
        return self.weight


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    first, second = x.chunk(2, dim=-1)
    return torch.cat([-second, first], dim=-1)


def apply_rope(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """Rotate (…, T, Dh) features by angles ``position · base^(−2j/Dh)``; ``positions`` is (T,)."""
    head_dim = x.shape[-1]
    if head_dim % 2:
        raise ValueError(f"RoPE needs an even head width, got {head_dim}")
    xf = at_least_float32(x)
    inv_freq = base ** (-torch.arange(0, head_dim, 2, device=x.device, dtype=xf.dtype) / head_dim)  # (Dh/2,)
    angle = positions.to(xf.dtype)[:, None] * inv_freq[None, :]  # (T, Dh/2)
    angle = torch.cat([angle, angle], dim=-1)  # (T, Dh): feature j and j + Dh/2 share an angle
    return (xf * angle.cos() + _rotate_half(xf) * angle.sin()).to(x.dtype)


class RotaryEmbedding(nn.Module):
    """RoPE for queries and keys (B, H, T, Dh) starting at position ``offset``."""

    def __init__(self, head_dim: int, base: float = 10000.0) -> None:
        super().__init__()
        if head_dim % 2:
            raise ValueError(f"RoPE needs an even head width, got {head_dim}")
        self.head_dim, self.base = head_dim, base

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        positions = torch.arange(offset, offset + x.shape[-2], device=x.device)  # (T,)
        return apply_rope(x, positions, self.base)
