"""The tfm_ref equivalent, with the same weights, of PyTorch's own Transformer modules.

This is how the course proves its model is the real one: `tests/test_from_torch.py` feeds
both the same input and compares. Only ``batch_first=True`` modules are accepted, because
tfm_ref is batch-first throughout.

Remember the masks: PyTorch's modules block where a mask is True; tfm_ref attends where it
is True. The returned modules take tfm_ref masks.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .blocks import DecoderBlock, EncoderBlock
from .multihead import MultiHeadAttention
from .norms import LayerNorm
from .transformer import Decoder, Encoder, EncoderDecoderCore

__all__ = ["from_torch"]


def from_torch(module: nn.Module) -> nn.Module:
    """Convert ``nn.MultiheadAttention``, ``nn.TransformerEncoderLayer``,
    ``nn.TransformerDecoderLayer`` or ``nn.Transformer`` (batch_first) to tfm_ref.

    Returns:
        `MultiHeadAttention`, `EncoderBlock`, `DecoderBlock`, or `EncoderDecoderCore` (call it as
        ``core(src, tgt, src_mask=None, tgt_mask=None, memory_mask=None)`` on embedded inputs),
        in the same train/eval mode as ``module``.
    Raises:
        ValueError: another module type, ``batch_first=False``, or an option tfm_ref lacks.
    """
    converters = {
        nn.MultiheadAttention: _attention,
        nn.TransformerEncoderLayer: _encoder_layer,
        nn.TransformerDecoderLayer: _decoder_layer,
        nn.Transformer: _transformer,
    }
    for kind, convert in converters.items():
        if type(module) is kind:
            converted = convert(module)
            converted.train(module.training)
            return converted.to(next(module.parameters()).device)
    raise ValueError(f"from_torch converts {', '.join(k.__name__ for k in converters)}; got {type(module).__name__}")


@torch.no_grad()
def _copy_linear(target: nn.Linear, weight: torch.Tensor, bias: torch.Tensor | None) -> None:
    target.weight.copy_(weight)
    if target.bias is not None:
        target.bias.copy_(bias)


@torch.no_grad()
def _copy_norm(target: LayerNorm, source: nn.LayerNorm) -> None:
    target.weight.copy_(source.weight)
    if target.bias is not None:
        target.bias.copy_(source.bias)


def _attention(source: nn.MultiheadAttention) -> MultiHeadAttention:
    if not source.batch_first:
        raise ValueError("from_torch needs batch_first=True (tfm_ref is batch-first)")
    if not source._qkv_same_embed_dim or source.bias_k is not None or source.add_zero_attn:
        raise ValueError("from_torch supports nn.MultiheadAttention without kdim/vdim, add_bias_kv or add_zero_attn")
    has_bias = source.in_proj_bias is not None
    target = MultiHeadAttention(source.embed_dim, source.num_heads, bias=has_bias, dropout=source.dropout)
    q_w, k_w, v_w = source.in_proj_weight.chunk(3)  # in_proj stacks W_Q, W_K, W_V: (3D, D)
    q_b, k_b, v_b = source.in_proj_bias.chunk(3) if has_bias else (None, None, None)
    _copy_linear(target.q_proj, q_w, q_b)
    _copy_linear(target.k_proj, k_w, k_b)
    _copy_linear(target.v_proj, v_w, v_b)
    _copy_linear(target.out_proj, source.out_proj.weight, source.out_proj.bias)
    return target


def _layer_options(source: nn.Module) -> dict:
    # the encoder layer records its activation as a code (1 ReLU, 2 GELU); the decoder layer does not
    code = getattr(source, "activation_relu_or_gelu", 0)
    if code == 1 or source.activation is F.relu or isinstance(source.activation, nn.ReLU):
        activation = "relu"
    elif code == 2 or source.activation is F.gelu or isinstance(source.activation, nn.GELU):
        activation = "gelu"
    else:
        raise ValueError(f"from_torch supports ReLU and GELU layers, got activation {source.activation!r}")
    return dict(
        d_model=source.linear1.in_features, n_heads=source.self_attn.num_heads, d_ff=source.linear1.out_features,
        dropout=source.dropout.p, bias=source.linear1.bias is not None, norm_eps=source.norm1.eps,
        norm_first=source.norm_first, ffn=activation,
    )


@torch.no_grad()
def _copy_ffn(target, source: nn.Module) -> None:
    _copy_linear(target.ffn.up_proj, source.linear1.weight, source.linear1.bias)
    _copy_linear(target.ffn.down_proj, source.linear2.weight, source.linear2.bias)


def _new_block(kind: type, source: nn.Module):
    """A block of ``kind`` with the options of ``source``, its self-attention and FFN weights copied."""
    if not source.self_attn.batch_first:
        raise ValueError("from_torch needs batch_first=True (tfm_ref is batch-first)")
    options = _layer_options(source)
    target = kind(options.pop("d_model"), options.pop("n_heads"), options.pop("d_ff"), **options)
    target.self_attn = _attention(source.self_attn)
    _copy_ffn(target, source)
    return target


def _encoder_layer(source: nn.TransformerEncoderLayer) -> EncoderBlock:
    target = _new_block(EncoderBlock, source)
    _copy_norm(target.attn_residual.norm, source.norm1)
    _copy_norm(target.ffn_residual.norm, source.norm2)
    return target


def _decoder_layer(source: nn.TransformerDecoderLayer) -> DecoderBlock:
    target = _new_block(DecoderBlock, source)
    target.cross_attn = _attention(source.multihead_attn)
    _copy_norm(target.self_residual.norm, source.norm1)
    _copy_norm(target.cross_residual.norm, source.norm2)
    _copy_norm(target.ffn_residual.norm, source.norm3)
    return target


def _final_norm(source: nn.LayerNorm | None) -> LayerNorm | None:
    if source is None:
        return None
    target = LayerNorm(source.normalized_shape[0], eps=source.eps, bias=source.bias is not None)
    _copy_norm(target, source)
    return target


def _transformer(source: nn.Transformer) -> EncoderDecoderCore:
    if not source.batch_first:
        raise ValueError("from_torch needs batch_first=True (tfm_ref is batch-first)")
    encoder = Encoder([_encoder_layer(layer) for layer in source.encoder.layers], _final_norm(source.encoder.norm))
    decoder = Decoder([_decoder_layer(layer) for layer in source.decoder.layers], _final_norm(source.decoder.norm))
    return EncoderDecoderCore(encoder, decoder)
