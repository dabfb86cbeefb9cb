"""Chapter 8 — whole models: encoder and decoder stacks, the encoder-decoder Transformer, and a
decoder-only language model, all built from one `TransformerConfig`.

    src ids ─ embed·√D + PE ─ Encoder ──────────────┐ memory (B, S, D)
    tgt ids ─ embed·√D + PE ─ Decoder (masked self, cross) ─ Linear ─ logits (B, T, V)

Shapes: B batch · S source positions · T target positions · D model width · V vocabulary.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from .blocks import DecoderBlock, EncoderBlock, make_norm
from .config import TransformerConfig
from .kv_cache import KVCache
from .masks import key_mask
from .positional import LearnedPositionalEncoding, RotaryEmbedding, SinusoidalPositionalEncoding

__all__ = ["Encoder", "Decoder", "EncoderDecoderCore", "Transformer", "DecoderOnlyLM", "TokenEmbedding"]


class Encoder(nn.Module):
    """A stack of encoder blocks, with an optional final norm (needed after Pre-Norm blocks)."""

    def __init__(self, layers: list[EncoderBlock], final_norm: nn.Module | None = None) -> None:
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.final_norm = final_norm

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x, mask)  # (B, S, D)
        return x if self.final_norm is None else self.final_norm(x)


class Decoder(nn.Module):
    """A stack of decoder blocks; ``cache`` holds every layer's keys and values when decoding."""

    def __init__(self, layers: list[DecoderBlock], final_norm: nn.Module | None = None) -> None:
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.final_norm = final_norm

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor | None = None,
        self_mask: torch.Tensor | None = None,
        cross_mask: torch.Tensor | None = None,
        cache: KVCache | None = None,
        *,
        causal: bool = False,
    ) -> torch.Tensor:
        for i, layer in enumerate(self.layers):
            x = layer(
                x, memory, self_mask, cross_mask,
                self_cache=None if cache is None else cache.self_attn[i],
                cross_cache=None if cache is None else cache.cross_attn[i],
                causal=causal,
            )  # (B, T, D)
        return x if self.final_norm is None else self.final_norm(x)


class EncoderDecoderCore(nn.Module):
    """Encoder + decoder on already-embedded inputs: what ``nn.Transformer`` computes.

    Masks follow the tfm_ref convention (bool, True = may attend): ``src_mask`` broadcasts to
    (B, H, S, S), ``tgt_mask`` to (B, H, T, T), ``memory_mask`` to (B, H, T, S).
    """

    def __init__(self, encoder: Encoder, decoder: Decoder) -> None:
        super().__init__()
        self.encoder, self.decoder = encoder, decoder

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None) -> torch.Tensor:
        memory = self.encoder(src, src_mask)  # (B, S, D)
        return self.decoder(tgt, memory, tgt_mask, memory_mask)  # (B, T, D)


class TokenEmbedding(nn.Module):
    """Token ids → vectors, scaled by √D so they are not drowned by the positional encoding."""

    def __init__(self, vocab_size: int, d_model: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(vocab_size, d_model) * d_model**-0.5)
        self.scale = math.sqrt(d_model)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        if ids.dtype not in (torch.int32, torch.int64):
            raise ValueError(f"token ids must be integers, got {ids.dtype}")
        # the range check reads values (a sync on GPU, a graph break when compiled): eager only
        if not torch.compiler.is_compiling() and ids.numel() and (ids.min() < 0 or ids.max() >= self.weight.shape[0]):
            raise ValueError(f"token ids must lie in [0, vocab_size={self.weight.shape[0]}), got {ids.min()}..{ids.max()}")
        return nn.functional.embedding(ids, self.weight) * self.scale  # (B, T, D)


def _positional(config: TransformerConfig) -> nn.Module | None:
    if config.positional == "sinusoidal":
        return SinusoidalPositionalEncoding(config.d_model, config.max_len)
    if config.positional == "learned":
        return LearnedPositionalEncoding(config.d_model, config.max_len)
    return None  # RoPE acts inside attention


class _LanguageModel(nn.Module):
    """What both model families share: embeddings, positions, dropout and the output head."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.config = config
        self.positional = _positional(config)
        self.rope = RotaryEmbedding(config.head_dim, config.rope_base) if config.positional == "rope" else None
        self.embed_dropout = nn.Dropout(config.dropout)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)

    def _embed(self, embedding: TokenEmbedding, ids: torch.Tensor, offset: int = 0) -> torch.Tensor:
        if offset + ids.shape[1] > self.config.max_len:
            raise ValueError(f"sequence of {offset + ids.shape[1]} positions is longer than max_len={self.config.max_len}")
        x = embedding(ids)  # (B, T, D)
        if self.positional is not None:
            x = self.positional(x, offset)
        return self.embed_dropout(x)

    def _decoder(self, n_layers: int, cross_attention: bool) -> Decoder:
        c = self.config
        layers = [
            DecoderBlock(c.d_model, c.n_heads, c.d_ff, **c.block_kwargs(), rope=self.rope, cross_attention=cross_attention)
            for _ in range(n_layers)
        ]
        return Decoder(layers, make_norm(c.norm, c.d_model, c.norm_eps) if c.norm_first else None)

    def new_cache(self) -> KVCache:
        """An empty key/value cache for step-by-step decoding."""
        return KVCache(self.config.n_decoder_layers)


class Transformer(_LanguageModel):
    """The encoder-decoder Transformer of Vaswani et al. (2017)."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__(config)
        c = config
        self.src_embed = TokenEmbedding(c.vocab_size, c.d_model)
        self.tgt_embed = self.src_embed if c.tie_embeddings else TokenEmbedding(c.vocab_size, c.d_model)
        if c.tie_embeddings:
            self.lm_head.weight = self.tgt_embed.weight  # one matrix for input and output tokens
        encoder_layers = [EncoderBlock(c.d_model, c.n_heads, c.d_ff, **c.block_kwargs(), rope=self.rope)
                          for _ in range(c.n_encoder_layers)]
        self.encoder = Encoder(encoder_layers, make_norm(c.norm, c.d_model, c.norm_eps) if c.norm_first else None)
        self.decoder = self._decoder(c.n_decoder_layers, cross_attention=True)

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:
        """src (B, S) ids; src_mask (B, S) bool, True = real token → memory (B, S, D)."""
        mask = None if src_mask is None else key_mask(src_mask)  # (B, 1, 1, S)
        return self.encoder(self._embed(self.src_embed, src), mask)

    def decode(
        self, tgt: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor | None = None, cache: KVCache | None = None
    ) -> torch.Tensor:
        """tgt (B, T) ids (only the new ones when a cache holds the past) → logits (B, T, V)."""
        past = 0 if cache is None else cache.length
        cross_mask = None if src_mask is None else key_mask(src_mask)  # (B, 1, 1, S)
        x = self._embed(self.tgt_embed, tgt, offset=past)
        # causal: the triangle is applied inside attention (aligned to the end when cached)
        return self.lm_head(self.decoder(x, memory, None, cross_mask, cache, causal=True))  # (B, T, V)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Teacher forcing: ``tgt`` is the target shifted right (BOS first) → logits (B, T, V)."""
        return self.decode(tgt, self.encode(src, src_mask), src_mask)


class DecoderOnlyLM(_LanguageModel):
    """A decoder-only language model (GPT, Llama): decoder blocks without cross-attention."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__(config)
        c = config
        self.embed = TokenEmbedding(c.vocab_size, c.d_model)
        if c.tie_embeddings:
            self.lm_head.weight = self.embed.weight
        self.decoder = self._decoder(c.n_decoder_layers, cross_attention=False)

    def forward(self, idx: torch.Tensor, cache: KVCache | None = None, pad_mask: torch.Tensor | None = None) -> torch.Tensor:
        """idx (B, T) ids → logits (B, T, V).

        cache: keys/values of earlier positions (then ``idx`` holds only the new tokens).
        pad_mask: (B, past + T) bool, True = real token, for left-padded prompts.
        """
        past = 0 if cache is None else cache.length
        n_new = idx.shape[1]
        mask = None
        if pad_mask is not None:
            if pad_mask.shape != (idx.shape[0], past + n_new):
                raise ValueError(f"pad_mask must be (B, past + T) = {(idx.shape[0], past + n_new)}, got {tuple(pad_mask.shape)}")
            mask = key_mask(pad_mask)  # (B, 1, 1, past + T), combined with the causal triangle inside
        x = self._embed(self.embed, idx, offset=past)
        return self.lm_head(self.decoder(x, None, mask, None, cache, causal=True))  # (B, T, V)
