"""Chapter 1 exercises — softmax, scaled dot-product attention, and attention with a mask.

    Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V          (Vaswani et al. 2017, eq. 1)

Each exercise is checked against `tfm_ref`; each `Mistake` is a broken version that a
student plausibly writes, with the hint the failure gives. `tests/test_exercises_ch01.py`
proves every check passes the reference and fails every mistake with its hint.

Shapes: B batch · H heads · T query positions · S key positions · Dk query/key width · Dv value width.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

import tfm_ref

from ..checking import Call, Case, Exercise, Mistake, randn, random_dims

__all__ = ["SOFTMAX", "ATTENTION", "MASKED_ATTENTION", "EXERCISES"]

# Library functions that would do the softmax for the student.
SOFTMAX_LIBRARY = (torch.softmax, torch.Tensor.softmax, F.softmax, torch.special.softmax, torch.nn.Softmax,
                   torch._softmax, torch.log_softmax, torch.Tensor.log_softmax, F.log_softmax)
ATTENTION_LIBRARY = (F.scaled_dot_product_attention, torch.nn.MultiheadAttention, F.multi_head_attention_forward)


# --------------------------------------------------------------------------- 1. softmax

def _logits(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    return Call(randn(gen, dims["B"], dims["T"], dims["D"], dtype=dtype) * 3, dim=-1)


def _logits_dim0(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    return Call(randn(gen, dims["B"], dims["T"], dims["D"], dtype=dtype) * 3, dim=0)


def _softmax_unstable(x, dim=-1):
    exp = torch.exp(x)
    return exp / exp.sum(dim=dim, keepdim=True)


def _softmax_last_axis_always(x, dim=-1):
    return tfm_ref.softmax(x, dim=-1)


def _softmax_first_axis(x, dim=-1):
    return tfm_ref.softmax(x, dim=0)


def _softmax_whole_tensor(x, dim=-1):
    shifted = torch.exp(x - x.max())
    return shifted / shifted.sum()


SOFTMAX = Exercise(
    name="softmax",
    reference=tfm_ref.softmax,
    inputs=_logits,
    arg_names=("x",),
    shapes=[dict(B=1, T=1, D=2), dict(B=1, T=2, D=3), dict(B=2, T=2, D=3), dict(B=2, T=3, D=5)],
    visible=[Case("random logits, last axis")],
    hidden=[
        Case("random sizes", dims=random_dims(B=(1, 4), T=(1, 9), D=(1, 17))),
        Case("softmax over dim=0", inputs=_logits_dim0),
        Case("length-1 rows", dims=dict(B=2, T=3, D=1)),
        Case("float64", dtype=torch.float64),
        Case("huge logits", inputs=lambda gen, dims, dtype: _logits(gen, dims, dtype).scaled(1e3)),
        Case("gradients", grad=True),
    ],
    mistakes=[
        Mistake("exp without subtracting the maximum", _softmax_unstable,
                "exp(x) overflows to inf for large logits (exp(1000) = inf, and inf/inf = NaN). "
                "Subtract the row maximum first: softmax(x) = softmax(x - max(x))."),
        Mistake("softmax over the wrong axis (dim ignored)", _softmax_last_axis_always,
                "you always normalise over the last axis; use the `dim` argument."),
        Mistake("softmax over the wrong axis (first axis)", _softmax_first_axis,
                "you normalised over axis 0; each slice along `dim` must sum to 1."),
        Mistake("normalised over the whole tensor", _softmax_whole_tensor,
                "you divided by the sum of every element; sum along `dim` only, with keepdim=True."),
    ],
    forbidden=SOFTMAX_LIBRARY,
)


# --------------------------------------------------------------------------- 2. attention

def _qkv(gen: torch.Generator, dims, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    batch = (dims["B"], dims["H"]) if "H" in dims else (dims["B"],)
    q = randn(gen, *batch, dims["T"], dims["Dk"], dtype=dtype)
    k = randn(gen, *batch, dims["S"], dims["Dk"], dtype=dtype)
    v = randn(gen, *batch, dims["S"], dims["Dv"], dtype=dtype)
    return q, k, v


def _attention_inputs(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    return Call(*_qkv(gen, dims, dtype), return_weights=True)


def _attention_output_only(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    return Call(*_qkv(gen, dims, dtype))


def _weights_out(weights: torch.Tensor, v: torch.Tensor, return_weights: bool):
    out = weights @ v  # (…, T, Dv)
    return (out, weights) if return_weights else out


def _scores(q, k, mask=None, fill=float("-inf")):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (…, T, S)
    return scores if mask is None else scores.masked_fill(~mask, fill)


def _attention_no_scaling(q, k, v, mask=None, *, return_weights=False):
    return _weights_out(tfm_ref.softmax(q @ k.transpose(-2, -1), dim=-1), v, return_weights)


def _attention_scale_by_dk(q, k, v, mask=None, *, return_weights=False):
    return _weights_out(tfm_ref.softmax(q @ k.transpose(-2, -1) / q.shape[-1], dim=-1), v, return_weights)


def _attention_scale_by_dv(q, k, v, mask=None, *, return_weights=False):
    scores = q @ k.transpose(-2, -1) / math.sqrt(v.shape[-1])  # (…, T, S)
    return _weights_out(tfm_ref.softmax(scores, dim=-1), v, return_weights)


def _attention_softmax_over_queries(q, k, v, mask=None, *, return_weights=False):
    return _weights_out(tfm_ref.softmax(_scores(q, k), dim=-2), v, return_weights)


def _attention_scale_after_softmax(q, k, v, mask=None, *, return_weights=False):
    weights = tfm_ref.softmax(q @ k.transpose(-2, -1), dim=-1) / math.sqrt(q.shape[-1])  # (…, T, S)
    return _weights_out(weights, v, return_weights)


ATTENTION_MISTAKES = [
    Mistake("missing scaling", _attention_no_scaling,
            "the scores must be divided by √d_k (q.shape[-1]) before the softmax; without it large "
            "d_k makes the softmax saturate."),
    Mistake("wrong scaling: d_k instead of √d_k", _attention_scale_by_dk,
            "divide the scores by the square root of d_k, math.sqrt(q.shape[-1]), not by d_k."),
    Mistake("wrong scaling: √d_v", _attention_scale_by_dv,
            "the scale is √d_k, the width of the queries and keys (q.shape[-1]), not of the values."),
    Mistake("softmax over the wrong axis (queries)", _attention_softmax_over_queries,
            "the softmax runs over the keys, the last axis of the (…, T, S) scores: each query's weights sum to 1."),
    Mistake("scaling after the softmax", _attention_scale_after_softmax,
            "divide the scores by √d_k before the softmax; dividing the weights afterwards breaks "
            "their sum to 1."),
]

_ATTENTION_SHAPES = [
    dict(B=1, T=1, S=1, Dk=1, Dv=1), dict(B=1, T=1, S=2, Dk=2, Dv=1), dict(B=1, T=2, S=2, Dk=2, Dv=2),
    dict(B=1, T=2, S=3, Dk=4, Dv=2), dict(B=2, T=3, S=4, Dk=8, Dv=3),
]

ATTENTION = Exercise(
    name="scaled_dot_product_attention",
    key="attention",
    reference=tfm_ref.scaled_dot_product_attention,
    inputs=_attention_inputs,
    arg_names=("q", "k", "v"),
    shapes=_ATTENTION_SHAPES,
    visible=[Case("random q, k, v (output and weights)")],
    hidden=[
        Case("output only (return_weights=False)", inputs=_attention_output_only),
        Case("random sizes", dims=random_dims(B=(1, 3), T=(1, 7), S=(1, 9), Dk=(1, 16), Dv=(1, 6))),
        Case("batch and heads (B, H, T, Dk)", dims=dict(B=2, H=3, T=4, S=5, Dk=8, Dv=4)),
        Case("length-1 sequences", dims=dict(B=2, T=1, S=1, Dk=4, Dv=3)),
        Case("float64", dtype=torch.float64),
        Case("large scores", inputs=lambda gen, dims, dtype: _attention_inputs(gen, dims, dtype).scaled(30.0)),
        Case("gradients", grad=True),
    ],
    mistakes=ATTENTION_MISTAKES,
    forbidden=ATTENTION_LIBRARY,
)


# --------------------------------------------------------------------------- 3. attention with a mask

def _random_mask(gen: torch.Generator, dims, empty_rows: bool) -> torch.Tensor:
    """A (B, 1, T, S) boolean mask, True = may attend; every row keeps a key unless ``empty_rows``."""
    mask = torch.rand(dims["B"], 1, dims["T"], dims["S"], generator=gen) < 0.6
    mask[..., 0] |= not empty_rows  # key 0 always visible, so no row is empty
    if empty_rows:
        mask[:, :, 0, :] = False  # query 0 sees nothing: zero weights and a zero output
    return mask


def _masked_inputs(gen: torch.Generator, dims, dtype: torch.dtype, empty_rows: bool = False) -> Call:
    q, k, v = _qkv(gen, {**dims, "H": 2}, dtype)  # (B, 2, T, Dk) …: the mask broadcasts over heads
    return Call(q, k, v, _random_mask(gen, dims, empty_rows), return_weights=True)


def _causal_inputs(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    q, k, v = _qkv(gen, {**dims, "S": dims["T"]}, dtype)
    return Call(q, k, v, tfm_ref.causal_mask(dims["T"]), return_weights=True)


def _mask_after_softmax(q, k, v, mask=None, *, return_weights=False):
    weights = tfm_ref.softmax(_scores(q, k), dim=-1)
    return _weights_out(weights if mask is None else weights * mask, v, return_weights)


def _mask_inverted(q, k, v, mask=None, *, return_weights=False):
    return tfm_ref.scaled_dot_product_attention(q, k, v, None if mask is None else ~mask, return_weights=return_weights)


def _mask_fill_zero(q, k, v, mask=None, *, return_weights=False):
    return _weights_out(tfm_ref.softmax(_scores(q, k, mask, 0.0), dim=-1), v, return_weights)


def _mask_nan_rows(q, k, v, mask=None, *, return_weights=False):
    scores = _scores(q, k, mask)
    exp = torch.exp(scores - scores.amax(dim=-1, keepdim=True))  # -inf - (-inf) = NaN on empty rows
    return _weights_out(exp / exp.sum(dim=-1, keepdim=True), v, return_weights)


def _mask_ignored(q, k, v, mask=None, *, return_weights=False):
    return tfm_ref.scaled_dot_product_attention(q, k, v, return_weights=return_weights)


def _mask_large_negative(q, k, v, mask=None, *, return_weights=False):
    return _weights_out(tfm_ref.softmax(_scores(q, k, mask, -1e9), dim=-1), v, return_weights)


MASKED_ATTENTION = Exercise(
    name="scaled_dot_product_attention",
    key="masked_attention",
    reference=tfm_ref.scaled_dot_product_attention,
    inputs=_masked_inputs,
    arg_names=("q", "k", "v", "mask"),
    shapes=[dict(B=1, T=1, S=2, Dk=2, Dv=1), dict(B=1, T=2, S=2, Dk=2, Dv=2), dict(B=1, T=2, S=3, Dk=4, Dv=2),
            dict(B=2, T=3, S=5, Dk=8, Dv=3)],
    visible=[Case("random padding-style mask, broadcast over heads")],
    hidden=[
        Case("causal mask (T, T)", inputs=_causal_inputs),
        Case("fully masked rows", inputs=lambda gen, dims, dtype: _masked_inputs(gen, dims, dtype, empty_rows=True)),
        Case("random sizes", dims=random_dims(B=(1, 3), T=(1, 7), S=(1, 9), Dk=(1, 16), Dv=(1, 6))),
        Case("mask=None still works", inputs=_attention_inputs, dims=dict(B=2, T=3, S=4, Dk=8, Dv=3)),
        Case("float64", dtype=torch.float64),
        Case("gradients", grad=True),
    ],
    mistakes=[
        Mistake("mask applied after the softmax", _mask_after_softmax,
                "masking the weights after the softmax leaves rows that no longer sum to 1; set the "
                "masked scores to -inf before the softmax (scores.masked_fill(~mask, float('-inf')))."),
        Mistake("mask polarity inverted", _mask_inverted,
                "in this course True means 'may attend' (as in F.scaled_dot_product_attention); you "
                "blocked the True positions. Fill where ~mask."),
        Mistake("masked scores set to 0 instead of -inf", _mask_fill_zero,
                "a score of 0 still gets weight exp(0) = 1 after the softmax; masked scores must be -inf."),
        Mistake("NaN for fully masked rows", _mask_nan_rows,
                "a query whose keys are all masked gives -inf - (-inf) = NaN; such rows must get zero "
                "weights and a zero output (e.g. use a softmax that returns 0 for an all -inf row)."),
        Mistake("mask ignored", _mask_ignored, "the mask argument is not used."),
        Mistake("large negative instead of -inf (fully masked rows)", _mask_large_negative,
                "with -1e9 a fully masked row becomes uniform (every weight 1/S) instead of zero; "
                "use -inf and give such rows zero weights."),
        *ATTENTION_MISTAKES,
    ],
    forbidden=ATTENTION_LIBRARY,
)

EXERCISES = (SOFTMAX, ATTENTION, MASKED_ATTENTION)
