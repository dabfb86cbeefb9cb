"""Chapter 4 exercises — cross-attention: queries from the decoder, keys and values from the
encoder's output (the *memory*), and the masks of an encoder-decoder step.

    CrossAttention(X, M) = softmax((X W_Q)(M W_K)ᵀ / √d_k) (M W_V)      weights: n_tgt × n_src

`MultiHeadAttention` is checked against `tfm_ref`; `cross_attention` (one head, explicit
weight matrices) and `encoder_decoder_masks` are not part of tfm_ref's contract, so their
references are written here (`cross_attention_reference`, `encoder_decoder_masks_reference`).
`tests/test_exercises.py` proves every check passes the reference and fails every mistake
with its hint.

Shapes: B batch · T target (query) positions · S source (key) positions · D model width ·
Dk query/key width · Dv value width · H query heads · G key/value heads.
"""
from __future__ import annotations

import math

import torch

import tfm_ref

from ..spec import Call, Case, Exercise, Mistake, ModuleAdapter, randn, random_dims
from .ch01_attention import ATTENTION_LIBRARY, ATTENTION_MISTAKES, MASK_MISTAKES, plain_softmax
from .ch02_multihead import (
    MULTIHEAD_MISTAKES,
    BrokenMultiHeadAttention,
    MaskIgnoredMultiHeadAttention,
    key_padding,
    mha_dims,
    mha_kwargs,
)
from .ch03_masking import CAUSAL_MASK, PADDING_MASK

__all__ = ["cross_attention_reference", "encoder_decoder_masks_reference", "CROSS_ATTENTION", "CROSS_MULTIHEAD",
           "ENCODER_DECODER_MASKS", "EXERCISES"]

# Chapter 1's attention, given to the student (already graded there), chapter 2's head helpers and chapter 3's
# masks: the notebook's setup cell imports them.
GIVEN_HELPERS = (tfm_ref.scaled_dot_product_attention, tfm_ref.softmax, tfm_ref.split_heads, tfm_ref.merge_heads,
                 tfm_ref.repeat_kv, tfm_ref.causal_mask, tfm_ref.padding_mask)


# Where a look-ahead mask that does not belong is placed: the name each gets in the catalogue, and its shape
# and diagonal from (T, S). Chapter 3's causal_mask(T, S) aligns it to the end; causal_mask(T) is square.
LOOK_AHEADS = {
    "causal mask on cross-attention": lambda t, s: ((t, s), 0),
    "causal mask on cross-attention, aligned to the end": lambda t, s: ((t, s), s - t),
    "causal mask on cross-attention, T × T": lambda t, s: ((t, t), 0),
}


def _look_ahead(n_tgt: int, n_src: int, name: str) -> torch.Tensor:
    """The look-ahead mask that ``LOOK_AHEADS[name]`` places."""
    shape, diagonal = LOOK_AHEADS[name](n_tgt, n_src)
    return torch.ones(shape, dtype=torch.bool).tril(diagonal=diagonal)


# --------------------------------------------------------------------------- references not in tfm_ref

def cross_attention_reference(x, memory, w_q, w_k, w_v, src_mask=None):
    """One head of cross-attention from the decoder states ``x`` to the encoder output ``memory``.

    Args:
        x: (B, T, D) decoder states (the queries' source).  memory: (B, S, D) encoder output
            (the keys' and values' source).  w_q, w_k: (D, Dk).  w_v: (D, Dv).
        src_mask: (B, S) bool, True = real source token; None = no padding.
    Returns:
        out (B, T, Dv) and the weights (B, T, S): row t says where target position t looks in the source.
    """
    q, k, v = x @ w_q, memory @ w_k, memory @ w_v  # (B, T, Dk), (B, S, Dk), (B, S, Dv)
    mask = None if src_mask is None else src_mask[:, None, :]  # (B, 1, S): the same keys for every query
    return tfm_ref.scaled_dot_product_attention(q, k, v, mask, return_weights=True)


def encoder_decoder_masks_reference(src_lengths, src_len: int, tgt_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The two masks of a decoder layer, for right-padded sources and targets.

    The decoder's self-attention is causal (the targets are right-padded, so a real target
    position never sees a padded one); its cross-attention sees every *real* source token,
    the future included (the whole source is known).

    Args:
        src_lengths: (B,) real tokens of each source.  src_len: S.  tgt_len: T.
    Returns:
        self_mask (B, 1, T, T) and cross_mask (B, 1, T, S), bool, True = may attend.
    """
    src_lengths = torch.as_tensor(src_lengths)
    batch = src_lengths.shape[0]
    self_mask = tfm_ref.causal_mask(tgt_len).expand(batch, 1, tgt_len, tgt_len)  # (B, 1, T, T)
    keys = tfm_ref.key_mask(tfm_ref.padding_mask(src_lengths, src_len))  # (B, 1, 1, S)
    return self_mask, keys.expand(batch, 1, tgt_len, src_len)  # (B, 1, T, S)


# --------------------------------------------------------------------------- 1. cross_attention (one head)

def _source_lengths(gen: torch.Generator, batch: int, src_len: int) -> torch.Tensor:
    """(B,) lengths in [1, S − 1]: every source is padded when it can be (S ≥ 2), so that a reversed mask
    leaves every query a key to see."""
    return torch.randint(1, max(src_len - 1, 1) + 1, (batch,), generator=gen)


def _weights(gen: torch.Generator, dims, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    scale = 1 / math.sqrt(dims["D"])  # keeps the scores O(1)
    return tuple(randn(gen, dims["D"], dims[width], dtype=dtype) * scale for width in ("Dk", "Dk", "Dv"))


def _cross_unmasked(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    x = randn(gen, dims["B"], dims["T"], dims["D"], dtype=dtype)
    memory = randn(gen, dims["B"], dims["S"], dims["D"], dtype=dtype)
    return Call(x, memory, *_weights(gen, dims, dtype))


def _cross_masked(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    call = _cross_unmasked(gen, dims, dtype)
    return Call(*call.args, src_mask=tfm_ref.padding_mask(_source_lengths(gen, dims["B"], dims["S"]), dims["S"]))


def _cross_empty_source(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    call = _cross_unmasked(gen, dims, dtype)
    lengths = _source_lengths(gen, dims["B"], dims["S"])
    lengths[-1] = 0  # nothing to look at: zero weights and a zero output, not NaN
    return Call(*call.args, src_mask=tfm_ref.padding_mask(lengths, dims["S"]))


def _cross_kv_from_x(x, memory, w_q, w_k, w_v, src_mask=None):
    return cross_attention_reference(x, x, w_q, w_k, w_v, src_mask)


def _cross_q_from_memory(x, memory, w_q, w_k, w_v, src_mask=None):
    return cross_attention_reference(memory, x, w_q, w_k, w_v, src_mask)


def _cross_mask_ignored(x, memory, w_q, w_k, w_v, src_mask=None):
    return cross_attention_reference(x, memory, w_q, w_k, w_v)


def _cross_mask_inverted(x, memory, w_q, w_k, w_v, src_mask=None):
    return cross_attention_reference(x, memory, w_q, w_k, w_v, None if src_mask is None else ~src_mask)


def _cross_keys_with_w_q(x, memory, w_q, w_k, w_v, src_mask=None):
    return cross_attention_reference(x, memory, w_q, w_q, w_v, src_mask)


def _cross_values_from_x(x, memory, w_q, w_k, w_v, src_mask=None):
    mask = None if src_mask is None else src_mask[:, None, :]  # (B, 1, S)
    return tfm_ref.scaled_dot_product_attention(x @ w_q, memory @ w_k, x @ w_v, mask, return_weights=True)


def _cross_values_with_w_k(x, memory, w_q, w_k, w_v, src_mask=None):
    return cross_attention_reference(x, memory, w_q, w_k, w_k, src_mask)


def _cross_mask_on_the_query_axis(x, memory, w_q, w_k, w_v, src_mask=None):
    mask = None if src_mask is None else src_mask[:, :, None]  # (B, S, 1): against (B, T, S) scores
    return tfm_ref.scaled_dot_product_attention(x @ w_q, memory @ w_k, memory @ w_v, mask, return_weights=True)


def _cross_all_from_memory(x, memory, w_q, w_k, w_v, src_mask=None):
    return cross_attention_reference(memory, memory, w_q, w_k, w_v, src_mask)


def _cross_causal(name: str):
    def cross_attention(x, memory, w_q, w_k, w_v, src_mask=None):
        q, k, v = x @ w_q, memory @ w_k, memory @ w_v  # (B, T, Dk), (B, S, Dk), (B, S, Dv)
        mask = _look_ahead(q.shape[1], k.shape[1], name)  # (T, S)
        if src_mask is not None:
            mask = mask & src_mask[:, None, :]  # (B, T, S)
        return tfm_ref.scaled_dot_product_attention(q, k, v, mask, return_weights=True)
    return cross_attention


def _causal_cross_mistakes(impl, hint: str, fix: str) -> list[Mistake]:
    """A look-ahead mask on cross-attention, placed each way of `LOOK_AHEADS`: ``impl(name)`` makes each."""
    return [Mistake(name, impl(name), hint, fix) for name in LOOK_AHEADS]


def _cross_no_scaling(x, memory, w_q, w_k, w_v, src_mask=None):
    return cross_attention_reference(x * math.sqrt(w_q.shape[-1]), memory, w_q, w_k, w_v, src_mask)


def _cross_scaled_by_d_model(x, memory, w_q, w_k, w_v, src_mask=None):
    # scores / √D instead of / √d_k, written as queries scaled by √(d_k / D)
    return cross_attention_reference(x * math.sqrt(w_q.shape[-1] / x.shape[-1]), memory, w_q, w_k, w_v, src_mask)


def _cross_mask_without_query_axis(x, memory, w_q, w_k, w_v, src_mask=None):
    # (B, S) against (B, T, S) scores: right-aligned, so B lines up with T (an error, or the wrong rows)
    return tfm_ref.scaled_dot_product_attention(x @ w_q, memory @ w_k, memory @ w_v, src_mask, return_weights=True)


def _cross_memory_unprojected(x, memory, w_q, w_k, w_v, src_mask=None):
    mask = None if src_mask is None else src_mask[:, None, :]  # (B, 1, S)
    return tfm_ref.scaled_dot_product_attention(x @ w_q, memory, memory, mask, return_weights=True)


def _cross_nan_empty_source(x, memory, w_q, w_k, w_v, src_mask=None):
    scores = (x @ w_q) @ (memory @ w_k).transpose(-2, -1) / math.sqrt(w_q.shape[-1])  # (B, T, S)
    if src_mask is not None:
        scores = scores.masked_fill(~src_mask[:, None, :], float("-inf"))
    weights = plain_softmax(scores)
    return weights @ (memory @ w_v), weights


def _in_cross_attention(mistake: Mistake) -> Mistake:
    """Chapter 1's ``mistake``, made by a cross-attention that writes its attention step by hand."""
    def cross_attention(x, memory, w_q, w_k, w_v, src_mask=None):
        mask = None if src_mask is None else src_mask[:, None, :]  # (B, 1, S)
        return mistake.impl(x @ w_q, memory @ w_k, memory @ w_v, mask, return_weights=True)
    return Mistake(mistake.name, cross_attention, mistake.hint, mistake.fix)


# not those named below in cross-attention's own terms: the scaling, the source mask ignored or inverted, NaN
# for a source with no real token
_NAMED_IN_CROSS_TERMS = {"missing scaling", "mask ignored", "mask polarity inverted", "NaN for fully masked rows"}
CHAPTER_1_MISTAKES = [_in_cross_attention(m) for m in (*ATTENTION_MISTAKES, *MASK_MISTAKES)
                      if m.name not in _NAMED_IN_CROSS_TERMS]


CROSS_ATTENTION = Exercise(
    name="cross_attention",
    reference=cross_attention_reference,
    inputs=_cross_unmasked,
    arg_names=("x", "memory", "w_q", "w_k", "w_v"),
    shapes=[dict(B=1, T=1, S=2, D=2, Dk=2, Dv=1), dict(B=1, T=2, S=3, D=2, Dk=2, Dv=2),
            dict(B=1, T=2, S=4, D=4, Dk=2, Dv=2), dict(B=2, T=3, S=5, D=8, Dk=4, Dv=3)],
    # the notebook's text: a source with no real token leaves its queries nothing to see (zeros, never NaN)
    visible=[Case("3 target and 5 source positions, no padding"), Case("padded sources", inputs=_cross_masked),
             Case("a source with no real token (fully masked rows)", inputs=_cross_empty_source)],
    hidden=[
        Case("random sizes", dims=random_dims(B=(1, 3), T=(1, 7), S=(1, 9), D=(1, 12), Dk=(1, 8), Dv=(1, 6)),
             inputs=_cross_masked),
        Case("longer target than source", dims=dict(B=2, T=6, S=3, D=8, Dk=4, Dv=3), inputs=_cross_masked),
        Case("length-1 target (one decoding step)", dims=dict(B=2, T=1, S=5, D=8, Dk=4, Dv=3), inputs=_cross_masked),
        Case("length-1 source", dims=dict(B=2, T=4, S=1, D=8, Dk=4, Dv=3), inputs=_cross_masked),
        Case("a source with no real token (fully masked rows)", inputs=_cross_empty_source),
        Case("float64", dtype=torch.float64, inputs=_cross_masked),
        Case("large scores", inputs=lambda gen, dims, dtype: _cross_masked(gen, dims, dtype).scaled(8.0)),
        Case("gradients", grad=True, inputs=_cross_masked),
    ],
    mistakes=[
        Mistake("keys and values taken from x instead of memory", _cross_kv_from_x,
                "in cross-attention only the queries come from the decoder (x); the keys and values come from "
                "the encoder's output, so that the weights are n_tgt × n_src.",
                "k = memory @ w_k, v = memory @ w_v."),
        *(Mistake(name, impl, "the queries come from the decoder, one row per target position; the memory gives "
                                  "the keys and values.", "q = x @ w_q.")
          for name, impl in (("queries taken from memory", _cross_q_from_memory),
                             ("queries, keys and values all taken from memory", _cross_all_from_memory))),
        Mistake("keys projected with w_q", _cross_keys_with_w_q,
                "queries and keys are two different learned projections: the keys use their own matrix, so that "
                "what a position asks for and what it offers can differ.",
                "k = memory @ w_k."),
        Mistake("values taken from x instead of memory", _cross_values_from_x,
                "the keys and the values both come from the encoder's output: each source position offers a key "
                "to be matched and the value that is then mixed, so both have S rows.",
                "v = memory @ w_v."),
        Mistake("values projected with w_k", _cross_values_with_w_k,
                "the values have a projection of their own, w_v (D, Dv): memory @ w_k gives Dk-wide values, so "
                "the output has Dk columns instead of Dv (and mixes what the keys offer, not the values).",
                "v = memory @ w_v."),
        Mistake("source mask on the query axis", _cross_mask_on_the_query_axis,
                "src_mask[:, :, None] is (B, S, 1): it lines the source positions up with the scores' target "
                "axis. The mask blocks keys, the scores' last axis.",
                "src_mask[:, None, :], (B, 1, S): the same keys for every target position."),
        Mistake("keys and values are the memory itself (not projected)", _cross_memory_unprojected,
                "the keys and values are learned projections of the memory, never the memory itself.",
                "k = memory @ w_k and v = memory @ w_v."),
        Mistake("source padding mask ignored", _cross_mask_ignored,
                "padded source tokens must get zero weight; yours get some.",
                "pass src_mask[:, None, :] (B, 1, S) to the attention, which fills the blocked scores with -inf."),
        Mistake("source mask without the query axis", _cross_mask_without_query_axis,
                "src_mask is (B, S) and the scores (B, T, S): shapes line up from the right, so the batch axis of "
                "the mask meets the target axis of the scores — an error, or the wrong sources' padding.",
                "add the query axis: src_mask[:, None, :] is (B, 1, S), the same keys for every target position."),
        Mistake("source mask polarity inverted", _cross_mask_inverted,
                "src_mask is True for the real tokens (may attend); you blocked them and let the padding through.",
                "fill where ~src_mask (the given attention does this with src_mask[:, None, :] as its mask)."),
        *_causal_cross_mistakes(_cross_causal, "the whole source is known before decoding starts, so target "
                                "position t may read every real source token; a look-ahead mask hides part of the "
                                "source.", "use the source padding mask only."),
        Mistake("NaN for a source with no real token", _cross_nan_empty_source,
                "a source with no real token blocks every key, and the softmax of a row of −inf is NaN; such "
                "queries must get zero weights and a zero output.",
                "use the given scaled_dot_product_attention (or a softmax that gives zeros for an all −inf row, "
                "as chapter 1's)."),
        Mistake("missing scaling", _cross_no_scaling,
                "the scores are not divided by √d_k before the softmax.",
                "divide (x @ w_q) @ (memory @ w_k).transpose(-2, -1) by math.sqrt(w_q.shape[-1])."),
        Mistake("scaled by √d_model instead of √d_k", _cross_scaled_by_d_model,
                "the scores are dot products of d_k-wide queries and keys, so their spread grows with √d_k; you "
                "divided by √d_model, the width of x and memory.",
                "divide by math.sqrt(w_q.shape[-1]) (d_k), not math.sqrt(x.shape[-1])."),
        *CHAPTER_1_MISTAKES,
    ],
    forbidden=(cross_attention_reference, *ATTENTION_LIBRARY),
    output_names=("output", "weights"),
    allowed=GIVEN_HELPERS,
)


# --------------------------------------------------------------------------- 2. MultiHeadAttention with a context

def _mha_cross(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    x = randn(gen, dims["B"], dims["T"], dims["D"], dtype=dtype)
    memory = randn(gen, dims["B"], dims["S"], dims["D"], dtype=dtype)
    return Call(x, memory)


def _mha_cross_masked(empty: bool = False):
    """Cross-attention with a source padding mask (B, 1, 1, S); with ``empty`` the last source is all padding."""
    def inputs(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
        x, memory = _mha_cross(gen, dims, dtype).args
        return Call(x, memory, key_padding(gen, dims["B"], dims["S"], empty))
    return inputs


def _mha_self(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    return Call(randn(gen, dims["B"], dims["T"], dims["D"], dtype=dtype), mask=tfm_ref.causal_mask(dims["T"]))


class _MHAKeysFromX(BrokenMultiHeadAttention):
    def sources(self, x, context):
        return x, x


class _MHAQueriesFromContext(BrokenMultiHeadAttention):
    def sources(self, x, context):
        return (x, x) if context is None else (context, x)


class _MHAAllFromContext(BrokenMultiHeadAttention):
    def sources(self, x, context):
        return (x, x) if context is None else (context, context)


class _MHAValuesFromX(BrokenMultiHeadAttention):
    def forward(self, x, context=None, mask=None):
        source = x if context is None else context
        q = self.split(self.q_proj(x), self.n_heads)  # (B, H, T, Dh)
        k = self.split_kv(self.k_proj(source))  # (B, G, S, Dh)
        v = self.split_kv(self.v_proj(x))  # (B, G, T, Dh): the decoder's, not the context's
        n_rep = self.n_heads // self.n_kv_heads
        return self.project_out(self.merge(self.attend(q, self.repeat(k, n_rep), self.repeat(v, n_rep), mask)))


def _mha_causal_cross(name: str) -> type[BrokenMultiHeadAttention]:
    class CausalCross(BrokenMultiHeadAttention):
        def attend(self, q, k, v, mask):
            look_ahead = _look_ahead(q.shape[-2], k.shape[-2], name)  # (T, S)
            return tfm_ref.scaled_dot_product_attention(q, k, v, look_ahead if mask is None else mask & look_ahead)
    return CausalCross


# The largest, the visible cases', has H / G ≠ G, as in chapter 2.
_CROSS_SHAPES = [dict(B=1, T=1, S=2, D=2, H=1, G=1), dict(B=1, T=2, S=3, D=4, H=2, G=1),
                 dict(B=1, T=2, S=3, D=4, H=2, G=2), dict(B=1, T=2, S=3, D=4, H=4, G=2),
                 dict(B=2, T=3, S=5, D=18, H=6, G=2)]

CROSS_MULTIHEAD = Exercise(
    name="MultiHeadAttention",
    key="cross_multihead",
    reference=tfm_ref.MultiHeadAttention,
    adapter=ModuleAdapter(mha_kwargs),
    inputs=_mha_cross,
    arg_names=("x", "context", "mask"),
    shapes=_CROSS_SHAPES,
    visible=[Case("cross-attention, 3 target and 5 source positions"),
             Case("cross-attention with a source padding mask", inputs=_mha_cross_masked()),
             Case("a source that is all padding (fully masked rows)", inputs=_mha_cross_masked(empty=True)),
             Case("n_kv_heads=None (MHA)", dims=dict(B=2, T=3, S=5, D=12, H=3), inputs=_mha_cross_masked())],
    hidden=[
        Case("random sizes", dims=mha_dims(cross=True), inputs=_mha_cross_masked()),
        Case("MHA (G = H)", dims=dict(B=2, T=4, S=6, D=12, H=3, G=3), inputs=_mha_cross_masked()),
        Case("MQA (G = 1)", dims=dict(B=2, T=4, S=6, D=16, H=4, G=1), inputs=_mha_cross_masked()),
        Case("length-1 target (one decoding step)", dims=dict(B=2, T=1, S=5, D=8, H=4, G=2), inputs=_mha_cross_masked()),
        Case("longer target than source", dims=dict(B=2, T=6, S=2, D=8, H=2, G=1), inputs=_mha_cross_masked()),
        Case("a source that is all padding (fully masked rows)", inputs=_mha_cross_masked(empty=True)),
        Case("n_kv_heads=None (MHA)", dims=dict(B=2, T=3, S=5, D=12, H=3), inputs=_mha_cross_masked()),
        Case("no biases (bias=False)", dims=dict(B=2, T=3, S=5, D=8, H=4, G=2, bias=0), inputs=_mha_cross_masked()),
        Case("self-attention still works (context=None)", inputs=_mha_self),
        Case("gradients (inputs and weights)", grad=True, inputs=_mha_cross_masked()),
    ],
    mistakes=[
        Mistake("keys and values taken from x instead of the context", _MHAKeysFromX,
                "when `context` is given, the keys and values come from it (the encoder's output); only the "
                "queries come from x.",
                "source = x if context is None else context; k_proj and v_proj read source, q_proj reads x."),
        Mistake("values taken from x, keys from the context", _MHAValuesFromX,
                "the keys and the values both come from the context: each source position offers a key to match "
                "and the value then mixed, so both have S positions; values from x have T, and with T ≠ S the "
                "attention cannot pair them.",
                "v = split_heads(self.v_proj(source), self.n_kv_heads), with source = x if context is None else "
                "context, as for the keys."),
        *(Mistake(name, impl, "the queries come from x (the decoder, T positions) and the context gives the keys "
                              "and values (S positions), so the output is (B, T, D).",
                  "q = split_heads(self.q_proj(x), self.n_heads); only k_proj and v_proj read the context.")
          for name, impl in (("queries taken from the context", _MHAQueriesFromContext),
                             ("queries, keys and values all taken from the context", _MHAAllFromContext))),
        Mistake("source padding mask ignored", MaskIgnoredMultiHeadAttention,
                "the mask is not passed on to the attention, so padded source tokens still get weight.",
                "scaled_dot_product_attention(q, k, v, mask): the source mask (B, 1, 1, S) broadcasts over heads "
                "and target positions."),
        *_causal_cross_mistakes(_mha_causal_cross, "cross-attention needs no look-ahead mask: every target "
                                "position may see the whole (real) source.", "pass only the mask you are given."),
        # Chapter 2's, but for the mask, which is the source's here (above).
        *(m for m in MULTIHEAD_MISTAKES if m.impl is not MaskIgnoredMultiHeadAttention),
    ],
    forbidden=ATTENTION_LIBRARY,
    allowed=GIVEN_HELPERS,
)


# --------------------------------------------------------------------------- 3. the masks of an encoder-decoder step

def _masks_inputs(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    """Random source lengths, the first S − 1 (when S ≥ 2): a long source, so that a look-ahead on the
    cross_mask blocks a real token on every draw (with short sources alone it often blocks only padding)."""
    lengths = _source_lengths(gen, dims["B"], dims["S"])
    lengths[0] = max(dims["S"] - 1, 1)
    return Call(lengths, dims["S"], dims["T"])


def _masks_empty_source(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    lengths = _source_lengths(gen, dims["B"], dims["S"])
    lengths[-1] = 0
    return Call(lengths.tolist(), dims["S"], dims["T"])


def _masks_causal_cross(name: str):
    def encoder_decoder_masks(src_lengths, src_len, tgt_len):
        self_mask, cross_mask = encoder_decoder_masks_reference(src_lengths, src_len, tgt_len)
        return self_mask, cross_mask & _look_ahead(tgt_len, src_len, name)
    return encoder_decoder_masks


def _masks_no_padding(src_lengths, src_len, tgt_len):
    self_mask, cross_mask = encoder_decoder_masks_reference(src_lengths, src_len, tgt_len)
    return self_mask, torch.ones_like(cross_mask)


def _masks_not_causal(src_lengths, src_len, tgt_len):
    self_mask, cross_mask = encoder_decoder_masks_reference(src_lengths, src_len, tgt_len)
    return torch.ones_like(self_mask), cross_mask


def _masks_swapped(src_lengths, src_len, tgt_len):
    self_mask, cross_mask = encoder_decoder_masks_reference(src_lengths, src_len, tgt_len)
    return cross_mask, self_mask


def _masks_roles_swapped(src_lengths, src_len, tgt_len):
    batch = len(src_lengths)
    keys = tfm_ref.key_mask(tfm_ref.padding_mask(src_lengths, tgt_len))  # the source padding, over the targets
    look_ahead = tfm_ref.causal_mask(tgt_len, src_len)  # (T, S), aligned to the end: no padding at all
    return keys.expand(batch, 1, tgt_len, tgt_len), look_ahead.expand(batch, 1, tgt_len, src_len)


def _masks_source_padding_on_self(src_lengths, src_len, tgt_len):
    self_mask, cross_mask = encoder_decoder_masks_reference(src_lengths, src_len, tgt_len)
    keys = tfm_ref.key_mask(tfm_ref.padding_mask(src_lengths, tgt_len))  # the source's lengths, over the targets
    return self_mask & keys, cross_mask


def _masks_shape_of_list(src_lengths, src_len, tgt_len):
    self_mask, cross_mask = encoder_decoder_masks_reference(src_lengths, src_len, tgt_len)
    return self_mask[: src_lengths.shape[0]], cross_mask  # the batch size read from .shape, which a list lacks


def _masks_cross_not_expanded(src_lengths, src_len, tgt_len):
    self_mask, cross_mask = encoder_decoder_masks_reference(src_lengths, src_len, tgt_len)
    return self_mask, cross_mask[:, :, :1]  # (B, 1, 1, S)


def _masks_self_not_expanded(src_lengths, src_len, tgt_len):
    self_mask, cross_mask = encoder_decoder_masks_reference(src_lengths, src_len, tgt_len)
    return self_mask[0, 0], cross_mask  # (T, T)


def _masks_inverted_padding(src_lengths, src_len, tgt_len):
    self_mask, cross_mask = encoder_decoder_masks_reference(src_lengths, src_len, tgt_len)
    return self_mask, ~cross_mask


def _chapter_3_mask_mistake(mistake: Mistake, mask: str) -> Mistake:
    """Chapter 3's ``mistake`` of causal_mask (``mask="self_mask"``) or of padding_mask ("cross_mask"), made
    by an encoder_decoder_masks that builds that mask by hand."""
    def encoder_decoder_masks(src_lengths, src_len, tgt_len):
        self_mask, cross_mask = encoder_decoder_masks_reference(src_lengths, src_len, tgt_len)
        batch = self_mask.shape[0]
        if mask == "self_mask":
            self_mask = mistake.impl(tgt_len).expand(batch, 1, tgt_len, tgt_len)
        else:
            keys = tfm_ref.key_mask(mistake.impl(torch.as_tensor(src_lengths), src_len))  # (B, 1, 1, S)
            cross_mask = keys.expand(batch, 1, tgt_len, src_len)
        return self_mask, cross_mask
    return Mistake(f"{mask}: {mistake.name}", encoder_decoder_masks, mistake.hint, mistake.fix)


CHAPTER_3_MASK_MISTAKES = [
    *(_chapter_3_mask_mistake(m, "self_mask") for m in CAUSAL_MASK.mistakes
      if m.name in ("upper instead of lower triangle", "diagonal excluded", "polarity inverted (True = blocked)")),
    *(_chapter_3_mask_mistake(m, "cross_mask") for m in PADDING_MASK.mistakes
      if m.name in ("off by one (<= instead of <)", "real tokens at the end (left padding)")),
]

ENCODER_DECODER_MASKS = Exercise(
    name="encoder_decoder_masks",
    reference=encoder_decoder_masks_reference,
    inputs=_masks_inputs,
    arg_names=("src_lengths", "src_len", "tgt_len"),
    # no (S=2, T=1): at T = 1 every self_mask is [[True]], so a self/cross mix-up would be shown where only the
    # cross_mask differs; from (S=3, T=2) on, T ≠ S and both masks show it
    shapes=[dict(B=1, S=1, T=1), dict(B=1, S=3, T=2), dict(B=2, S=4, T=3), dict(B=3, S=5, T=4)],
    visible=[Case("3 sources padded to 5, a target of 4")],
    hidden=[
        Case("random sizes", dims=random_dims(B=(1, 5), S=(1, 9), T=(1, 9))),
        Case("target longer than the source", dims=dict(B=2, S=3, T=6)),
        Case("one target position", dims=dict(B=2, S=5, T=1)),
        Case("a source with no real token, lengths as a list", inputs=_masks_empty_source),
    ],
    mistakes=[
        *_causal_cross_mistakes(_masks_causal_cross, "the look-ahead mask belongs to the decoder's *self*-attention "
                                "only; cross-attention may see the whole source (every real token).",
                                "cross_mask is the source padding mask alone, expanded to (B, 1, T, S)."),
        Mistake("source padding mask missing", _masks_no_padding,
                "cross-attention must not look at padded source tokens; your cross_mask lets them through.",
                "padding_mask(src_lengths, src_len)[:, None, None, :], expanded to (B, 1, T, S)."),
        Mistake("no causal mask on self-attention", _masks_not_causal,
                "the decoder's self-attention must not see future target positions; your self_mask allows them.",
                "causal_mask(tgt_len), expanded to (B, 1, T, T)."),
        Mistake("masks swapped", _masks_swapped,
                "self-attention is target × target (T, T) and cross-attention target × source (T, S); you "
                "returned them the other way round.",
                "return (self_mask, cross_mask)."),
        Mistake("roles swapped: padding on self_mask, look-ahead on cross_mask", _masks_roles_swapped,
                "the look-ahead (causal) mask belongs to the decoder's self-attention, target × target, and the "
                "source padding mask to cross-attention, target × source; yours puts the source padding on the "
                "self-attention and the look-ahead on the cross-attention (their shapes are right, their roles "
                "are swapped).",
                "self_mask = causal_mask(tgt_len).expand(B, 1, tgt_len, tgt_len); cross_mask = "
                "padding_mask(src_lengths, src_len)[:, None, None, :].expand(B, 1, tgt_len, src_len)."),
        Mistake("source padding applied to the self-attention too", _masks_source_padding_on_self,
                "the source's lengths count source tokens: they say nothing about the target positions, which the "
                "look-ahead mask alone governs (a real target position never sees a later, padded one). Your "
                "self_mask also blocks the target positions past each source's length.",
                "self_mask = causal_mask(tgt_len).expand(B, 1, tgt_len, tgt_len), without the padding mask; the "
                "padding mask goes on cross_mask only."),
        Mistake("source padding polarity inverted", _masks_inverted_padding,
                "True marks the real source tokens (may attend), not the padding.",
                "use the padding mask as it is (True = real), without negating it."),
        Mistake("cross_mask not expanded over the target positions", _masks_cross_not_expanded,
                "your cross_mask is (B, 1, 1, S); the exercise asks for the full (B, 1, T, S), one row per target "
                "position.",
                ".expand(B, 1, tgt_len, src_len)."),
        Mistake("self_mask without its batch axes", _masks_self_not_expanded,
                "your self_mask is (T, T); the exercise asks for the full (B, 1, T, T), one per sequence.",
                "causal_mask(tgt_len).expand(B, 1, tgt_len, tgt_len)."),
        Mistake("lengths as a list not turned into a tensor", _masks_shape_of_list,
                "`src_lengths` may be a Python list, which has no .shape.",
                "src_lengths = torch.as_tensor(src_lengths) first (or take the batch size from len(src_lengths))."),
        *CHAPTER_3_MASK_MISTAKES,
    ],
    forbidden=(encoder_decoder_masks_reference, *ATTENTION_LIBRARY),
    allowed=(tfm_ref.causal_mask, tfm_ref.padding_mask, tfm_ref.key_mask),
    output_names=("self_mask", "cross_mask"),
)

EXERCISES = (CROSS_ATTENTION, CROSS_MULTIHEAD, ENCODER_DECODER_MASKS)
