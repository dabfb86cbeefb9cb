"""Chapter 3 — masks. One convention everywhere: a boolean mask, **True = may attend**.

This is the convention of ``F.scaled_dot_product_attention``. ``nn.MultiheadAttention`` and
``nn.Transformer`` use the opposite (True = blocked). The modules `from_torch` returns take
these masks: invert a mask written for PyTorch with ``~mask`` before passing it (the tests do).

Shapes: B batch · T query positions · S key positions.
"""
from __future__ import annotations

import torch

__all__ = ["causal_mask", "padding_mask", "key_mask"]


def causal_mask(n_q: int, n_k: int | None = None, device: torch.device | str | None = None) -> torch.Tensor:
    """Look-ahead mask: query i may attend to keys 0..i.

    When ``n_k > n_q`` the queries are the *last* ``n_q`` positions (decoding with a cache),
    so the triangle is aligned to the end: query i sees keys ``0 .. i + n_k - n_q``.

    Returns:
        bool tensor (n_q, n_k), lower-triangular.
    Raises:
        ValueError: non-positive sizes, or more queries than keys.
    """
    n_k = n_q if n_k is None else n_k
    if n_q <= 0 or n_k <= 0:
        raise ValueError(f"causal_mask needs positive sizes, got n_q={n_q}, n_k={n_k}")
    if n_k < n_q:
        raise ValueError(f"causal_mask needs n_k >= n_q (queries are the last positions), got n_q={n_q}, n_k={n_k}")
    return torch.ones(n_q, n_k, dtype=torch.bool, device=device).tril(diagonal=n_k - n_q)


def padding_mask(lengths: torch.Tensor | list[int], max_len: int) -> torch.Tensor:
    """True for real tokens, False for padding.

    Args:
        lengths: (B,) number of real tokens in each sequence.
        max_len: padded length S.
    Returns:
        bool tensor (B, S).
    Raises:
        ValueError: a length that is negative or larger than ``max_len``.
    """
    lengths = torch.as_tensor(lengths)
    if lengths.dim() != 1:
        raise ValueError(f"lengths must be 1-D (B,), got shape {tuple(lengths.shape)}")
    if lengths.numel() and (lengths.min() < 0 or lengths.max() > max_len):
        raise ValueError(f"lengths must lie in [0, max_len={max_len}], got {lengths.tolist()}")
    positions = torch.arange(max_len, device=lengths.device)  # (S,)
    return positions[None, :] < lengths[:, None]  # (B, S)


def key_mask(padding: torch.Tensor) -> torch.Tensor:
    """Turn a (B, S) padding mask into one that broadcasts over heads and queries: (B, 1, 1, S)."""
    if padding.dim() != 2:
        raise ValueError(f"a padding mask is (B, S), got shape {tuple(padding.shape)}")
    return padding[:, None, None, :]  # (B, 1, 1, S)
