"""Chapters 2, 8 and 9 — the key/value cache used when decoding one token at a time.

Shapes: B batch · H query heads · G key/value heads · S positions seen so far ·
T new positions · Dh head width.
"""
from __future__ import annotations

import torch

from .attention import scaled_dot_product_attention
from .heads import repeat_kv

__all__ = ["AttentionCache", "KVCache", "kv_cache_bytes", "cached_attention"]


def kv_cache_bytes(
    n_layers: int, n_kv_heads: int, head_dim: int, seq_len: int, batch: int = 1, bytes_per_elem: int = 2
) -> int:
    """Memory of the cache: a K and a V tensor (B, G, S, Dh) in every layer.

    ``2 · n_layers · batch · n_kv_heads · seq_len · head_dim · bytes_per_elem``
    (bytes_per_elem 2 for fp16/bf16). MQA and GQA shrink it by ``n_heads / n_kv_heads``.
    """
    for name, value in dict(n_layers=n_layers, n_kv_heads=n_kv_heads, head_dim=head_dim, seq_len=seq_len,
                            batch=batch, bytes_per_elem=bytes_per_elem).items():
        if value < 0:
            raise ValueError(f"{name} must be non-negative, got {value}")
    return 2 * n_layers * batch * n_kv_heads * seq_len * head_dim * bytes_per_elem


def cached_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One decoding step: append the new positions' keys and values to the cache, then attend.

    The new positions are the last T of S + T, so query i sees the S cached positions and the
    new ones up to itself (the causal mask aligned to the end). The output equals the last T
    rows of causal attention over all S + T positions, and the returned cache equals the keys
    and values of all of them.

    Args:
        q: (B, H, T, Dh) the new positions' queries.  k, v: (B, G, T, Dh) their keys and values.
        k_cache, v_cache: (B, G, S, Dh) the earlier positions' (S = 0 at the first step).
    Returns:
        out (B, H, T, Dh), k_cache (B, G, S + T, Dh), v_cache (B, G, S + T, Dh).
    Raises:
        ValueError: shapes that do not fit together, or H not divisible by G.
    """
    if q.dim() != 4 or any(t.dim() != 4 for t in (k, v, k_cache, v_cache)):
        raise ValueError("q, k, v, k_cache and v_cache must all be 4-D (B, heads, positions, Dh)")
    batch, n_heads, length, head_dim = q.shape
    if k.shape != v.shape or k.shape[0] != batch or k.shape[2] != length or k.shape[3] != head_dim:
        raise ValueError(f"k and v must be (B, G, T, Dh) = (B={batch}, G, T={length}, Dh={head_dim}) like q, "
                         f"got k {tuple(k.shape)} and v {tuple(v.shape)}")
    if k_cache.shape != v_cache.shape or k_cache.shape[:2] != k.shape[:2] or k_cache.shape[3] != head_dim:
        raise ValueError(f"k_cache and v_cache must be (B, G, S, Dh) = {(batch, k.shape[1], 'S', head_dim)}, "
                         f"got {tuple(k_cache.shape)} and {tuple(v_cache.shape)}")
    if n_heads % k.shape[1]:
        raise ValueError(f"the query heads ({n_heads}) are not divisible by the key/value heads ({k.shape[1]})")
    k_cache = torch.cat([k_cache, k], dim=-2)  # (B, G, S + T, Dh): the newest positions last
    v_cache = torch.cat([v_cache, v], dim=-2)  # (B, G, S + T, Dh)
    n_rep = n_heads // k.shape[1]
    out = scaled_dot_product_attention(q, repeat_kv(k_cache, n_rep), repeat_kv(v_cache, n_rep), is_causal=True)
    return out, k_cache, v_cache  # the cache keeps G heads: repeating is for attending only


class AttentionCache:
    """Keys and values one attention module has seen, each (B, G, S, Dh).

    Self-attention appends one step at a time; cross-attention stores the encoder's keys and
    values once and reuses them.
    """

    def __init__(self) -> None:
        self.k: torch.Tensor | None = None
        self.v: torch.Tensor | None = None

    @property
    def length(self) -> int:
        return 0 if self.k is None else self.k.shape[-2]

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.k is None:
            self.k, self.v = k, v
        else:
            self.k = torch.cat([self.k, k], dim=-2)  # (B, G, S + T, Dh)
            self.v = torch.cat([self.v, v], dim=-2)
        return self.k, self.v

    def reorder(self, index: torch.Tensor) -> None:
        """Keep batch rows ``index`` (beam search reorders its hypotheses every step)."""
        if self.k is not None:
            self.k, self.v = self.k.index_select(0, index), self.v.index_select(0, index)


class KVCache:
    """A decoder stack's cache: a self-attention and a cross-attention cache per layer."""

    def __init__(self, n_layers: int) -> None:
        self.self_attn = [AttentionCache() for _ in range(n_layers)]
        self.cross_attn = [AttentionCache() for _ in range(n_layers)]

    @property
    def length(self) -> int:
        """Number of target positions already decoded."""
        return self.self_attn[0].length if self.self_attn else 0

    def reorder(self, index: torch.Tensor) -> None:
        for cache in (*self.self_attn, *self.cross_attn):
            cache.reorder(index)
