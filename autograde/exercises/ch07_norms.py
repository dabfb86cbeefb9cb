"""Chapter 7 exercises — LayerNorm, RMSNorm, and the residual connection around a sublayer.

    LayerNorm(x) = (x − mean(x)) / √(var(x) + ε) · γ + β     var biased (divide by D)
    RMSNorm(x)   = x / √(mean(x²) + ε) · γ                     no centring, no β
    Post-Norm: Norm(x + Sublayer(x))        Pre-Norm: x + Sublayer(Norm(x))

Each exercise is checked against `tfm_ref`; each `Mistake` is a broken version a student
plausibly writes, with the hint its failure gives (`tests/test_exercises.py` proves it).

Shapes: B batch · T positions · D features (the normalised axis).
Case flags in the sizes: ``eps2`` (present: ε = 1e-2), ``nobias`` (LayerNorm without β).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import tfm_ref
from tfm_ref.blocks import Residual

from ..spec import Call, Case, Exercise, Mistake, randn, random_dims
from .shared import (
    PerturbedModuleAdapter,
    residual_always_post,
    residual_always_pre,
    residual_from_normalised,
    residual_no_residual,
    residual_norm_sublayer_only,
)

__all__ = ["LAYER_NORM", "RMS_NORM", "LAYER_NORM_MODULE", "RESIDUAL", "EXERCISES", "residual"]

# Library functions and modules that would normalise for the student.
NORM_LIBRARY = (F.layer_norm, torch.layer_norm, torch.native_layer_norm, nn.LayerNorm, F.group_norm,
                torch.group_norm, nn.GroupNorm, F.instance_norm, F.rms_norm, torch.rms_norm, torch._fused_rms_norm,
                nn.RMSNorm)

# The shrink ladder starts at D = 2: with one feature the unbiased variance is NaN, which says less
# than the D/(D−1) factor it shows at D = 2 (the hidden "one feature" case still tries D = 1).
# From D = 3: a LayerNorm over 2 features outputs ±1 whatever its input, and its gradient is 0.
_SHAPES = [dict(B=1, T=1, D=3), dict(B=1, T=2, D=3), dict(B=2, T=3, D=5), dict(B=2, T=4, D=8)]
_SIZES = random_dims(B=(1, 4), T=(1, 9), D=(1, 33))


def _x(gen: torch.Generator, dims, dtype: torch.dtype) -> torch.Tensor:
    return randn(gen, dims["B"], dims["T"], dims["D"], dtype=dtype)


def _affine(gen: torch.Generator, dims, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    return 1 + 0.5 * randn(gen, dims["D"], dtype=dtype), 0.5 * randn(gen, dims["D"], dtype=dtype)


def _scaled(make, factor: float, shift: float = 0.0):
    """The same input maker with x (the first argument only) scaled and shifted."""
    def inputs(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
        call = make(gen, dims, dtype)
        return Call(call.args[0] * factor + shift, *call.args[1:], **call.kwargs)
    return inputs


# --------------------------------------------------------------------------- 1. layer_norm

def _ln_inputs(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    return Call(_x(gen, dims, dtype), *_affine(gen, dims, dtype))


def _ln_eps(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    return Call(*_ln_inputs(gen, dims, dtype).args, eps=1e-2)


def _ln_plain(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    return Call(_x(gen, dims, dtype), None, None)


def _finish_ln(y, weight, bias, x):
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y.to(x.dtype)


def _ln_unbiased(x, weight, bias, eps=1e-5):
    xf = x.float()
    centred = xf - xf.mean(-1, keepdim=True)
    var = centred.pow(2).sum(-1, keepdim=True) / (x.shape[-1] - 1)  # torch.var's default; inf/NaN for D = 1
    return _finish_ln(centred / torch.sqrt(var + eps), weight, bias, x)


def _ln_eps_outside(x, weight, bias, eps=1e-5):
    xf = x.float()
    mean = xf.mean(-1, keepdim=True)
    std = (xf - mean).pow(2).mean(-1, keepdim=True).sqrt()
    return _finish_ln((xf - mean) / (std + eps), weight, bias, x)


def _ln_over(dims: tuple[int, ...]):
    def layer_norm(x, weight, bias, eps=1e-5):
        xf = x.float()
        mean = xf.mean(dims, keepdim=True)
        var = (xf - mean).pow(2).mean(dims, keepdim=True)
        return _finish_ln((xf - mean) / torch.sqrt(var + eps), weight, bias, x)
    return layer_norm


def _ln_moments(x, weight, bias, eps=1e-5):
    xf = x.float()
    mean = xf.mean(-1, keepdim=True)
    var = xf.pow(2).mean(-1, keepdim=True) - mean**2  # cancels catastrophically for a large mean
    return _finish_ln((xf - mean) / torch.sqrt(var + eps), weight, bias, x)


def _ln_no_sqrt(x, weight, bias, eps=1e-5):
    xf = x.float()
    mean = xf.mean(-1, keepdim=True)
    return _finish_ln((xf - mean) / ((xf - mean).pow(2).mean(-1, keepdim=True) + eps), weight, bias, x)


def _ln_statistics_detached(x, weight, bias, eps=1e-5):
    xf = x.float()
    mean = xf.mean(-1, keepdim=True).detach()
    var = (xf - mean).pow(2).mean(-1, keepdim=True).detach()
    return _finish_ln((xf - mean) / torch.sqrt(var + eps), weight, bias, x)


def _ln_affine_swapped(x, weight, bias, eps=1e-5):
    return tfm_ref.layer_norm(x, bias, weight, eps)


def _ln_weight_not_applied(x, weight, bias, eps=1e-5):
    return tfm_ref.layer_norm(x, None, bias, eps)  # x̂ + β: γ accepted and never used


def _ln_affine_not_applied(x, weight, bias, eps=1e-5):
    return tfm_ref.layer_norm(x, None, None, eps)  # x̂ alone: γ and β accepted and never used


def _ln_eps_fixed(x, weight, bias, eps=1e-5):
    return tfm_ref.layer_norm(x, weight, bias)  # 1e-5, whatever the caller passed


def _ln_affine_first(x, weight, bias, eps=1e-5):
    return tfm_ref.layer_norm(_finish_ln(x.float(), weight, bias, x), None, None, eps)  # normalises γ·x + β


def _ln_in_input_dtype(x, weight, bias, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    var = (x - mean).pow(2).mean(-1, keepdim=True)  # float16 overflows once |x − mean| passes 256
    return _finish_ln((x - mean) / torch.sqrt(var + eps), weight, bias, x)


def _ln_not_cast_back(x, weight, bias, eps=1e-5):
    as_float = [None if t is None else t.float() for t in (weight, bias)]
    return tfm_ref.layer_norm(x.float(), *as_float, eps)  # float32 out, whatever x was


# Computing in float16, and not casting back, are the same mistakes in RMSNorm.
HALF_PRECISION_HINT = ("in float16 the squares overflow (the largest float16 is 65504, so any |x| beyond 256 "
                       "squares to inf) and the normalised output collapses; the statistics must be computed in "
                       "float32.")
HALF_PRECISION_FIX = "xf = x.float() at the start, compute with xf, and return y.to(x.dtype)."
CAST_BACK_HINT = "you computed in float32 and returned float32; the result must have the dtype of x."
CAST_BACK_FIX = "return y.to(x.dtype)."

LAYER_NORM_MISTAKES = [
    Mistake("unbiased variance", _ln_unbiased,
            "LayerNorm divides the squared deviations by D, not D − 1; torch.var's default is the unbiased "
            "estimate, with D − 1.",
            "((x − mean)²).mean(dim=-1, keepdim=True), or torch.var(x, dim=-1, unbiased=False, keepdim=True)."),
    Mistake("epsilon outside the square root", _ln_eps_outside,
            "ε goes inside the root: (x − mean) / √(var + ε), not (x − mean) / (√var + ε). It matters when "
            "the variance is small.",
            "torch.rsqrt(var + eps), or (x − mean) / torch.sqrt(var + eps)."),
    Mistake("normalised over the wrong axis (positions)", _ln_over((-2,)),
            "LayerNorm normalises each position over its D features, the last axis; you normalised each "
            "feature over the positions.",
            "mean and variance with dim=-1, keepdim=True."),
    Mistake("normalised over the whole sequence", _ln_over((-2, -1)),
            "the statistics are per position, over the last axis only; yours pool the whole (T, D) sequence.",
            "reduce over dim=-1 only, with keepdim=True."),
    Mistake("normalised over the batch (dim=0), as BatchNorm does", _ln_over((0,)),
            "LayerNorm normalises each position over its own D features, the last axis; statistics over the "
            "batch axis are BatchNorm's, and they make each example's output depend on the others in its batch.",
            "mean and variance with dim=-1, keepdim=True, not dim=0."),
    Mistake("variance as E[x²] − E[x]²", _ln_moments,
            "E[x²] − E[x]² cancels catastrophically when the mean is large compared with the spread (float32 "
            "keeps about 7 digits).",
            "compute the mean of the squared deviations: ((x − mean)²).mean(dim=-1, keepdim=True)."),
    Mistake("divided by the variance instead of the standard deviation", _ln_no_sqrt,
            "the normaliser is the standard deviation √(var + ε), not the variance.",
            "(x − mean) / torch.sqrt(var + eps)."),
    Mistake("mean and variance detached", _ln_statistics_detached,
            "the mean and the variance depend on x too, and the gradient of x flows through them; detached (or "
            "computed outside autograd) they cut that path, so the output is right and its gradient is not.",
            "compute mean and var from x in the graph, without .detach(), .item() or torch.no_grad()."),
    Mistake("γ (weight) not applied", _ln_weight_not_applied,
            "after normalising, LayerNorm scales each feature by its learned weight γ and then adds β: "
            "x̂ · γ + β. Yours adds β but never multiplies by γ, so the output is right only when γ = 1 (as a "
            "new LayerNorm starts), and wrong as soon as γ is learned (this case passes a γ that is not 1).",
            "y = y * weight (when weight is not None), before y = y + bias."),
    Mistake("γ and β not applied (no affine step)", _ln_affine_not_applied,
            "LayerNorm ends with an affine step, x̂ · γ + β, the learned scale and shift; yours returns the "
            "normalised x̂ alone, which is right only when γ = 1 and β = 0 (this case passes other values).",
            "if weight is not None: y = y * weight; then if bias is not None: y = y + bias."),
    Mistake("γ and β swapped", _ln_affine_swapped,
            "the weight γ scales and the bias β shifts; yours are the other way round.",
            "x̂ · weight + bias."),
    Mistake("γ and β applied before normalising", _ln_affine_first,
            "the affine step comes last: γ and β scale and shift the normalised x̂. Applied to x first, the "
            "normalisation takes most of them out again (its output has mean 0 and variance 1 whatever β is).",
            "x̂ = (x − mean) / √(var + ε) from x itself, then return x̂ · weight + bias."),
    Mistake("computed in float16 (no float32 step)", _ln_in_input_dtype, HALF_PRECISION_HINT, HALF_PRECISION_FIX),
    Mistake("result left in float32", _ln_not_cast_back, CAST_BACK_HINT, CAST_BACK_FIX),
]

# float32 holds 1e4 + noise to about 1e-3, so right answers differ from one another by up to a few 1e-3 there (two
# passes, torch.var_mean, statistics in float64); E[x²] − E[x]² cancels catastrophically and is off by far more.
LARGE_MEAN_TOLERANCE = (1e-3, 1e-2)

LAYER_NORM = Exercise(
    name="layer_norm",
    reference=tfm_ref.layer_norm,
    inputs=_ln_inputs,
    arg_names=("x", "weight", "bias"),
    shapes=_SHAPES,
    # the notebook asks for float32 inside and the input's dtype back: float16 with large values shows both; its hint
    # warns that E[x²] − E[x]² loses every digit when the mean is large: a large mean shows that
    visible=[Case("x (B, T, D) with γ, β"),
             Case("ε = 1e-2, small variance", inputs=_scaled(_ln_eps, 0.05)),
             Case("float16, large values (compute in float32, cast back)", dtype=torch.float16,
                  inputs=_scaled(_ln_inputs, 300.0)),
             Case("large mean (1e4 + noise)", inputs=_scaled(_ln_inputs, 1.0, 1e4), tolerance=LARGE_MEAN_TOLERANCE)],
    hidden=[
        Case("random sizes", dims=_SIZES),
        Case("no γ, β (None)", inputs=_ln_plain),
        Case("one feature (D = 1)", dims=dict(B=2, T=3, D=1)),
        Case("tiny variance (ε dominates)", inputs=_scaled(_ln_inputs, 1e-3)),
        Case("large mean (1e4 + noise)", inputs=_scaled(_ln_inputs, 1.0, 1e4), tolerance=LARGE_MEAN_TOLERANCE),
        Case("huge values", inputs=_scaled(_ln_inputs, 1e6)),
        Case("float64", dtype=torch.float64),
        Case("float16", dtype=torch.float16),
        Case("float16, large values (compute in float32, cast back)", dtype=torch.float16,
             inputs=_scaled(_ln_inputs, 300.0)),
        Case("gradients", grad=True),
    ],
    mistakes=[
        *LAYER_NORM_MISTAKES,
        # the module's own "eps argument ignored" names the same output there, so this one is the function's alone
        Mistake("eps argument ignored (always 1e-5)", _ln_eps_fixed,
                "the caller chooses ε (this case passes eps=1e-2), and yours uses 1e-5 whatever it is given.",
                "use the parameter: torch.sqrt(var + eps), with no number written in its place."),
    ],
    forbidden=NORM_LIBRARY,
    withheld=(tfm_ref.LayerNorm,),  # computes layer_norm whole (with F.layer_norm)
)


# --------------------------------------------------------------------------- 2. rms_norm

def _rms_inputs(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    return Call(_x(gen, dims, dtype) + 0.5, _affine(gen, dims, dtype)[0])  # a nonzero mean: centring shows


def _rms_eps(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    return Call(*_rms_inputs(gen, dims, dtype).args, eps=1e-2)


def _rms_plain(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    return Call(_x(gen, dims, dtype) + 0.5, None)


def _finish_rms(y, weight, x):
    return (y if weight is None else y * weight).to(x.dtype)


def _rms_centred(x, weight, eps=1e-6):
    return tfm_ref.layer_norm(x, weight, None, eps)


def _rms_eps_outside(x, weight, eps=1e-6):
    xf = x.float()
    return _finish_rms(xf / (xf.pow(2).mean(-1, keepdim=True).sqrt() + eps), weight, x)


def _rms_sum(x, weight, eps=1e-6):
    xf = x.float()
    return _finish_rms(xf / torch.sqrt(xf.pow(2).sum(-1, keepdim=True) + eps), weight, x)


def _rms_no_sqrt(x, weight, eps=1e-6):
    xf = x.float()
    return _finish_rms(xf / (xf.pow(2).mean(-1, keepdim=True) + eps), weight, x)


def _rms_mean_abs(x, weight, eps=1e-6):
    xf = x.float()
    return _finish_rms(xf / (xf.abs().mean(-1, keepdim=True) + eps), weight, x)


def _rms_over_positions(x, weight, eps=1e-6):
    xf = x.float()
    return _finish_rms(xf * torch.rsqrt(xf.pow(2).mean(-2, keepdim=True) + eps), weight, x)


def _rms_no_eps(x, weight, eps=1e-6):
    xf = x.float()
    return _finish_rms(xf / xf.pow(2).mean(-1, keepdim=True).sqrt(), weight, x)


def _rms_whole_tensor(x, weight, eps=1e-6):
    xf = x.float()
    return _finish_rms(xf / torch.sqrt(xf.pow(2).mean() + eps), weight, x)


def _rms_std(unbiased: bool):
    def rms_norm(x, weight, eps=1e-6):
        xf = x.float()
        return _finish_rms(xf / torch.sqrt(xf.var(-1, keepdim=True, unbiased=unbiased) + eps), weight, x)
    return rms_norm


def _rms_weight_not_applied(x, weight, eps=1e-6):
    return tfm_ref.rms_norm(x, None, eps)  # γ accepted and never used


def _rms_eps_fixed(fixed: float):
    def rms_norm(x, weight, eps=1e-6):
        return tfm_ref.rms_norm(x, weight, fixed)  # whatever the caller passed
    return rms_norm


def _rms_gain_first(x, weight, eps=1e-6):
    return tfm_ref.rms_norm(x if weight is None else (x.float() * weight).to(x.dtype), None, eps)


def _rms_in_input_dtype(x, weight, eps=1e-6):
    return _finish_rms(x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps), weight, x)  # x² overflows float16


def _rms_not_cast_back(x, weight, eps=1e-6):
    return tfm_ref.rms_norm(x.float(), None if weight is None else weight.float(), eps)  # float32 out


_STD_HINT = ("RMSNorm divides by √mean(x²), the spread around 0; x.var (like x.std) is the spread around the mean, "
            "a centred statistic, which is what RMSNorm leaves out.")
_STD_FIX = "torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps), not x.var(...)."
# "no ε" (none at all) is catalogued beside these; both show on the visible ε = 1e-2 case.
_RMS_EPS_HINT = ("the caller chooses ε (this case passes eps=1e-2), and yours uses {} whatever it is given: a number "
                 "written in where the `eps` parameter belongs.")
_RMS_EPS_FIX = "use the parameter: torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps), with no number in its place."

RMS_NORM = Exercise(
    name="rms_norm",
    reference=tfm_ref.rms_norm,
    inputs=_rms_inputs,
    arg_names=("x", "weight"),
    shapes=_SHAPES,
    visible=[Case("x (B, T, D) with γ"),
             Case("ε = 1e-2, small values", inputs=_scaled(_rms_eps, 0.05)),
             Case("float16, large values (compute in float32, cast back)", dtype=torch.float16,
                  inputs=_scaled(_rms_inputs, 300.0))],
    hidden=[
        Case("random sizes", dims=_SIZES),
        Case("no γ (None)", inputs=_rms_plain),
        Case("one feature (D = 1)", dims=dict(B=2, T=3, D=1)),
        Case("tiny values (ε dominates)", inputs=_scaled(_rms_inputs, 1e-3)),
        Case("huge values", inputs=_scaled(_rms_inputs, 1e6)),
        Case("float64", dtype=torch.float64),
        Case("float16", dtype=torch.float16),
        Case("float16, large values (compute in float32, cast back)", dtype=torch.float16,
             inputs=_scaled(_rms_inputs, 300.0)),
        Case("gradients", grad=True),
    ],
    mistakes=[
        Mistake("centred (subtracted the mean)", _rms_centred,
                "RMSNorm does not subtract the mean — that is what makes it cheaper than LayerNorm.",
                "x / √(mean(x²) + ε) · γ, with x itself, not x − mean."),
        Mistake("epsilon outside the square root", _rms_eps_outside,
                "ε goes inside the root: x / √(mean(x²) + ε), not x / (√mean(x²) + ε).",
                "torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)."),
        Mistake("square root of the sum instead of the mean", _rms_sum,
                "the root *mean* square divides the sum of squares by D; you took the root of the sum.",
                "x.pow(2).mean(dim=-1, keepdim=True), not .sum(...)."),
        Mistake("divided by the mean square, without the square root", _rms_no_sqrt,
                "the normaliser is the *root* of the mean square, √(mean(x²) + ε): it has the units of x, so the "
                "output's root mean square is 1. Dividing by the mean square itself leaves 1/RMS.",
                "torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps), or divide by torch.sqrt(...)."),
        Mistake("mean absolute value instead of root mean square", _rms_mean_abs,
                "the normaliser is the root of the mean of the squares, not the mean of the absolute values.",
                "torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)."),
        Mistake("normalised over the wrong axis (positions)", _rms_over_positions,
                "the mean of squares is over each position's features, the last axis; you took it over the "
                "positions.",
                "mean(dim=-1, keepdim=True)."),
        Mistake("mean of squares over the whole tensor", _rms_whole_tensor,
                "each position is divided by its own root mean square, over its D features; yours divides every "
                "position by one number, pooled over the whole batch.",
                "x.pow(2).mean(dim=-1, keepdim=True), not x.pow(2).mean()."),
        Mistake("no ε", _rms_no_eps,
                "ε is added under the root, √(mean(x²) + ε): it keeps an all-zero row finite, and it matters "
                "whenever mean(x²) is not much larger than ε (this case passes eps=1e-2).",
                "torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)."),
        Mistake("eps argument ignored (always 1e-6)", _rms_eps_fixed(1e-6),
                _RMS_EPS_HINT.format("1e-6"), _RMS_EPS_FIX),
        Mistake("eps argument ignored (always 1e-5)", _rms_eps_fixed(1e-5),
                _RMS_EPS_HINT.format("1e-5"), _RMS_EPS_FIX),
        Mistake("γ (weight) not applied", _rms_weight_not_applied,
                "after dividing by the root mean square, RMSNorm scales each feature by its learned weight γ: "
                "x / √(mean(x²) + ε) · γ. Yours never multiplies by γ, so it is right only when γ = 1 (as a new "
                "RMSNorm starts), and wrong as soon as γ is learned (this case passes a γ that is not 1).",
                "y = y * weight (when weight is not None), before returning y.to(x.dtype)."),
        Mistake("divided by the standard deviation (x.var) instead of the root mean square", _rms_std(True),
                _STD_HINT, _STD_FIX),
        Mistake("divided by the standard deviation (biased x.var) instead of the root mean square", _rms_std(False),
                _STD_HINT, _STD_FIX),
        Mistake("γ applied before normalising", _rms_gain_first,
                "γ scales the normalised output; applied to x first, it also scales the root mean square that x · γ "
                "is then divided by, so the normalisation takes most of it out again.",
                "y = x / √(mean(x²) + ε) from x itself, then return y * weight."),
        Mistake("computed in float16 (no float32 step)", _rms_in_input_dtype, HALF_PRECISION_HINT, HALF_PRECISION_FIX),
        Mistake("result left in float32", _rms_not_cast_back, CAST_BACK_HINT, CAST_BACK_FIX),
    ],
    forbidden=NORM_LIBRARY,
    withheld=(tfm_ref.RMSNorm,),  # computes rms_norm whole (with F.rms_norm)
)


# --------------------------------------------------------------------------- 3. the LayerNorm module

def _module_input(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    scale = 0.05 if dims.get("eps2") else 1.0  # small variance, so a wrong ε shows
    return Call(_x(gen, dims, dtype) * scale)


def _module_mistake(function, name: str) -> type:
    """A tfm_ref.LayerNorm whose forward calls ``function`` (a broken one, for the mistakes)."""
    def forward(self, x):
        return function(x, self.weight, self.bias, self.eps)
    return type(name, (tfm_ref.LayerNorm,), {"forward": forward})


class _ModuleEpsIgnored(tfm_ref.LayerNorm):
    def forward(self, x):
        return tfm_ref.layer_norm(x, self.weight, self.bias)


# tfm_ref.LayerNorm calls PyTorch's fused kernel, whose float32 rounding differs from the two-pass
# definition by more than the check's tolerance when the mean is large; the student's module is
# built on their `layer_norm`, so it is compared with the module built on the readable one.
_ReadableLayerNorm = _module_mistake(tfm_ref.layer_norm, "LayerNorm")


class _ModuleGainZero(_ReadableLayerNorm):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        nn.init.zeros_(self.weight)


class _ModuleGainRandom(_ReadableLayerNorm):
    """γ drawn with torch.randn(d), the first draw of the build, as a student's __init__ draws it."""

    def __init__(self, d, *args, **kwargs):
        super().__init__(d, *args, **kwargs)  # draws nothing
        self.weight = nn.Parameter(torch.randn(d))


class _ModuleAffineRandom(_ReadableLayerNorm):
    """γ, then β, drawn with torch.randn(d)."""

    def __init__(self, d, *args, **kwargs):
        super().__init__(d, *args, **kwargs)
        self.weight = nn.Parameter(torch.randn(d))
        if self.bias is not None:
            self.bias = nn.Parameter(torch.randn(d))


class _ModuleShiftOne(_ReadableLayerNorm):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.bias is not None:
            nn.init.ones_(self.bias)


LAYER_NORM_MODULE = Exercise(
    name="LayerNorm",
    key="layer_norm_module",
    reference=_ReadableLayerNorm,
    adapter=PerturbedModuleAdapter(lambda dims: dict(d=dims["D"], eps=1e-2 if dims.get("eps2") else 1e-5,
                                                     bias=not dims.get("nobias"))),
    inputs=_module_input,
    arg_names=("x",),
    shapes=_SHAPES,
    # the initial γ and β in sight: the notebook states them, and a random γ is a common slip
    visible=[Case("LayerNorm(D) on (B, T, D)"), Case("LayerNorm(D, eps=1e-2)", dims=dict(B=2, T=4, D=8, eps2=1)),
             Case("as built, before any training: γ = 1 and β = 0", dims=dict(B=2, T=3, D=6, as_built=1)),
             Case("float16, large values", dtype=torch.float16, inputs=_scaled(_module_input, 300.0)),
             # the notebook says bias=False leaves no `bias` parameter: a module that makes one anyway fails here
             Case("without bias (bias=False)", dims=dict(B=2, T=3, D=6, nobias=1))],
    hidden=[
        Case("random sizes", dims=_SIZES),
        Case("without bias (bias=False)", dims=dict(B=2, T=3, D=6, nobias=1)),
        Case("large mean (1e4 + noise)", inputs=_scaled(_module_input, 1.0, 1e4), tolerance=LARGE_MEAN_TOLERANCE),
        Case("float64", dtype=torch.float64),
        Case("float16, large values", dtype=torch.float16, inputs=_scaled(_module_input, 300.0)),
        Case("gradients (input, γ and β)", grad=True),
    ],
    mistakes=[
        Mistake("γ initialised to 0", _ModuleGainZero,
                "a LayerNorm starts as the plain normalisation, γ = 1 and β = 0; with γ = 0 its output is β alone, "
                "whatever the input, and no gradient reaches the layers below it.",
                "self.weight = nn.Parameter(torch.ones(d))."),
        Mistake("γ initialised at random", _ModuleGainRandom,
                "a new LayerNorm starts with γ = 1 and β = 0, the plain normalisation; training moves them from "
                "there. Yours draws γ at random, so every model built starts distorted in another way.",
                "self.weight = nn.Parameter(torch.ones(d)), not torch.randn(d)."),
        Mistake("γ and β initialised at random", _ModuleAffineRandom,
                "a new LayerNorm starts with γ = 1 and β = 0, the plain normalisation; training moves them from "
                "there. Yours draws both at random, so every model built starts distorted in another way.",
                "self.weight = nn.Parameter(torch.ones(d)) and self.bias = nn.Parameter(torch.zeros(d))."),
        Mistake("β initialised to 1", _ModuleShiftOne,
                "a LayerNorm starts as the plain normalisation, γ = 1 and β = 0; with β = 1 every feature starts "
                "shifted by 1.",
                "self.bias = nn.Parameter(torch.zeros(d)) (None when bias=False)."),
        Mistake("eps argument ignored", _ModuleEpsIgnored,
                "the module is built with its own `eps`, and you used layer_norm's default 1e-5 instead.",
                "store it in __init__ (self.eps = eps) and pass it on: layer_norm(x, self.weight, self.bias, self.eps)."),
        *(Mistake(m.name, _module_mistake(m.impl, f"_Module{i}"), m.hint, m.fix)
          for i, m in enumerate(LAYER_NORM_MISTAKES)),
    ],
    forbidden=NORM_LIBRARY,
    uses=(LAYER_NORM,),
)


# --------------------------------------------------------------------------- 4. residual sublayer

def residual(x: torch.Tensor, sublayer, norm, norm_first: bool = False) -> torch.Tensor:
    """Post-Norm ``norm(x + sublayer(x))`` or, with ``norm_first``, Pre-Norm ``x + sublayer(norm(x))``
    — tfm_ref's residual wrapper of the encoder and decoder blocks, without dropout."""
    return Residual(norm, 0.0, norm_first).eval()(x, sublayer)


def _residual_parts(gen: torch.Generator, d_model: int, dtype: torch.dtype) -> tuple[nn.Module, nn.Module]:
    """A random sublayer (linear map and tanh) and a LayerNorm with random γ, β, drawn from ``gen``."""
    linear, norm = nn.Linear(d_model, d_model).to(dtype), nn.LayerNorm(d_model).to(dtype)
    with torch.no_grad():
        for parameter in (linear.weight, linear.bias, norm.weight, norm.bias):
            parameter.copy_(randn(gen, *parameter.shape, dtype=dtype) * 0.5 + (1.0 if parameter is norm.weight else 0.0))
    return nn.Sequential(linear, nn.Tanh()), norm


def _residual_inputs(norm_first: bool):
    def inputs(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
        x = randn(gen, dims["B"], dims["T"], dims["D"], dtype=dtype) * 2 + 1  # a mean and spread a norm changes
        sublayer, norm = _residual_parts(gen, dims["D"], dtype)
        return Call(x, sublayer, norm, norm_first=norm_first)
    return inputs


def _res_pre_and_post(x, sublayer, norm, norm_first=False):
    return norm(x + sublayer(norm(x))) if norm_first else norm(x + sublayer(x))


def _res_pre_norm_after_sublayer(x, sublayer, norm, norm_first=False):
    return x + norm(sublayer(x)) if norm_first else norm(x + sublayer(x))


def _res_post_norm_of_x(x, sublayer, norm, norm_first=False):
    return x + sublayer(norm(x)) if norm_first else norm(x) + sublayer(x)


def _res_post_norm_twice(x, sublayer, norm, norm_first=False):
    return x + sublayer(norm(x)) if norm_first else norm(x + sublayer(norm(x)))


RESIDUAL = Exercise(
    name="residual",
    reference=residual,
    inputs=_residual_inputs(False),
    arg_names=("x", "sublayer", "norm"),
    shapes=[dict(B=1, T=1, D=2), dict(B=1, T=2, D=3), dict(B=2, T=3, D=8)],
    visible=[Case("Post-Norm (norm_first=False)"),
             Case("Pre-Norm (norm_first=True)", inputs=_residual_inputs(True))],
    hidden=[
        Case("random sizes, Post-Norm", dims=random_dims(B=(1, 3), T=(1, 7), D=(2, 16))),
        Case("random sizes, Pre-Norm", dims=random_dims(B=(1, 3), T=(1, 7), D=(2, 16)), inputs=_residual_inputs(True)),
        Case("one position, Pre-Norm", dims=dict(B=2, T=1, D=6), inputs=_residual_inputs(True)),
        Case("gradients, Post-Norm", grad=True),
        Case("gradients, Pre-Norm", grad=True, inputs=_residual_inputs(True)),
    ],
    mistakes=[
        Mistake("norm_first ignored (always Post-Norm)", residual_always_post,
                "with norm_first=True the norm goes on the sublayer's input (Pre-Norm); yours always normalises "
                "the sum.",
                "if norm_first: return x + sublayer(norm(x))."),
        Mistake("Pre-Norm where norm_first=False", residual_always_pre,
                "norm_first=False is the 2017 Post-Norm layout, which normalises the sum; yours normalises the "
                "sublayer's input there, as Pre-Norm does (always, or with the two branches swapped).",
                "norm(x + sublayer(x)) when norm_first is False, x + sublayer(norm(x)) when it is True."),
        Mistake("Pre-Norm: residual taken from the normalised input", residual_from_normalised,
                "in Pre-Norm the residual path carries x itself, untouched; that identity path is why Pre-Norm "
                "trains stably when deep. Yours carries norm(x).",
                "x + sublayer(norm(x)), not norm(x) + sublayer(norm(x))."),
        Mistake("Post-Norm: only the sublayer output normalised", residual_norm_sublayer_only,
                "Post-Norm normalises the sum, after the residual is added; yours normalises the sublayer's "
                "output alone.",
                "norm(x + sublayer(x)), not x + norm(sublayer(x))."),
        Mistake("Pre-Norm: normalised again after the addition", _res_pre_and_post,
                "Pre-Norm has no norm after the addition (the stack ends with one final norm instead).",
                "x + sublayer(norm(x)), with nothing around the sum."),
        Mistake("Pre-Norm: the sublayer's output normalised instead of its input", _res_pre_norm_after_sublayer,
                "Pre-Norm normalises what goes into the sublayer, and adds the sublayer's output to x as it is; "
                "yours feeds the sublayer x itself and normalises what comes out.",
                "x + sublayer(norm(x)), not x + norm(sublayer(x))."),
        Mistake("Post-Norm: x normalised instead of the sum", _res_post_norm_of_x,
                "Post-Norm adds the sublayer's output to x first and normalises that sum; yours normalises x "
                "alone and adds the sublayer's output after the norm.",
                "norm(x + sublayer(x)), not norm(x) + sublayer(x)."),
        Mistake("Post-Norm: the sublayer's input normalised too", _res_post_norm_twice,
                "Post-Norm feeds the sublayer x itself and has one norm, on the sum; yours also normalises the "
                "sublayer's input, a norm before and after.",
                "norm(x + sublayer(x)), with sublayer(x), not sublayer(norm(x))."),
        Mistake("residual connection missing", residual_no_residual,
                "the sublayer's input is not added back: the residual connection is missing.",
                "add x: norm(x + sublayer(x)), or x + sublayer(norm(x)) in Pre-Norm."),
    ],
)

EXERCISES = (LAYER_NORM, RMS_NORM, LAYER_NORM_MODULE, RESIDUAL)
