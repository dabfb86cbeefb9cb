"""Chapter 7 — normalisation over the feature axis of each position.

    LayerNorm(x) = (x − mean(x)) / √(var(x) + ε) · γ + β      var biased (divide by D)
    RMSNorm(x)   = x / √(mean(x²) + ε) · γ                      no centring, no β

Both normalise every position on its own, over the last axis D (BatchNorm would instead
mix the positions and sequences of a batch). `layer_norm` and `rms_norm` are the readable
definitions, computed in at least float32 and cast back; the modules call PyTorch's fused
kernels, which compute the same (`tests/test_norms.py`).

Shapes: (…, D).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .precision import at_least_float32
from .shapes import check_last_dim, check_positive

__all__ = ["layer_norm", "rms_norm", "LayerNorm", "RMSNorm", "NORMS"]


def layer_norm(x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, eps: float = 1e-5) -> torch.Tensor:
    xf = at_least_float32(x)
    mean = xf.mean(dim=-1, keepdim=True)
    var = (xf - mean).pow(2).mean(dim=-1, keepdim=True)  # biased, as the paper and nn.LayerNorm
    y = (xf - mean) * torch.rsqrt(var + eps)  # ε inside the square root
    if weight is not None:
        y = y * weight.to(xf.dtype)
    if bias is not None:
        y = y + bias.to(xf.dtype)
    return y.to(x.dtype)


def rms_norm(x: torch.Tensor, weight: torch.Tensor | None, eps: float = 1e-6) -> torch.Tensor:
    xf = at_least_float32(x)
    y = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)  # no mean subtracted
    if weight is not None:
        y = y * weight.to(xf.dtype)
    return y.to(x.dtype)


class LayerNorm(nn.Module):
    def __init__(self, d: int, eps: float = 1e-5, bias: bool = True) -> None:
        super().__init__()
        check_positive(d=d, eps=eps)
        self.d, self.eps = d, eps
        self.weight = nn.Parameter(torch.ones(d))
        self.bias = nn.Parameter(torch.zeros(d)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_last_dim(x, self.d, "LayerNorm input")
        return F.layer_norm(x, (self.d,), self.weight, self.bias, self.eps)  # = layer_norm(x, …), fused


class RMSNorm(nn.Module):
    def __init__(self, d: int, eps: float = 1e-6) -> None:
        super().__init__()
        check_positive(d=d, eps=eps)
        self.d, self.eps = d, eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_last_dim(x, self.d, "RMSNorm input")
        return F.rms_norm(x, (self.d,), self.weight, self.eps)  # = rms_norm(x, …), fused


NORMS = {"layernorm": LayerNorm, "rmsnorm": RMSNorm}
