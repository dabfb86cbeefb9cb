"""tfm_ref — the reference Transformer of "Transformer, Piece by Piece".

Every exercise of the course is graded against these functions and modules (the capstone's training step
too: `tfm_ref.training`); the lab, `tfm_lab`, trains the chapter models with them. PyTorch only. Masks are
boolean everywhere: **True = may attend**.
"""
from .attention import scaled_dot_product_attention, sdpa_attention, softmax
from .beam_search import beam_search, sequence_log_prob
from .blocks import DecoderBlock, EncoderBlock
from .config import TransformerConfig
from .decoding import greedy_decode, lm_generate
from .feedforward import FeedForward, SwiGLU, swiglu_hidden_size
from .from_torch import from_torch
from .heads import merge_heads, repeat_kv, split_heads
from .kv_cache import AttentionCache, KVCache, cached_attention, kv_cache_bytes
from .losses import label_smoothed_cross_entropy
from .masks import causal_mask, key_mask, padding_mask
from .multihead import MultiHeadAttention, record_attention
from .norms import LayerNorm, RMSNorm, layer_norm, rms_norm
from .positional import (
    LearnedPositionalEncoding,
    RotaryEmbedding,
    SinusoidalPositionalEncoding,
    apply_rope,
    sinusoidal_positional_encoding,
)
from .schedule import noam_lr, warmup_cosine_lr
from .tiling import online_softmax, tiled_attention
from .transformer import Decoder, DecoderOnlyLM, Encoder, EncoderDecoderCore, TokenEmbedding, Transformer

__all__ = [
    "softmax", "scaled_dot_product_attention", "sdpa_attention",
    "online_softmax", "tiled_attention",
    "causal_mask", "padding_mask", "key_mask",
    "split_heads", "merge_heads", "repeat_kv",
    "kv_cache_bytes", "AttentionCache", "KVCache", "cached_attention",
    "MultiHeadAttention", "record_attention",
    "sinusoidal_positional_encoding", "SinusoidalPositionalEncoding", "LearnedPositionalEncoding",
    "RotaryEmbedding", "apply_rope",
    "FeedForward", "SwiGLU", "swiglu_hidden_size",
    "LayerNorm", "RMSNorm", "layer_norm", "rms_norm",
    "EncoderBlock", "DecoderBlock",
    "TransformerConfig", "Encoder", "Decoder", "EncoderDecoderCore", "Transformer", "DecoderOnlyLM", "TokenEmbedding",
    "greedy_decode", "lm_generate", "beam_search", "sequence_log_prob",
    "noam_lr", "warmup_cosine_lr", "label_smoothed_cross_entropy",
    "from_torch",
]
