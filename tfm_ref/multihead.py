"""Chapter 2 — multi-head attention, with grouped (GQA) and multi-query (MQA) key/value heads.

    MultiHead(X) = Concat(head₁, …, head_H) W_O,   head_i = Attention(X W_Qⁱ, C W_Kⁱ, C W_Vⁱ)

C is X itself (self-attention) or another sequence, the ``context`` (cross-attention: the
encoder's output). With ``n_kv_heads = G < H`` the key/value heads are shared by groups of
H/G query heads; G = H is MHA and G = 1 is MQA::

    MHA (G = H)        GQA (G = H/2)       MQA (G = 1)
    q: ■ ■ ■ ■         q: ■ ■ ■ ■          q: ■ ■ ■ ■
       │ │ │ │            └┬┘ └┬┘             └─┬┬─┘
    kv:■ ■ ■ ■         kv:  ■   ■          kv:   ■

Shapes: B batch · T query positions · S key positions · D model width · H query heads ·
G key/value heads · Dh = D / H head width.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .attention import ATTENTION_IMPLEMENTATIONS
from .heads import merge_heads, repeat_kv, split_heads
from .kv_cache import AttentionCache
from .positional import RotaryEmbedding
from .shapes import check_divisible, check_last_dim, check_positive

__all__ = ["MultiHeadAttention", "record_attention"]


class MultiHeadAttention(nn.Module):
    """Self- or cross-attention with H query heads and G = ``n_kv_heads`` key/value heads.

    Args:
        d_model: D. n_heads: H (divides D). n_kv_heads: G (divides H); None means H.
        bias: biases on the four projections. dropout: on the attention weights (training).
        attn_impl: "sdpa" (PyTorch's fused kernel) or "eager" (the readable reference).
        rope: a `RotaryEmbedding` to apply to queries and keys of self-attention.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        n_kv_heads: int | None = None,
        bias: bool = True,
        dropout: float = 0.0,
        *,
        attn_impl: str = "sdpa",
        rope: RotaryEmbedding | None = None,
    ) -> None:
        super().__init__()
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        check_positive(d_model=d_model, n_heads=n_heads, n_kv_heads=n_kv_heads)
        check_divisible(d_model, n_heads, "d_model", "n_heads")
        check_divisible(n_heads, n_kv_heads, "n_heads", "n_kv_heads")
        if attn_impl not in ATTENTION_IMPLEMENTATIONS:
            raise ValueError(f"attn_impl must be one of {sorted(ATTENTION_IMPLEMENTATIONS)}, got {attn_impl!r}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must lie in [0, 1), got {dropout}")
        self.d_model, self.n_heads, self.n_kv_heads = d_model, n_heads, n_kv_heads
        self.head_dim = d_model // n_heads
        self.dropout, self.attn_impl, self.rope = dropout, attn_impl, rope
        self.q_proj = nn.Linear(d_model, n_heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=bias)
        self.out_proj = nn.Linear(n_heads * self.head_dim, d_model, bias=bias)
        self.record_weights = False  # set by `record_attention` to keep the maps for plots
        self.last_weights: torch.Tensor | None = None

    def forward(
        self,
        x: torch.Tensor,
        context: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
        *,
        cache: AttentionCache | None = None,
        is_causal: bool = False,
    ) -> torch.Tensor:
        """Attend from ``x`` (B, T, D) to ``context`` (B, S, D), or to ``x`` itself.

        Args:
            mask: bool, broadcastable to (B, H, T, S); True = may attend.
            is_causal: also apply the causal mask (lets the fast path use causal kernels).
            cache: keys/values of earlier steps. Self-attention appends this step's keys and
                values; cross-attention computes them from ``context`` once and reuses them.
        Returns:
            (B, T, D).
        """
        check_last_dim(x, self.d_model, "x")
        if x.dim() != 3:
            raise ValueError(f"x must be (B, T, D), got shape {tuple(x.shape)}")
        if context is not None:
            check_last_dim(context, self.d_model, "context")
        cross = context is not None
        offset = 0 if cache is None or cross else cache.length

        # 1) project and split into heads
        if cross:
            q = self.q_proj(x)  # (B, T, H·Dh)
            if cache is not None and cache.k is not None:
                k = v = None  # computed at the first step, kept in the cache
            else:
                k, v = self.k_proj(context), self.v_proj(context)  # (B, S, G·Dh) each
        else:
            q, k, v = self._project_self(x)
        q = split_heads(q, self.n_heads)  # (B, H, T, Dh)
        if k is None:
            k, v = cache.k, cache.v  # (B, G, S, Dh)
        else:
            k = split_heads(k, self.n_kv_heads)  # (B, G, S, Dh)
            v = split_heads(v, self.n_kv_heads)  # (B, G, S, Dh)
            if self.rope is not None and not cross:
                k = self.rope(k, offset)
            if cache is not None:
                k, v = cache.append(k, v)  # (B, G, S_past + S, Dh)
        if self.rope is not None and not cross:
            q = self.rope(q, offset)

        # 2) attend: each group of H/G query heads shares one key/value head
        n_rep = self.n_heads // self.n_kv_heads
        k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)  # (B, H, S, Dh)
        attend = ATTENTION_IMPLEMENTATIONS[self.attn_impl]
        dropout_p = self.dropout if self.training else 0.0
        if self.record_weights:
            out, self.last_weights = attend(q, k, v, mask, return_weights=True, dropout_p=dropout_p, is_causal=is_causal)
        else:
            out = attend(q, k, v, mask, dropout_p=dropout_p, is_causal=is_causal)  # (B, H, T, Dh)

        # 3) concatenate the heads and mix them
        return self.out_proj(merge_heads(out))  # (B, T, D)

    def _project_self(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q_proj(x), k_proj(x), v_proj(x) as one matrix product: the same numbers, one kernel."""
        projections = (self.q_proj, self.k_proj, self.v_proj)
        weight = torch.cat([p.weight for p in projections])  # (H·Dh + 2·G·Dh, D)
        bias = None if self.q_proj.bias is None else torch.cat([p.bias for p in projections])
        qkv = F.linear(x, weight, bias)  # (B, T, H·Dh + 2·G·Dh)
        return qkv.split([p.out_features for p in projections], dim=-1)


class record_attention:
    """Context manager that keeps every attention map computed inside it.

    >>> with record_attention(model) as maps:
    ...     model(src, tgt)
    >>> maps["decoder.layers.0.cross_attn"].shape   # (B, H, T, S)
    """

    def __init__(self, model: nn.Module) -> None:
        self.modules = {name: m for name, m in model.named_modules() if isinstance(m, MultiHeadAttention)}
        self.maps: dict[str, torch.Tensor] = {}

    def __enter__(self) -> dict[str, torch.Tensor]:
        for module in self.modules.values():
            module.record_weights, module.last_weights = True, None
        return self.maps

    def __exit__(self, *exc) -> None:
        for name, module in self.modules.items():
            if module.last_weights is not None:
                self.maps[name] = module.last_weights.detach()
            module.record_weights, module.last_weights = False, None
