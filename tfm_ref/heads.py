"""Chapter 2 — splitting the model width into heads, and sharing key/value heads (GQA/MQA).

Shapes: B batch · T positions · H query heads · G key/value heads · Dh head width.
"""
from __future__ import annotations

import torch

from .shapes import check_divisible

__all__ = ["split_heads", "merge_heads", "repeat_kv"]


def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """(B, T, H·Dh) → (B, H, T, Dh). A reshape alone would mix positions into heads: transpose."""
    if x.dim() != 3:
        raise ValueError(f"split_heads expects (B, T, H·Dh), got shape {tuple(x.shape)}")
    batch, length, width = x.shape
    check_divisible(width, n_heads, "the model width", "n_heads")
    return x.view(batch, length, n_heads, width // n_heads).transpose(1, 2)  # (B, H, T, Dh)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(B, H, T, Dh) → (B, T, H·Dh), the inverse of `split_heads` (the "concat" of the paper)."""
    if x.dim() != 4:
        raise ValueError(f"merge_heads expects (B, H, T, Dh), got shape {tuple(x.shape)}")
    batch, n_heads, length, head_dim = x.shape
    return x.transpose(1, 2).reshape(batch, length, n_heads * head_dim)  # (B, T, H·Dh)


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """(B, G, S, Dh) → (B, G·n_rep, S, Dh): each key/value head serves ``n_rep`` query heads.

    Equal to ``x.repeat_interleave(n_rep, dim=1)``: query head i uses key/value head
    ``i // n_rep``. (``x.repeat(1, n_rep, 1, 1)`` would pair them as ``i % G`` instead.)
    """
    if x.dim() != 4:
        raise ValueError(f"repeat_kv expects (B, G, S, Dh), got shape {tuple(x.shape)}")
    if n_rep < 1:
        raise ValueError(f"n_rep must be a positive integer, got {n_rep}")
    if n_rep == 1:
        return x
    batch, n_kv_heads, length, head_dim = x.shape
    expanded = x[:, :, None].expand(batch, n_kv_heads, n_rep, length, head_dim)  # (B, G, n_rep, S, Dh)
    return expanded.reshape(batch, n_kv_heads * n_rep, length, head_dim)  # (B, G·n_rep, S, Dh)
