"""Chapters 7 and 8 — encoder and decoder blocks: attention and FFN sublayers with residuals.

    Post-Norm (2017):  x = Norm(x + Dropout(Sublayer(x)))
    Pre-Norm:          x = x + Dropout(Sublayer(Norm(x)))

Pre-Norm keeps an identity path from the output back to the input, which is why deep
Pre-Norm stacks train without warmup (Xiong et al. 2020); Post-Norm is the paper's layout.

Shapes: B batch · T target positions · S source positions · D model width.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from .feedforward import ACTIVATIONS, FeedForward, SwiGLU
from .kv_cache import AttentionCache
from .multihead import MultiHeadAttention
from .norms import NORMS
from .positional import RotaryEmbedding

__all__ = ["EncoderBlock", "DecoderBlock", "Residual", "make_ffn", "make_norm"]

FFN_KINDS = (*ACTIVATIONS, "swiglu")


def make_ffn(kind: str, d_model: int, d_ff: int, dropout: float, bias: bool) -> nn.Module:
    """"relu"/"gelu": `FeedForward` of width d_ff; "swiglu": `SwiGLU` of hidden width d_ff."""
    if kind == "swiglu":
        return SwiGLU(d_model, d_ff, bias=bias, dropout=dropout)
    if kind not in ACTIVATIONS:
        raise ValueError(f"ffn must be one of {list(FFN_KINDS)}, got {kind!r}")
    return FeedForward(d_model, d_ff, activation=kind, dropout=dropout, bias=bias)


def make_norm(kind: str, d_model: int, eps: float) -> nn.Module:
    if kind not in NORMS:
        raise ValueError(f"norm must be one of {sorted(NORMS)}, got {kind!r}")
    return NORMS[kind](d_model, eps=eps)


class Residual(nn.Module):
    """One sublayer wrapped in its residual connection, normalised before or after."""

    def __init__(self, norm: nn.Module, dropout: float, norm_first: bool) -> None:
        super().__init__()
        self.norm, self.dropout, self.norm_first = norm, nn.Dropout(dropout), norm_first

    def forward(self, x: torch.Tensor, sublayer: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        if self.norm_first:
            return x + self.dropout(sublayer(self.norm(x)))
        return self.norm(x + self.dropout(sublayer(x)))


class EncoderBlock(nn.Module):
    """Self-attention then FFN, each in a residual connection.

    Args:
        d_model, n_heads, d_ff: widths. dropout: on attention weights, FFN hidden and residuals.
        n_kv_heads: key/value heads (GQA/MQA); None = n_heads. bias: on every linear map.
        norm: "layernorm" or "rmsnorm". norm_eps: ε. norm_first: Pre-Norm instead of Post-Norm.
        ffn: "relu", "gelu" or "swiglu". attn_impl: "sdpa" or "eager". rope: RoPE for attention.
    """

    def __init__(
        self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1, *, n_kv_heads: int | None = None,
        bias: bool = True, norm: str = "layernorm", norm_eps: float = 1e-5, norm_first: bool = False,
        ffn: str = "relu", attn_impl: str = "sdpa", rope: RotaryEmbedding | None = None,
    ) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, n_kv_heads, bias, dropout, attn_impl=attn_impl, rope=rope)
        self.ffn = make_ffn(ffn, d_model, d_ff, dropout, bias)
        self.attn_residual = Residual(make_norm(norm, d_model, norm_eps), dropout, norm_first)
        self.ffn_residual = Residual(make_norm(norm, d_model, norm_eps), dropout, norm_first)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """x (B, S, D); mask bool broadcastable to (B, H, S, S), True = may attend → (B, S, D)."""
        x = self.attn_residual(x, lambda h: self.self_attn(h, mask=mask))
        return self.ffn_residual(x, self.ffn)


class DecoderBlock(nn.Module):
    """Masked self-attention, cross-attention to the encoder's output, then FFN.

    Same arguments as `EncoderBlock`, plus ``cross_attention``: False gives the block of a
    decoder-only model (GPT, Llama), which has no encoder to attend to.
    """

    def __init__(
        self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1, *, n_kv_heads: int | None = None,
        bias: bool = True, norm: str = "layernorm", norm_eps: float = 1e-5, norm_first: bool = False,
        ffn: str = "relu", attn_impl: str = "sdpa", rope: RotaryEmbedding | None = None,
        cross_attention: bool = True,
    ) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, n_kv_heads, bias, dropout, attn_impl=attn_impl, rope=rope)
        self.self_residual = Residual(make_norm(norm, d_model, norm_eps), dropout, norm_first)
        self.cross_attn = None
        if cross_attention:
            self.cross_attn = MultiHeadAttention(d_model, n_heads, n_kv_heads, bias, dropout, attn_impl=attn_impl)
            self.cross_residual = Residual(make_norm(norm, d_model, norm_eps), dropout, norm_first)
        self.ffn = make_ffn(ffn, d_model, d_ff, dropout, bias)
        self.ffn_residual = Residual(make_norm(norm, d_model, norm_eps), dropout, norm_first)

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor | None = None,
        self_mask: torch.Tensor | None = None,
        cross_mask: torch.Tensor | None = None,
        *,
        self_cache: AttentionCache | None = None,
        cross_cache: AttentionCache | None = None,
        causal: bool = False,
    ) -> torch.Tensor:
        """x (B, T, D); memory (B, S, D), the encoder output.

        self_mask: bool broadcastable to (B, H, T, T_past + T), e.g. padding.
        causal: self-attention is also causal (the decoder's usual case; no mask tensor needed).
        cross_mask: bool broadcastable to (B, H, T, S) — the source padding.
        Returns (B, T, D).
        """
        x = self.self_residual(x, lambda h: self.self_attn(h, mask=self_mask, cache=self_cache, is_causal=causal))
        if self.cross_attn is not None:
            if memory is None:
                raise ValueError("this decoder block has cross-attention: pass the encoder output as memory")
            x = self.cross_residual(x, lambda h: self.cross_attn(h, memory, mask=cross_mask, cache=cross_cache))
        elif memory is not None:
            raise ValueError("this decoder block has no cross-attention (decoder-only); memory must be None")
        return self.ffn_residual(x, self.ffn)
