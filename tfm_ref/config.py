"""Chapter 8 — one frozen, validated configuration for whole models.

The defaults are the 2017 base model (Vaswani et al., Table 3): d_model 512, 8 heads, 6+6
layers, d_ff 2048, dropout 0.1, Post-Norm LayerNorm, ReLU, sinusoidal positions, one shared
source/target vocabulary with tied embeddings. The same class reaches a Llama-style decoder:

    TransformerConfig(vocab, norm="rmsnorm", norm_first=True, ffn="swiglu", positional="rope",
                      n_kv_heads=8, bias=False, tie_embeddings=False)
"""
from __future__ import annotations

from dataclasses import dataclass

from .attention import ATTENTION_IMPLEMENTATIONS
from .blocks import FFN_KINDS
from .norms import NORMS
from .shapes import check_divisible

__all__ = ["TransformerConfig", "POSITIONAL_KINDS"]

POSITIONAL_KINDS = ("sinusoidal", "learned", "rope")


@dataclass(frozen=True)
class TransformerConfig:
    vocab_size: int
    d_model: int = 512
    n_heads: int = 8
    n_kv_heads: int | None = None  # None: as many as n_heads (MHA); 1: MQA; in between: GQA
    n_encoder_layers: int = 6
    n_decoder_layers: int = 6
    d_ff: int = 2048  # for swiglu, the hidden width itself (use swiglu_hidden_size for ⅔ rule)
    dropout: float = 0.1
    bias: bool = True
    norm: str = "layernorm"
    norm_first: bool = False  # False: Post-Norm as in 2017; True: Pre-Norm, stable when deep
    ffn: str = "relu"
    positional: str = "sinusoidal"
    max_len: int = 512  # longest sequence the positional table covers
    tie_embeddings: bool = True  # share source/target embeddings and the output head
    norm_eps: float = 1e-5
    rope_base: float = 10000.0
    attn_impl: str = "sdpa"  # "eager" keeps the readable path, e.g. to look at weights

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_model", "n_heads", "d_ff", "max_len"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) <= 0:
                raise ValueError(f"{name} must be a positive integer, got {getattr(self, name)!r}")
        for name in ("n_encoder_layers", "n_decoder_layers"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 0:
                raise ValueError(f"{name} must be a non-negative integer, got {getattr(self, name)!r}")
        check_divisible(self.d_model, self.n_heads, "d_model", "n_heads")
        check_divisible(self.n_heads, self.kv_heads, "n_heads", "n_kv_heads")
        if self.norm not in NORMS:
            raise ValueError(f"norm must be one of {sorted(NORMS)}, got {self.norm!r}")
        if self.ffn not in FFN_KINDS:
            raise ValueError(f"ffn must be one of {list(FFN_KINDS)}, got {self.ffn!r}")
        if self.positional not in POSITIONAL_KINDS:
            raise ValueError(f"positional must be one of {list(POSITIONAL_KINDS)}, got {self.positional!r}")
        if self.attn_impl not in ATTENTION_IMPLEMENTATIONS:
            raise ValueError(f"attn_impl must be one of {sorted(ATTENTION_IMPLEMENTATIONS)}, got {self.attn_impl!r}")
        if self.positional == "sinusoidal" and self.d_model % 2:
            raise ValueError(f"sinusoidal positional encoding needs an even d_model, got {self.d_model}")
        if self.positional == "rope" and self.head_dim % 2:
            raise ValueError(f"RoPE needs an even head width, got d_model / n_heads = {self.head_dim}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must lie in [0, 1), got {self.dropout}")
        if self.norm_eps <= 0:
            raise ValueError(f"norm_eps must be positive, got {self.norm_eps}")

    @property
    def kv_heads(self) -> int:
        return self.n_heads if self.n_kv_heads is None else self.n_kv_heads

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    def block_kwargs(self) -> dict:
        """The keyword arguments `EncoderBlock` and `DecoderBlock` take from this config."""
        return dict(
            dropout=self.dropout, n_kv_heads=self.n_kv_heads, bias=self.bias, norm=self.norm,
            norm_eps=self.norm_eps, norm_first=self.norm_first, ffn=self.ffn, attn_impl=self.attn_impl,
        )
