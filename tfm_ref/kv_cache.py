"""Chapters 2 and 8 — the key/value cache used when decoding one token at a time.

Shapes: B batch · G key/value heads · S positions seen so far · Dh head width.
"""
from __future__ import annotations

import torch

__all__ = ["AttentionCache", "KVCache", "kv_cache_bytes"]


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
