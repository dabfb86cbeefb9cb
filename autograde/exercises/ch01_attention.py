"""Chapter 1 exercises — softmax, scaled dot-product attention, and attention with a mask.

    Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V          (Vaswani et al. 2017, eq. 1)

Each exercise is checked against `tfm_ref`; each `Mistake` is a broken version that a
student plausibly writes, with the hint the failure gives. `tests/test_exercises.py`
proves every check passes the reference and fails every mistake with its hint.

Shapes: B batch · H heads · T query positions · S key positions · Dk query/key width · Dv value width.
"""
from __future__ import annotations

import math
import warnings

import torch
import torch.nn.functional as F

import tfm_ref

from ..spec import Call, Case, Exercise, Mistake, randn, random_dims
from .shared import random_qkv

__all__ = ["SOFTMAX", "ATTENTION", "MASKED_ATTENTION", "EXERCISES", "ATTENTION_LIBRARY", "SOFTMAX_LIBRARY",
           "attention_variant", "ATTENTION_MISTAKES", "MASK_MISTAKES", "SOFTMAX_OVER_QUERIES", "plain_softmax"]

# Library functions that would do the softmax for the student.
SOFTMAX_LIBRARY = (torch.softmax, torch.Tensor.softmax, F.softmax, torch.special.softmax, torch.nn.Softmax,
                   torch._softmax, torch.log_softmax, torch.Tensor.log_softmax, F.log_softmax,
                   torch.special.log_softmax, torch._log_softmax, torch._safe_softmax, torch._masked_softmax,
                   torch.logsumexp, torch.Tensor.logsumexp, torch.special.logsumexp,  # exp(x − logsumexp x)
                   torch.logcumsumexp, torch.Tensor.logcumsumexp)  # its last entry is logsumexp
ATTENTION_LIBRARY = (F.scaled_dot_product_attention, torch._scaled_dot_product_attention_math, torch.nn.MultiheadAttention,
                     F.multi_head_attention_forward)


# --------------------------------------------------------------------------- 1. softmax

def _logits(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    return Call(randn(gen, dims["B"], dims["T"], dims["D"], dtype=dtype) * 3, dim=-1)


def _logits_dim0(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    return Call(randn(gen, dims["B"], dims["T"], dims["D"], dtype=dtype) * 3, dim=0)


def _logits_masked(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    """Masked scores: some entries −inf, and row 0 entirely (a query whose keys are all masked)."""
    x = randn(gen, dims["B"], dims["T"], dims["D"], dtype=dtype) * 3
    x = x.masked_fill(torch.rand(x.shape, generator=gen) < 0.3, float("-inf"))
    x[0, 0] = float("-inf")
    return Call(x, dim=-1)


def plain_softmax(x, dim=-1):
    """The stable softmax without the care for all −inf slices, which give NaN (as torch.softmax's do)."""
    exp = torch.exp(x - x.amax(dim=dim, keepdim=True))  # -inf - (-inf) = NaN on an all -inf row
    return exp / exp.sum(dim=dim, keepdim=True)


def _softmax_max_pair(x, dim=-1):
    exp = torch.exp(x - x.max(dim=dim, keepdim=True))  # a (values, indices) pair, not a tensor
    return exp / exp.sum(dim=dim, keepdim=True)


def _softmax_unstable(x, dim=-1):
    exp = torch.exp(x)
    return exp / exp.sum(dim=dim, keepdim=True)


def _softmax_last_axis_always(x, dim=-1):
    return tfm_ref.softmax(x, dim=-1)


def _softmax_first_axis(x, dim=-1):
    return tfm_ref.softmax(x, dim=0)


def _softmax_global_max(x, dim=-1):
    exp = torch.exp(x - x.max())  # one maximum for the whole tensor: rows far below it underflow to 0/0
    return exp / exp.sum(dim=dim, keepdim=True)


def _softmax_whole_tensor(x, dim=-1):
    shifted = torch.exp(x - x.max())
    return shifted / shifted.sum()


SOFTMAX = Exercise(
    name="softmax",
    reference=tfm_ref.softmax,
    inputs=_logits,
    arg_names=("x",),
    shapes=[dict(B=1, T=1, D=2), dict(B=1, T=2, D=3), dict(B=2, T=2, D=3), dict(B=2, T=3, D=5)],
    # the notebook asks for huge logits and an all −inf row: visible, so that a naive exp/sum or a NaN row fails
    # before grading; dim=0 before them, so that a softmax that ignores `dim` is named for that first
    visible=[Case("random logits, last axis"),
             Case("softmax over dim=0", inputs=_logits_dim0),
             Case("huge logits", inputs=lambda gen, dims, dtype: _logits(gen, dims, dtype).scaled(1e3)),
             Case("masked scores: −inf entries and an all −inf row", inputs=_logits_masked)],
    hidden=[
        Case("random sizes", dims=random_dims(B=(1, 4), T=(1, 9), D=(1, 17))),
        Case("length-1 rows", dims=dict(B=2, T=3, D=1)),
        Case("float64", dtype=torch.float64),
        Case("gradients", grad=True),
    ],
    mistakes=[
        # Before the overflow: on an all −inf row both give NaN, and only this one is right on huge logits.
        Mistake("NaN for an all −inf row", plain_softmax,
                "a row whose entries are all −inf (a query whose keys are all masked) has the maximum −inf, and "
                "−inf − (−inf) is NaN; with the maximum guarded, its exps sum to 0, and 0/0 is NaN too. The "
                "course wants zeros for such a row.",
                "replace a non-finite maximum by 0, torch.where(torch.isfinite(m), m, torch.zeros_like(m)), and "
                "divide by 1 where the sum is 0."),
        Mistake("x.max(dim=…) used as a tensor", _softmax_max_pair,
                "with a dim, max returns a pair (values, indices), not a tensor, so x − x.max(dim=…) cannot be "
                "computed.",
                "x.amax(dim=dim, keepdim=True) returns the maxima alone (or take .values of the pair)."),
        Mistake("exp without subtracting the maximum", _softmax_unstable,
                "exp(x) overflows to inf for large logits (exp(1000) = inf, and inf/inf = NaN).",
                "subtract the row maximum first, which leaves the softmax unchanged: "
                "exp(x − x.amax(dim=dim, keepdim=True))."),
        Mistake("softmax over the wrong axis (dim ignored)", _softmax_last_axis_always,
                "you always normalise over the last axis, whatever `dim` says.",
                "pass dim=dim (with keepdim=True) to the maximum and to the sum."),
        Mistake("softmax over the wrong axis (first axis)", _softmax_first_axis,
                "you normalised over axis 0; each slice along `dim` must sum to 1.",
                "reduce over dim=dim, not dim=0, with keepdim=True."),
        Mistake("one maximum for the whole tensor", _softmax_global_max,
                "subtracting any constant leaves a slice's softmax unchanged in exact arithmetic, but a slice far "
                "below the tensor's maximum underflows: exp gives 0 for all of its entries, and 0/0 is NaN. Each "
                "slice needs its own maximum.",
                "x.amax(dim=dim, keepdim=True), not x.max()."),
        Mistake("normalised over the whole tensor", _softmax_whole_tensor,
                "you divided by the sum of every element of the tensor; each slice along `dim` must sum to 1 on "
                "its own.",
                "exp.sum(dim=dim, keepdim=True), and the maximum likewise along dim."),
    ],
    forbidden=SOFTMAX_LIBRARY,
)


# --------------------------------------------------------------------------- 2. attention

def _attention_inputs(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    return Call(*random_qkv(gen, dims, dtype), return_weights=True)


def _attention_output_only(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    return Call(*random_qkv(gen, dims, dtype))


def _last_two(k: torch.Tensor) -> torch.Tensor:
    return k.transpose(-2, -1)  # (…, Dk, S)


def _all_axes_reversed(k: torch.Tensor) -> torch.Tensor:
    with warnings.catch_warnings():  # torch deprecates .T on more than two axes; the student's code warns, not this
        warnings.simplefilter("ignore")
        return k.T


def _root_dk(q: torch.Tensor, v: torch.Tensor) -> float:
    return math.sqrt(q.shape[-1])


def attention_variant(*, divisor=_root_dk, scale_after: bool = False, keys_t=_last_two, softmax_dim: int = -1,
                      masking: str = "before", fill: float = float("-inf"), softmax=tfm_ref.softmax,
                      return_scores: bool = False):
    """Masked attention with one thing done wrong (the keywords say which); chapters 2 and 4 reuse it.

    ``masking``: "before" the softmax (right), "after" it (the weights multiplied by the mask),
    "inverted" (True = blocked), "ignored", or "unguarded" (applied even when it is None).
    """
    def scaled_dot_product_attention(q, k, v, mask=None, *, return_weights=False):
        scores = q @ keys_t(k)  # (…, T, S)
        if not scale_after:
            scores = scores / divisor(q, v)
        if masking == "unguarded" or (mask is not None and masking in ("before", "inverted")):
            scores = scores.masked_fill(mask if masking == "inverted" else ~mask, fill)
        weights = softmax(scores, dim=softmax_dim)
        if mask is not None and masking == "after":
            weights = weights * mask
        if scale_after:
            weights = weights / divisor(q, v)
        out = weights @ v  # (…, T, Dv)
        return (out, scores if return_scores else weights) if return_weights else out
    return scaled_dot_product_attention


SOFTMAX_OVER_QUERIES = Mistake(
    "softmax over the wrong axis (queries)", attention_variant(softmax_dim=-2),
    "the softmax ran over the queries (axis −2 of the (…, T, S) scores); each query's weights over the keys must "
    "sum to 1.",
    "softmax(scores, dim=-1).")

ATTENTION_MISTAKES = [
    Mistake("missing scaling", attention_variant(divisor=lambda q, v: 1.0),
            "the scores are not divided by √d_k: their spread grows like √d_k, and for large d_k the softmax "
            "saturates.",
            "divide q @ k.transpose(-2, -1) by math.sqrt(q.shape[-1]) before the softmax."),
    Mistake("wrong scaling: d_k instead of √d_k", attention_variant(divisor=lambda q, v: q.shape[-1]),
            "you divided the scores by d_k; the factor that brings their variance back to 1 is √d_k.",
            "divide by math.sqrt(q.shape[-1])."),
    Mistake("wrong scaling: √d_v", attention_variant(divisor=lambda q, v: math.sqrt(v.shape[-1])),
            "you scaled by the width of the values; the scale is √d_k, the width of the queries and keys.",
            "divide by math.sqrt(q.shape[-1]), not by math.sqrt(v.shape[-1])."),
    SOFTMAX_OVER_QUERIES,
    Mistake("scaling after the softmax", attention_variant(scale_after=True),
            "dividing the weights by √d_k after the softmax breaks their sum to 1; the scale belongs to the scores.",
            "scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), then the softmax."),
    # k.transpose(1, 2) raises the same error as k.T on the (B, H, S, Dk) keys of the checks.
    Mistake("keys transposed on the wrong axes (k.T or transpose(1, 2))", attention_variant(keys_t=_all_axes_reversed),
            "on a tensor with more than two axes k.T reverses all of them, the batch axes included, and "
            "transpose(1, 2) swaps the last two axes of a 3-axis tensor only: with heads, (B, H, S, Dk), it "
            "swaps H and S.",
            "count the axes from the end: k.transpose(-2, -1) (or k.mT) swaps the last two, whatever comes "
            "before them."),
    Mistake("the scores returned as the weights", attention_variant(return_scores=True),
            "with return_weights=True the second output is the attention weights, after the softmax (positive, "
            "each row summing to 1), not the scores before it.",
            "return (out, weights) with weights = softmax(scores, dim=-1)."),
]

_ATTENTION_SHAPES = [
    dict(B=1, T=1, S=1, Dk=1, Dv=1), dict(B=1, T=1, S=2, Dk=2, Dv=1), dict(B=1, T=2, S=2, Dk=2, Dv=2),
    dict(B=1, T=2, S=3, Dk=4, Dv=2), dict(B=2, T=3, S=4, Dk=8, Dv=5),  # T, S, Dk, Dv all differ: √T ≠ √d_v
]

ATTENTION = Exercise(
    output_names=("output", "weights"),
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
        Case("batch and heads (B, H, T, Dk)", dims=dict(B=2, H=3, T=4, S=5, Dk=8, Dv=6)),
        Case("length-1 sequences", dims=dict(B=2, T=1, S=1, Dk=4, Dv=3)),
        Case("float64", dtype=torch.float64),
        Case("large scores", inputs=lambda gen, dims, dtype: _attention_inputs(gen, dims, dtype).scaled(30.0)),
        Case("gradients", grad=True),
    ],
    mistakes=ATTENTION_MISTAKES,
    forbidden=ATTENTION_LIBRARY,
    uses=(SOFTMAX,),
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
    q, k, v = random_qkv(gen, {"H": 2, **dims}, dtype)  # (B, H, T, Dk) …: the (B, 1, T, S) mask broadcasts over heads
    return Call(q, k, v, _random_mask(gen, dims, empty_rows), return_weights=True)


def _causal_inputs(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    q, k, v = random_qkv(gen, {**dims, "S": dims["T"]}, dtype)
    return Call(q, k, v, tfm_ref.causal_mask(dims["T"]), return_weights=True)


MASK_MISTAKES = [
    Mistake("mask applied after the softmax", attention_variant(masking="after"),
            "zeroing the weights after the softmax leaves rows that no longer sum to 1: the blocked keys "
            "still took their share of the normalisation.",
            "fill the blocked scores with -inf before the softmax: scores.masked_fill(~mask, float('-inf'))."),
    Mistake("mask polarity inverted", attention_variant(masking="inverted"),
            "in this course True means 'may attend' (as in F.scaled_dot_product_attention); you blocked the "
            "True positions, as nn.MultiheadAttention's masks do.",
            "fill where the mask is False: scores.masked_fill(~mask, float('-inf'))."),
    Mistake("masked scores set to 0 instead of -inf", attention_variant(fill=0.0),
            "a blocked score of 0 still gets the weight exp(0) after the softmax; a blocked key must get "
            "weight exactly 0.",
            "fill with float('-inf'), not 0."),
    Mistake("NaN for fully masked rows", attention_variant(softmax=plain_softmax),
            "a query whose keys are all blocked has a row of −inf scores: −inf − (−inf) is NaN in the "
            "softmax, and so is the 0/0 of a sum of exps that is 0; such a query must get zero weights and a "
            "zero output.",
            "use a softmax that gives zeros for an all −inf row, as chapter 1's softmax does: a non-finite "
            "maximum replaced by 0, a zero sum by 1."),
    Mistake("mask=None not handled", attention_variant(masking="unguarded"),
            "mask=None means no mask at all, and ~None cannot be computed.",
            "if mask is not None: scores = scores.masked_fill(~mask, float('-inf'))."),
    Mistake("mask ignored", attention_variant(masking="ignored"),
            "no key is blocked, so blocked keys still get weight: either the mask argument is not used, or it blocks "
            "nothing (`~` on an integer mask gives -1 and -2, both true).",
            "if mask is not None: scores = scores.masked_fill(~mask, float('-inf')), before the softmax."),
    Mistake("large negative instead of -inf (fully masked rows)", attention_variant(fill=-1e9),
            "with -1e9 a query whose keys are all blocked gets uniform weights (1/S each) instead of zeros; "
            "and in float16 -1e9 does not fit at all.",
            "fill with float('-inf'), and use a softmax that gives zeros to an all −inf row (chapter 1's)."),
]

MASKED_ATTENTION = Exercise(
    output_names=("output", "weights"),
    name="scaled_dot_product_attention",
    key="masked_attention",
    reference=tfm_ref.scaled_dot_product_attention,
    inputs=_masked_inputs,
    arg_names=("q", "k", "v", "mask"),
    shapes=[dict(B=1, H=2, T=1, S=2, Dk=2, Dv=1), dict(B=1, H=2, T=2, S=2, Dk=2, Dv=2),
            dict(B=1, H=2, T=2, S=3, Dk=4, Dv=2), dict(B=2, H=2, T=3, S=5, Dk=8, Dv=4)],
    # the notebook's text warns of fully masked rows (all −inf) and says mask=None means no mask: visible cases
    visible=[Case("random padding-style mask, broadcast over heads"),
             Case("fully masked rows", inputs=lambda gen, dims, dtype: _masked_inputs(gen, dims, dtype, empty_rows=True)),
             Case("mask=None still works", inputs=_attention_inputs, dims=dict(B=2, T=3, S=4, Dk=8, Dv=5))],
    hidden=[
        Case("causal mask (T, T)", inputs=_causal_inputs),
        Case("fully masked rows", inputs=lambda gen, dims, dtype: _masked_inputs(gen, dims, dtype, empty_rows=True)),
        Case("float16, fully masked rows", dtype=torch.float16,
             inputs=lambda gen, dims, dtype: _masked_inputs(gen, dims, dtype, empty_rows=True)),
        Case("random sizes", dims=random_dims(B=(1, 3), H=(1, 3), T=(1, 7), S=(1, 9), Dk=(1, 16), Dv=(1, 6))),
        Case("mask=None still works", inputs=_attention_inputs, dims=dict(B=2, T=3, S=4, Dk=8, Dv=5)),
        Case("float64", dtype=torch.float64),
        Case("gradients", grad=True),
    ],
    mistakes=[*MASK_MISTAKES, *ATTENTION_MISTAKES],
    forbidden=ATTENTION_LIBRARY,
    uses=(SOFTMAX,),
)

EXERCISES = (SOFTMAX, ATTENTION, MASKED_ATTENTION)
