"""Chapter 2 exercises — splitting and merging heads, K/V head groups, the KV cache, multi-head attention.

    MultiHead(X) = Concat(head₁, …, head_H) W_O,   head_i = Attention(X W_Qⁱ, X W_Kⁱ, X W_Vⁱ)

With G = ``n_kv_heads`` < H key/value heads, query head i uses key/value head i // (H/G)
(GQA; G = 1 is MQA). Each exercise is checked against `tfm_ref`; each `Mistake` is a broken
version a student plausibly writes, with the hint the failure gives.
`tests/test_exercises_ch02.py` proves every check passes the reference and fails every
mistake with its hint.

Shapes: B batch · T query positions · S key positions · D model width · H query heads ·
G key/value heads · Dh head width · L layers.
"""
from __future__ import annotations

import math

import torch

import tfm_ref

from ..spec import Call, Case, Exercise, Mistake, ModuleAdapter, randn, random_dims
from .ch01_attention import (
    ATTENTION_LIBRARY,
    ATTENTION_MISTAKES,
    MASK_MISTAKES,
    SOFTMAX_OVER_QUERIES,
    attention_variant,
    plain_softmax,
)
from .shared import repeat_tiled

__all__ = ["SPLIT_HEADS", "MERGE_HEADS", "REPEAT_KV", "KV_CACHE_BYTES", "MULTIHEAD", "EXERCISES", "MULTIHEAD_MISTAKES",
           "BrokenMultiHeadAttention", "MaskIgnoredMultiHeadAttention", "key_padding", "mha_dims", "mha_kwargs"]

# Chapter 1's function, given to the student in the setup cell (already graded there).
CHAPTER1_HELPERS = (tfm_ref.scaled_dot_product_attention, tfm_ref.softmax)


# --------------------------------------------------------------------------- 1. split_heads

def _split_inputs(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    return Call(randn(gen, dims["B"], dims["T"], dims["H"] * dims["Dh"], dtype=dtype), dims["H"])


def _split_reshape_only(x, n_heads):
    batch, length, width = x.shape
    return x.reshape(batch, n_heads, length, width // n_heads)  # (B, H, T, Dh) by size, not by meaning


def _split_interleaved(x, n_heads):
    batch, length, width = x.shape
    return x.reshape(batch, length, width // n_heads, n_heads).permute(0, 3, 1, 2)  # head = column mod H


def _split_no_transpose(x, n_heads):
    batch, length, width = x.shape
    return x.reshape(batch, length, n_heads, width // n_heads)  # (B, T, H, Dh): the heads left on axis 2


def _split_transpose_2_3(x, n_heads):
    batch, length, width = x.shape
    return x.view(batch, length, n_heads, width // n_heads).transpose(2, 3)  # (B, T, Dh, H)


def _split_width_first(x, n_heads):
    batch, length, width = x.shape
    return x.view(batch, length, width // n_heads, n_heads).transpose(1, 2)  # (B, Dh, T, H)


_HEAD_SHAPES = [dict(B=1, T=1, H=1, Dh=1), dict(B=1, T=2, H=2, Dh=1), dict(B=1, T=2, H=2, Dh=2),
                dict(B=1, T=3, H=2, Dh=3), dict(B=2, T=3, H=4, Dh=2), dict(B=2, T=5, H=3, Dh=4)]

SPLIT_HEADS = Exercise(
    name="split_heads",
    reference=tfm_ref.split_heads,
    inputs=_split_inputs,
    arg_names=("x", "n_heads"),
    shapes=_HEAD_SHAPES,
    visible=[Case("random x (B, T, H·Dh)")],
    hidden=[
        Case("random sizes", dims=random_dims(B=(1, 4), T=(1, 9), H=(1, 8), Dh=(1, 8))),
        Case("one head (H = 1)", dims=dict(B=2, T=4, H=1, Dh=6)),
        Case("length-1 sequences", dims=dict(B=3, T=1, H=4, Dh=2)),
        Case("float64", dtype=torch.float64),
        Case("gradients", grad=True),
    ],
    mistakes=[
        Mistake("reshape without transpose", _split_reshape_only,
                "reshaping (B, T, H·Dh) straight to (B, H, T, Dh) gives the right shape but fills it in memory "
                "order, so each 'head' gets pieces of several positions.",
                "split the last axis first, x.view(B, T, H, Dh), then swap the T and H axes with transpose(1, 2)."),
        Mistake("heads take interleaved columns", _split_interleaved,
                "your head h takes the columns h, h + H, h + 2H, …; head h must own the contiguous block of "
                "columns h·Dh … (h+1)·Dh − 1.",
                "view the last axis as (H, Dh), not (Dh, H): x.view(B, T, H, Dh).transpose(1, 2)."),
        Mistake("forgot the transpose: returns (B, T, H, Dh)", _split_no_transpose,
                "splitting the last axis gives (B, T, H, Dh), with the heads on axis 2; split_heads returns "
                "(B, H, T, Dh), the heads on axis 1, so that every head is a batch of T positions that attend "
                "to each other.",
                "swap the T and H axes after the split: x.view(B, T, H, Dh).transpose(1, 2)."),
        Mistake("transposed axes 2 and 3 instead of 1 and 2", _split_transpose_2_3,
                "after x.view(B, T, H, Dh) the positions are axis 1 and the heads axis 2; transpose(2, 3) swaps the "
                "heads with the head width instead, giving (B, T, Dh, H). split_heads puts the heads in front of "
                "the positions: (B, H, T, Dh).",
                "x.view(B, T, H, Dh).transpose(1, 2): swap the positions (1) and the heads (2)."),
        Mistake("last axis split as (Dh, H) instead of (H, Dh)", _split_width_first,
                "x.view(B, T, Dh, H) cuts each position's H·Dh features into Dh groups of H, so the heads end up on "
                "the last axis and each takes every H-th column; transposed, that gives (B, Dh, T, H). Head h owns "
                "the contiguous columns h·Dh … (h+1)·Dh − 1, which view(B, T, H, Dh) gives.",
                "x.view(B, T, H, Dh).transpose(1, 2): the heads before the head width in the view."),
    ],
)


# --------------------------------------------------------------------------- 2. merge_heads

def _merge_inputs(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    return Call(randn(gen, dims["B"], dims["H"], dims["T"], dims["Dh"], dtype=dtype))


def _merge_reshape_only(x):
    batch, n_heads, length, head_dim = x.shape
    return x.reshape(batch, length, n_heads * head_dim)  # mixes positions across heads


def _merge_view(x):
    batch, n_heads, length, head_dim = x.shape
    return x.transpose(1, 2).view(batch, length, n_heads * head_dim)  # a transposed tensor is not contiguous


def _merge_interleaved(x):
    batch, n_heads, length, head_dim = x.shape
    return x.permute(0, 2, 3, 1).reshape(batch, length, n_heads * head_dim)  # (B, T, Dh·H): heads interleaved


def _merge_transpose_2_3(x):
    batch, n_heads, length, head_dim = x.shape
    return x.transpose(2, 3).reshape(batch, length, n_heads * head_dim)  # (B, H, Dh, T) read in memory order


MERGE_HEADS = Exercise(
    name="merge_heads",
    reference=tfm_ref.merge_heads,
    inputs=_merge_inputs,
    arg_names=("x",),
    shapes=_HEAD_SHAPES,
    visible=[Case("random x (B, H, T, Dh)")],
    hidden=[
        Case("random sizes", dims=random_dims(B=(1, 4), T=(1, 9), H=(1, 8), Dh=(1, 8))),
        Case("length-1 sequences", dims=dict(B=2, T=1, H=3, Dh=4)),
        Case("float64", dtype=torch.float64),
        Case("gradients", grad=True),
    ],
    mistakes=[
        Mistake("reshape without transpose", _merge_reshape_only,
                "reshaping the (B, H, T, Dh) tensor straight to (B, T, H·Dh) reads it in memory order and mixes "
                "positions across heads.",
                "bring T next to B first: x.transpose(1, 2).reshape(B, T, H·Dh)."),
        Mistake("view on the transposed tensor", _merge_view,
                "after transpose the tensor is no longer contiguous in memory, and view refuses to merge two "
                "axes whose elements are not adjacent.",
                "x.transpose(1, 2).reshape(B, T, H·Dh) (or .contiguous().view(...)): reshape copies when it must."),
        Mistake("heads interleaved", _merge_interleaved,
                "the heads must be concatenated: columns h·Dh … (h+1)·Dh − 1 of the output are head h; yours "
                "interleave them.",
                "transpose to (B, T, H, Dh), then reshape: x.transpose(1, 2).reshape(B, T, H·Dh)."),
        Mistake("transposed axes 2 and 3 instead of 1 and 2", _merge_transpose_2_3,
                "(B, H, T, Dh).transpose(2, 3) swaps the positions with the head width, (B, H, Dh, T); reshaped to "
                "(B, T, H·Dh) it has the right shape, but each row mixes the features of several positions. The "
                "positions must come next to the batch first: transpose(1, 2) gives (B, T, H, Dh), whose last two "
                "axes then merge into H·Dh.",
                "x.transpose(1, 2).reshape(B, T, H·Dh)."),
    ],
)


# --------------------------------------------------------------------------- 3. repeat_kv

def _repeat_inputs(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    return Call(randn(gen, dims["B"], dims["G"], dims["S"], dims["Dh"], dtype=dtype), dims["R"])


def _repeat_expanded_heads(x, n_rep):
    batch, n_kv_heads, length, head_dim = x.shape
    return x.expand(batch, n_kv_heads * n_rep, length, head_dim)  # only an axis of size 1 can be expanded


def _repeat_positions(x, n_rep):
    return x.repeat_interleave(n_rep, dim=2)  # (B, G, S·n_rep, Dh)


REPEAT_KV = Exercise(
    name="repeat_kv",
    reference=tfm_ref.repeat_kv,
    inputs=_repeat_inputs,
    arg_names=("x", "n_rep"),
    shapes=[dict(B=1, G=1, S=1, Dh=1, R=2), dict(B=1, G=2, S=1, Dh=1, R=2), dict(B=1, G=2, S=2, Dh=2, R=2),
            dict(B=2, G=2, S=3, Dh=2, R=3), dict(B=2, G=3, S=4, Dh=2, R=2)],
    visible=[Case("G = 3 KV heads, each repeated n_rep = 2 times")],
    hidden=[
        Case("random sizes", dims=random_dims(B=(1, 3), G=(1, 4), S=(1, 6), Dh=(1, 5), R=(1, 4))),
        Case("n_rep = 1 (MHA)", dims=dict(B=2, G=4, S=3, Dh=2, R=1)),
        Case("one KV head (MQA)", dims=dict(B=2, G=1, S=3, Dh=2, R=4)),
        Case("float64", dtype=torch.float64),
        Case("gradients", grad=True),
    ],
    mistakes=[
        Mistake("wrong K/V head grouping: heads tiled", repeat_tiled,
                "your heads come out tiled (kv0, kv1, kv0, kv1, …), so query head i would use KV head i % G. Each "
                "KV head must serve n_rep *consecutive* query heads (kv0, kv0, kv1, kv1, …): query head i uses "
                "KV head i // n_rep.",
                "put the copies right after their head: x[:, :, None] is (B, G, 1, S, Dh); expand it to "
                "(B, G, n_rep, S, Dh), then reshape to (B, G·n_rep, S, Dh). (x.repeat(1, n_rep, 1, 1) and "
                "x[:, None] tile.)"),
        Mistake("expanded the head axis itself", _repeat_expanded_heads,
                "expand can only stretch an axis of size 1, so the G heads cannot be expanded to G·n_rep in place.",
                "add an axis of size 1 after the heads, x[:, :, None], expand that one to n_rep, then reshape."),
        Mistake("repeated along the positions", _repeat_positions,
                "you repeated along axis 2, the positions S; the heads are axis 1 of (B, G, S, Dh).",
                "repeat along the head axis, dim=1: the result is (B, G·n_rep, S, Dh)."),
    ],
    forbidden=(torch.repeat_interleave, torch.Tensor.repeat_interleave),
)


# --------------------------------------------------------------------------- 4. kv_cache_bytes

def _cache_inputs(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    return Call(dims["L"], dims["G"], dims["Dh"], dims["S"], batch=dims["B"], bytes_per_elem=dims["E"])


def _cache_defaults(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    return Call(dims["L"], dims["G"], dims["Dh"], dims["S"])


def _llama2_70b(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    return Call(80, 8, 128, 4096, batch=1, bytes_per_elem=2)  # Llama-2-70B: 80 layers, GQA with 8 KV heads


def _cache_no_factor_two(n_layers, n_kv_heads, head_dim, seq_len, batch=1, bytes_per_elem=2):
    return n_layers * batch * n_kv_heads * seq_len * head_dim * bytes_per_elem


def _cache_no_layers(n_layers, n_kv_heads, head_dim, seq_len, batch=1, bytes_per_elem=2):
    return 2 * batch * n_kv_heads * seq_len * head_dim * bytes_per_elem


def _cache_no_batch(n_layers, n_kv_heads, head_dim, seq_len, batch=1, bytes_per_elem=2):
    return 2 * n_layers * n_kv_heads * seq_len * head_dim * bytes_per_elem


def _cache_elements(n_layers, n_kv_heads, head_dim, seq_len, batch=1, bytes_per_elem=2):
    return 2 * n_layers * batch * n_kv_heads * seq_len * head_dim


def _cache_two_bytes_always(n_layers, n_kv_heads, head_dim, seq_len, batch=1, bytes_per_elem=2):
    return 2 * n_layers * batch * n_kv_heads * seq_len * head_dim * 2


def _cache_bits(n_layers, n_kv_heads, head_dim, seq_len, batch=1, bytes_per_elem=2):
    return 2 * n_layers * batch * n_kv_heads * seq_len * head_dim * bytes_per_elem * 8


KV_CACHE_BYTES = Exercise(
    name="kv_cache_bytes",
    reference=tfm_ref.kv_cache_bytes,
    inputs=_cache_inputs,
    arg_names=("n_layers", "n_kv_heads", "head_dim", "seq_len"),
    # Sizes that no missing factor (or pair) stands in for: with L = 6 = 2·B, a count without 2 and B read as one
    # without the layers. 1 byte first, where 2 bytes written in place of bytes_per_elem doubles instead of halving.
    shapes=[dict(L=1, G=1, Dh=1, S=1, B=1, E=1), dict(L=2, G=1, Dh=2, S=3, B=1, E=2),
            dict(L=5, G=6, Dh=8, S=7, B=3, E=4)],
    visible=[Case("a small model, batch 3, int8 (1 byte)", dims=dict(L=5, G=6, Dh=8, S=7, B=3, E=1)),
             Case("a small model, batch 3, fp32 (4 bytes)"), Case("Llama-2-70B, 4096 tokens", inputs=_llama2_70b)],
    hidden=[
        Case("random sizes", dims=random_dims(L=(1, 96), G=(1, 64), Dh=(1, 256), S=(0, 100_000), B=(1, 64), E=(1, 4))),
        Case("defaults: batch 1, 2 bytes", inputs=_cache_defaults),
        Case("empty cache (seq_len 0)", dims=dict(L=4, G=2, Dh=8, S=0, B=2, E=2)),
    ],
    mistakes=[
        Mistake("forgot the factor 2 (K and V)", _cache_no_factor_two,
                "the cache holds two tensors per layer, the keys and the values; you counted one.",
                "multiply by 2."),
        Mistake("forgot the layers", _cache_no_layers,
                "every layer keeps its own keys and values; you counted one layer.",
                "multiply by n_layers."),
        Mistake("forgot the batch", _cache_no_batch,
                "each sequence of the batch has its own cache; you counted one sequence.",
                "multiply by batch."),
        Mistake("counted elements, not bytes", _cache_elements,
                "you counted elements, not bytes: an element takes bytes_per_elem bytes (2 in fp16/bf16, 4 in "
                "fp32).",
                "multiply by bytes_per_elem."),
        Mistake("bytes_per_elem ignored (2 bytes written in its place)", _cache_two_bytes_always,
                "an element takes bytes_per_elem bytes, which the caller gives: 2 in fp16/bf16, but 4 in fp32 and 1 "
                "in int8.",
                "multiply by bytes_per_elem, not by 2."),
        Mistake("counted bits", _cache_bits,
                "bytes_per_elem is already in bytes; you counted bits.",
                "do not multiply by 8."),
    ],
)


# --------------------------------------------------------------------------- 5. MultiHeadAttention

class BrokenMultiHeadAttention(tfm_ref.MultiHeadAttention):
    """tfm_ref's layer written out step by step, each step swappable: the mistakes below (and
    chapter 4's) are subclasses that change exactly one step."""

    def split(self, x: torch.Tensor, n_heads: int) -> torch.Tensor:
        return tfm_ref.split_heads(x, n_heads)

    def merge(self, x: torch.Tensor) -> torch.Tensor:
        return tfm_ref.merge_heads(x)

    def repeat(self, x: torch.Tensor, n_rep: int) -> torch.Tensor:
        return tfm_ref.repeat_kv(x, n_rep)

    def split_kv(self, x: torch.Tensor) -> torch.Tensor:
        return self.split(x, self.n_kv_heads)

    def sources(self, x: torch.Tensor, context: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        """(query source, key/value source)."""
        return x, x if context is None else context

    def attend(self, q, k, v, mask):
        return tfm_ref.scaled_dot_product_attention(q, k, v, mask)

    def project_out(self, merged: torch.Tensor) -> torch.Tensor:
        return self.out_proj(merged)

    def forward(self, x, context=None, mask=None):
        query_source, kv_source = self.sources(x, context)
        q = self.split(self.q_proj(query_source), self.n_heads)  # (B, H, T, Dh)
        k = self.split_kv(self.k_proj(kv_source))  # (B, G, S, Dh)
        v = self.split_kv(self.v_proj(kv_source))  # (B, G, S, Dh)
        n_rep = self.n_heads // self.n_kv_heads
        k, v = self.repeat(k, n_rep), self.repeat(v, n_rep)  # (B, H, S, Dh)
        return self.project_out(self.merge(self.attend(q, k, v, mask)))  # (B, T, D)


class _MHAContextIgnored(BrokenMultiHeadAttention):
    def sources(self, x, context):
        return x, x  # keys and values from x even when a context is given


class _MHAReshapeSplit(BrokenMultiHeadAttention):
    def split(self, x, n_heads):
        return _split_reshape_only(x, n_heads)


class _MHAReshapeMerge(BrokenMultiHeadAttention):
    def merge(self, x):
        return _merge_reshape_only(x)


class _MHAInterleavedMerge(BrokenMultiHeadAttention):
    def merge(self, x):
        return _merge_interleaved(x)


class _MHATiledKV(BrokenMultiHeadAttention):
    def repeat(self, x, n_rep):
        return repeat_tiled(x, n_rep)


class _MHAKVSplitIntoQueryHeads(BrokenMultiHeadAttention):
    def split_kv(self, x):
        batch, length, width = x.shape  # the exercise's split_heads, without tfm_ref's divisibility check
        return x.view(batch, length, self.n_heads, width // self.n_heads).transpose(1, 2)  # H "heads" of G·Dh/H


class _MHAKVRepeatedByG(BrokenMultiHeadAttention):
    def repeat(self, x, n_rep):
        return tfm_ref.repeat_kv(x, self.n_kv_heads)  # G·G heads: H only when H = G², as with H = 4, G = 2


class _MHAKVNotRepeated(BrokenMultiHeadAttention):
    def repeat(self, x, n_rep):
        return x


class _MHAKVSplitIntoQueryHeadsOnly(_MHAKVSplitIntoQueryHeads, _MHAKVNotRepeated):
    """Split into H heads, and so not repeated: the layer of a student who never met G < H."""


class _MHAKVHeadsNone(BrokenMultiHeadAttention):
    def __init__(self, d_model, n_heads, n_kv_heads=None, bias=True, dropout=0.0):
        head_dim = d_model // n_heads
        width = n_kv_heads * head_dim  # None kept: the TypeError of nn.Linear(d_model, n_kv_heads * head_dim)
        super().__init__(d_model, n_heads, width // head_dim, bias, dropout)


def _attending_with(attention) -> type:
    """A layer whose attention step is ``attention(q, k, v, mask)`` (one of chapter 1's broken versions)."""
    return type("BrokenMultiHeadAttention", (BrokenMultiHeadAttention,),
                {"attend": lambda self, q, k, v, mask: attention(q, k, v, mask)})


def _in_a_layer(mistake: Mistake, attention=None) -> Mistake:
    return Mistake(mistake.name, _attending_with(attention or mistake.impl), mistake.hint, mistake.fix)


# Chapter 1's mistakes, made by a layer that writes its own attention instead of calling the given one: not
# those the layer names in its own terms (scaling, mask ignored) or that cannot happen here (d_v = d_k, no
# weights returned). Its softmax is torch.softmax, whose all −inf columns (padded keys) give NaN.
_NAMED_BY_THE_LAYER = {"missing scaling", "mask ignored", "wrong scaling: √d_v", "the scores returned as the weights",
                       "wrong scaling: d_k instead of √d_k"}
OWN_ATTENTION_MISTAKES = [
    *(_in_a_layer(m) for m in (*MASK_MISTAKES, *ATTENTION_MISTAKES)
      if m.name not in _NAMED_BY_THE_LAYER and m is not SOFTMAX_OVER_QUERIES),
    _in_a_layer(SOFTMAX_OVER_QUERIES, attention_variant(softmax_dim=-2, softmax=plain_softmax)),
]


class _MHANoScaling(BrokenMultiHeadAttention):
    def attend(self, q, k, v, mask):
        return tfm_ref.scaled_dot_product_attention(q * math.sqrt(q.shape[-1]), k, v, mask)  # cancels the 1/√Dh


class _MHAScaledTwice(BrokenMultiHeadAttention):
    def attend(self, q, k, v, mask):
        return tfm_ref.scaled_dot_product_attention(q / math.sqrt(q.shape[-1]), k, v, mask)  # and again inside


class _MHAScaleByModelWidth(BrokenMultiHeadAttention):
    def attend(self, q, k, v, mask):
        # 1/√D instead of 1/√Dh: rescale q so that the reference's 1/√Dh becomes 1/√(H·Dh)
        return tfm_ref.scaled_dot_product_attention(q / math.sqrt(self.n_heads), k, v, mask)


class _MHANoOutProj(BrokenMultiHeadAttention):
    def project_out(self, merged):
        return merged


class MaskIgnoredMultiHeadAttention(BrokenMultiHeadAttention):
    """The mask is not passed on to the attention (chapter 4 reuses it for the source mask)."""

    def attend(self, q, k, v, mask):
        return tfm_ref.scaled_dot_product_attention(q, k, v)


def mha_dims(cross: bool = False):
    """Random sizes for a multi-head layer that divide as they must (G | H, H | D); with
    ``cross``, also a source length S."""
    def draw(gen: torch.Generator) -> dict[str, int]:
        base = random_dims(B=(1, 3), T=(1, 7), S=(1, 7), G=(1, 3), R=(1, 3), Dh=(1, 4))(gen)
        heads = base["G"] * base["R"]
        sizes = dict(B=base["B"], T=base["T"], D=heads * base["Dh"], H=heads, G=base["G"])
        return {**sizes, "S": base["S"]} if cross else sizes
    return draw


def mha_kwargs(dims) -> dict:
    """The layer's arguments; sizes without G build it with n_kv_heads=None (MHA)."""
    return dict(d_model=dims["D"], n_heads=dims["H"], n_kv_heads=dims.get("G"), bias=bool(dims.get("bias", 1)))


def _self_inputs(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    return Call(randn(gen, dims["B"], dims["T"], dims["D"], dtype=dtype))


def key_padding(gen: torch.Generator, batch: int, length: int, empty: bool = False) -> torch.Tensor:
    """A (B, 1, 1, S) key mask: every sequence has padding and a real token (when S ≥ 2), so that a
    reversed mask blocks no row entirely; with ``empty`` the last sequence is all padding."""
    lengths = torch.randint(1, max(length - 1, 1) + 1, (batch,), generator=gen)
    if empty:
        lengths[-1] = 0  # every query of it sees no key: a zero attention output
    return tfm_ref.key_mask(tfm_ref.padding_mask(lengths, length))


def _padded_self_inputs(empty: bool = False):
    """Self-attention over a padded batch: the keys of padded positions are masked (B, 1, 1, T)."""
    def inputs(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
        x = _self_inputs(gen, dims, dtype).args[0]
        return Call(x, mask=key_padding(gen, dims["B"], dims["T"], empty))
    return inputs


def _cross_inputs(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    """x (B, T, D) attending to a context (B, S, D) of another length."""
    x = _self_inputs(gen, dims, dtype).args[0]
    return Call(x, context=randn(gen, dims["B"], dims["S"], dims["D"], dtype=dtype))


def _causal_self_inputs(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    return Call(_self_inputs(gen, dims, dtype).args[0], mask=tfm_ref.causal_mask(dims["T"]))


_KV_SPLIT_HINT = ("k_proj and v_proj have G·Dh outputs, one block per key/value head: split into n_heads they "
                  "give heads of the wrong width (or cannot be split at all).")
_KV_SPLIT_FIX = ("split_heads(self.k_proj(source), self.n_kv_heads) (and v likewise), then repeat them to the H "
                 "query heads: repeat_kv(k, self.n_heads // self.n_kv_heads).")

KV_REPEATED_BY_G_HINT = ("each of the G key/value heads serves H / G query heads, so it is repeated H / G times; "
                         "repeated G times, the G heads become G·G, which is H only when H = G².")

MULTIHEAD_MISTAKES = [
    Mistake("reshape without transpose when splitting heads", _MHAReshapeSplit,
            "reshaping a projection (B, T, H·Dh) straight to (B, H, T, Dh) mixes positions into heads.",
            "split_heads as in exercise 1: x.view(B, T, H, Dh).transpose(1, 2)."),
    Mistake("reshape without transpose when merging heads", _MHAReshapeMerge,
            "reshaping the heads' output (B, H, T, Dh) straight to (B, T, H·Dh) mixes positions across heads.",
            "merge_heads as in exercise 2: out.transpose(1, 2).reshape(B, T, H·Dh)."),
    Mistake("heads interleaved when merging", _MHAInterleavedMerge,
            "the merged output's columns h·Dh … (h+1)·Dh − 1 must be head h, whole; yours interleave the heads "
            "(the head axis ended up last before the reshape), so out_proj mixes the wrong features.",
            "merge_heads as in exercise 2: out.transpose(1, 2).reshape(B, T, H·Dh)."),
    Mistake("wrong K/V head grouping", _MHATiledKV,
            "query head i must use KV head i // (H/G); yours come out tiled (kv0, kv1, kv0, kv1, …), so head i "
            "uses KV head i % G.",
            "repeat each KV head H/G times in a row (kv0, kv0, kv1, kv1, …): repeat_kv(k, H // G) from exercise 3."),
    Mistake("K/V split into H heads instead of G", _MHAKVSplitIntoQueryHeads, _KV_SPLIT_HINT, _KV_SPLIT_FIX),
    Mistake("K/V split into H heads instead of G, and not repeated", _MHAKVSplitIntoQueryHeadsOnly,
            _KV_SPLIT_HINT, _KV_SPLIT_FIX),
    Mistake("K/V heads repeated G times instead of H / G", _MHAKVRepeatedByG,
            KV_REPEATED_BY_G_HINT,
            "k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep) with n_rep = self.n_heads // self.n_kv_heads."),
    Mistake("K/V heads not repeated to H", _MHAKVNotRepeated,
            "with G < H key/value heads the keys and values have fewer heads than the queries, so they do not "
            "line up for the attention.",
            "k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep) with n_rep = self.n_heads // self.n_kv_heads."),
    Mistake("n_kv_heads=None not replaced by n_heads", _MHAKVHeadsNone,
            "n_kv_heads=None means as many key/value heads as query heads (plain MHA); None itself cannot size "
            "k_proj.",
            "self.n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads, and use self.n_kv_heads after."),
    Mistake("missing scaling", _MHANoScaling,
            "each head's scores are not divided by √Dh, the head width (d_model / n_heads).",
            "the given scaled_dot_product_attention scales by √(q.shape[-1]) = √Dh on (B, H, T, Dh) tensors; "
            "if you write your own, divide q @ k.transpose(-2, -1) by math.sqrt(Dh)."),
    Mistake("scores divided by Dh, not √Dh (scaled twice)", _MHAScaledTwice,
            "each head's scores come out divided by Dh, where the scale is √Dh: either q was divided by √Dh "
            "before the given scaled_dot_product_attention, which divides by √Dh again, or your own attention "
            "divides by d_k instead of √d_k.",
            "scale once: pass the unscaled q to scaled_dot_product_attention, or divide your own scores "
            "q @ k.transpose(-2, -1) by math.sqrt(Dh)."),
    Mistake("scaled by √d_model instead of √Dh", _MHAScaleByModelWidth,
            "the scale is the square root of the width of one head, Dh = d_model / n_heads, not of d_model.",
            "divide by math.sqrt(d_model // n_heads), i.e. by √(q.shape[-1]) after splitting."),
    Mistake("no output projection", _MHANoOutProj,
            "the merged heads are returned as they are; W_O, which mixes the heads, is missing.",
            "return self.out_proj(merge_heads(out))."),
    Mistake("mask ignored", MaskIgnoredMultiHeadAttention,
            "the mask is not passed on to the attention, so padded or future keys still get weight.",
            "scaled_dot_product_attention(q, k, v, mask): the mask broadcasts over the heads as (B, 1, T, S) or "
            "(B, 1, 1, S)."),
    *OWN_ATTENTION_MISTAKES,
]

# A padded length-2 sequence has one real key, whose weight is 1 however the scores are scaled: the rungs
# from T = 3 on, with heads of width 2 (√1 = 1), let scaling mistakes show on an input small enough to print.
# The largest, the visible case's, has H / G ≠ G (with H = G², 4 and 2, K/V repeated G times passes), G·Dh
# divisible by H (K/V split into H heads gives wrong values there, not an error that other mistakes share) and
# √D ≠ Dh (where scaling by √d_model is dividing by Dh).
_MHA_SHAPES = [dict(B=1, T=1, D=2, H=1, G=1), dict(B=1, T=2, D=2, H=2, G=1), dict(B=1, T=3, D=4, H=2, G=1),
               dict(B=1, T=2, D=4, H=2, G=2), dict(B=1, T=2, D=4, H=4, G=2), dict(B=1, T=3, D=8, H=4, G=2),
               dict(B=2, T=3, D=8, H=4, G=2), dict(B=2, T=4, D=8, H=4, G=2), dict(B=2, T=5, D=18, H=6, G=2)]

MULTIHEAD = Exercise(
    name="MultiHeadAttention",
    key="multihead",
    reference=tfm_ref.MultiHeadAttention,
    adapter=ModuleAdapter(mha_kwargs),
    inputs=_padded_self_inputs(),
    arg_names=("x",),
    shapes=_MHA_SHAPES,
    visible=[Case("GQA (H = 6, G = 2) over a padded batch"),
             # S is no size of the ladder: kept at 7 as T shrinks, S ≠ T on every rung
             Case("a context of another length (S = 7, T = 5)", dims=dict(B=2, T=5, S=7, D=18, H=6, G=2),
                  inputs=_cross_inputs),
             # the notebook's text: a sequence that is all padding gets zeros, never NaN; n_kv_heads=None means H
             Case("a sequence that is all padding (fully masked rows)", inputs=_padded_self_inputs(empty=True)),
             Case("n_kv_heads=None (MHA)", dims=dict(B=2, T=4, D=12, H=3), inputs=_self_inputs)],
    hidden=[
        Case("MHA (G = H)", dims=dict(B=2, T=5, D=12, H=3, G=3), inputs=_self_inputs),
        Case("MQA (G = 1)", dims=dict(B=2, T=4, D=16, H=4, G=1), inputs=_self_inputs),
        Case("n_kv_heads=None (MHA)", dims=dict(B=2, T=4, D=12, H=3), inputs=_self_inputs),
        Case("causal mask", inputs=_causal_self_inputs),
        Case("a sequence that is all padding (fully masked rows)", inputs=_padded_self_inputs(empty=True)),
        Case("random sizes", dims=mha_dims()),
        Case("length-1 sequences", dims=dict(B=3, T=1, D=8, H=4, G=2)),
        Case("no biases (bias=False)", dims=dict(B=2, T=4, D=8, H=4, G=2, bias=0)),
        Case("gradients (inputs and weights)", grad=True),
        Case("float64 weights and inputs", dtype=torch.float64),
    ],
    # Not in MULTIHEAD_MISTAKES: chapter 4 catalogues the same layer in its own words.
    mistakes=[
        Mistake("context ignored: keys and values taken from x", _MHAContextIgnored,
                "when `context` (B, S, D) is given, the keys and values are projected from it, and only the "
                "queries from x (B, T, D); yours always come from x, so the layer attends over x itself.",
                "source = x if context is None else context; then k = split_heads(self.k_proj(source), "
                "self.n_kv_heads), v likewise, and q = split_heads(self.q_proj(x), self.n_heads)."),
        *MULTIHEAD_MISTAKES,
    ],
    forbidden=ATTENTION_LIBRARY,
    allowed=CHAPTER1_HELPERS,
    uses=(SPLIT_HEADS, MERGE_HEADS, REPEAT_KV),
)

EXERCISES = (SPLIT_HEADS, MERGE_HEADS, REPEAT_KV, KV_CACHE_BYTES, MULTIHEAD)
