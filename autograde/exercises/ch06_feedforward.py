"""Chapter 6 exercises — the position-wise feed-forward network, SwiGLU, and what they cost.

    FFN(x)    = W₂ act(W₁ x + b₁) + b₂                     (Vaswani et al. 2017, eq. 2)
    SwiGLU(x) = W_down (SiLU(W_gate x) ⊙ W_up x)           (Shazeer 2020)

Each exercise is checked against `tfm_ref`; each `Mistake` is a broken version a student
plausibly writes, with the hint its failure gives (`tests/test_exercises.py` proves it).

Shapes: B batch · T positions · D model width · F hidden width.
Case flags in the sizes: ``gelu`` (present: GELU instead of ReLU), ``bias`` / ``nobias``, ``training``
(training mode with dropout 0.3: both sides draw the same dropout masks), ``with_dropout`` (built with
dropout 0.3, in eval mode), ``defaults`` (built with the constructor's default arguments).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

import tfm_ref
from tfm_ref.blocks import make_ffn

from ..spec import Call, Case, Exercise, Mistake, ModuleAdapter, randn, random_dims
from .shared import built_without_dropout, dropout_rate

__all__ = ["FEED_FORWARD", "SWIGLU", "HIDDEN_SIZE", "PARAMETER_COUNT", "EXERCISES", "ffn_parameter_count"]


def _tokens(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    return Call(randn(gen, dims["B"], dims["T"], dims["D"], dtype=dtype))


_MODULE_SHAPES = [dict(B=1, T=1, D=1, F=2), dict(B=1, T=2, D=2, F=3), dict(B=2, T=3, D=4, F=8), dict(B=2, T=5, D=8, F=32)]
_MODULE_SIZES = random_dims(B=(1, 3), T=(1, 7), D=(1, 12), F=(1, 40))


# --------------------------------------------------------------------------- 1. FeedForward

class _ActivationAfterSecond(tfm_ref.FeedForward):
    def forward(self, x):
        return tfm_ref.feedforward.ACTIVATIONS[self.activation](self.down_proj(self.up_proj(x)))


class _ExtraActivation(tfm_ref.FeedForward):
    def forward(self, x):
        act = tfm_ref.feedforward.ACTIVATIONS[self.activation]
        return act(self.down_proj(act(self.up_proj(x))))


class _NoActivation(tfm_ref.FeedForward):
    def forward(self, x):
        return self.down_proj(self.up_proj(x))


class _ActivationOnInput(tfm_ref.FeedForward):
    def forward(self, x):
        return self.down_proj(self.up_proj(tfm_ref.feedforward.ACTIVATIONS[self.activation](x)))


class _AlwaysRelu(tfm_ref.FeedForward):
    def forward(self, x):
        return self.down_proj(F.relu(self.up_proj(x)))


class _FeedForwardDropoutOnOutput(tfm_ref.FeedForward):
    def forward(self, x):
        return self.dropout(self.down_proj(tfm_ref.feedforward.ACTIVATIONS[self.activation](self.up_proj(x))))


_DROPOUT_IGNORED = ("the module is built with a `dropout` rate for its hidden layer; in training mode yours "
                    "drops nothing.")


class _TanhGelu(tfm_ref.FeedForward):
    def forward(self, x):
        hidden = self.up_proj(x)
        hidden = F.gelu(hidden, approximate="tanh") if self.activation == "gelu" else F.relu(hidden)
        return self.down_proj(hidden)


def _with_activations(relu, gelu) -> type:
    """A tfm_ref.FeedForward whose activation for "relu" and "gelu" is ``relu`` and ``gelu`` (dropout in place)."""
    def forward(self, x):
        hidden = (gelu if self.activation == "gelu" else relu)(self.up_proj(x))
        return self.down_proj(self.dropout(hidden))
    return type("BrokenFeedForward", (tfm_ref.FeedForward,), {"forward": forward})


def _gelu_sigmoid(h):
    return h * torch.sigmoid(1.702 * h)  # the sigmoid approximation of GELU (Hendrycks & Gimpel 2016)


def _gelu_erf_without_root_two(h):
    return 0.5 * h * (1 + torch.erf(h))  # Φ(h) written with erf(h) instead of erf(h / √2)


def _gelu_tanh_without_cube(h):
    return 0.5 * h * (1 + torch.tanh(math.sqrt(2 / math.pi) * h))  # the tanh form without its 0.044715·h³


class _DropoutOnInput(tfm_ref.FeedForward):
    def forward(self, x):
        return self.down_proj(tfm_ref.feedforward.ACTIVATIONS[self.activation](self.up_proj(self.dropout(x))))


class _DropoutBeforeActivation(tfm_ref.FeedForward):
    def forward(self, x):
        return self.down_proj(tfm_ref.feedforward.ACTIVATIONS[self.activation](self.dropout(self.up_proj(x))))


class _DropoutTwice(tfm_ref.FeedForward):
    def forward(self, x):
        hidden = self.dropout(tfm_ref.feedforward.ACTIVATIONS[self.activation](self.up_proj(x)))
        return self.dropout(self.down_proj(hidden))


class _DropoutOnInputAndHidden(tfm_ref.FeedForward):
    def forward(self, x):
        hidden = tfm_ref.feedforward.ACTIVATIONS[self.activation](self.up_proj(self.dropout(x)))
        return self.down_proj(self.dropout(hidden))


class _FeedForwardDropoutByDefault(tfm_ref.FeedForward):
    def __init__(self, d_model, d_ff, activation="relu", dropout=0.1, bias=True):
        super().__init__(d_model, d_ff, activation=activation, dropout=dropout, bias=bias)


class _ResidualInside(tfm_ref.FeedForward):
    def forward(self, x):
        return x + super().forward(x)


FEED_FORWARD = Exercise(
    name="FeedForward",
    key="feed_forward",
    reference=tfm_ref.FeedForward,
    adapter=ModuleAdapter(lambda dims: dict(d_model=dims["D"], d_ff=dims["F"]) if dims.get("defaults") else dict(
        d_model=dims["D"], d_ff=dims["F"], activation="gelu" if dims.get("gelu") else "relu",
        bias=not dims.get("nobias"), dropout=dropout_rate(dims))),
    inputs=_tokens,
    arg_names=("x",),
    shapes=_MODULE_SHAPES,
    # GELU, dropout in training mode and bias=False are visible: a missing or misplaced dropout, another GELU, or
    # biases made whatever `bias` says, fail before grading
    visible=[Case("ReLU FFN on (B, T, D)"),
             Case("GELU", dims=dict(B=2, T=4, D=8, F=32, gelu=1)),
             Case("training mode, dropout=0.3, GELU", dims=dict(B=2, T=3, D=8, F=16, gelu=1, training=1)),
             Case("no biases (bias=False)", dims=dict(B=2, T=3, D=8, F=16, nobias=1))],
    hidden=[
        Case("random sizes", dims=_MODULE_SIZES),
        Case("one position", dims=dict(B=1, T=1, D=6, F=24)),
        Case("no biases (bias=False)", dims=dict(B=2, T=3, D=8, F=16, nobias=1)),
        Case("gradients, GELU", dims=dict(B=2, T=3, D=8, F=16, gelu=1), grad=True),
        Case("eval mode, built with dropout=0.3: nothing drops", dims=dict(B=2, T=3, D=8, F=16, with_dropout=1)),
        Case("built with the default arguments: FeedForward(d_model, d_ff)", dims=dict(B=2, T=3, D=8, F=16, defaults=1)),
        Case("built with the default arguments, in training mode: dropout 0 drops nothing",
             dims=dict(B=2, T=3, D=8, F=16, defaults=1, training=1)),
    ],
    mistakes=[
        Mistake("activation after the second linear", _ActivationAfterSecond,
                "the activation goes between the two linear maps; after the second one it clips the block's "
                "output (a ReLU output is never negative).",
                "down_proj(act(up_proj(x)))."),
        Mistake("an extra activation after the second linear", _ExtraActivation,
                "the activation is applied once, to the hidden layer only; yours also goes over the output.",
                "down_proj(act(up_proj(x))), with nothing after down_proj."),
        Mistake("activation on the input", _ActivationOnInput,
                "the activation goes on the hidden layer, after the first linear map; on the input it clips x "
                "itself, and the two linear maps still collapse into one.",
                "down_proj(act(up_proj(x)))."),
        Mistake("no activation", _NoActivation,
                "without the nonlinearity the two linear maps collapse into one linear map.",
                "apply the activation to the hidden layer: down_proj(act(up_proj(x)))."),
        Mistake("activation argument ignored (always ReLU)", _AlwaysRelu,
                "the `activation` argument chooses the nonlinearity; yours is ReLU whatever it says.",
                "store it in __init__: F.relu for \"relu\", F.gelu for \"gelu\"."),
        Mistake("dropout argument ignored", built_without_dropout(tfm_ref.FeedForward), _DROPOUT_IGNORED,
                "self.dropout = nn.Dropout(dropout) in __init__, and down_proj(self.dropout(act(up_proj(x))))."),
        Mistake("dropout on the output instead of the hidden layer", _FeedForwardDropoutOnOutput,
                "the FFN's dropout goes on the hidden activations, between the two linear maps (as in "
                "nn.TransformerEncoderLayer); the block's residual dropout takes care of the output.",
                "down_proj(self.dropout(act(up_proj(x)))), with nothing after down_proj."),
        Mistake("dropout on the input instead of the hidden layer", _DropoutOnInput,
                "the FFN's dropout goes on the hidden activations, after the activation; yours drops entries of "
                "the input x before up_proj, so other entries drop (the mask is (B, T, D), not (B, T, F)).",
                "down_proj(self.dropout(act(up_proj(x)))), with x going into up_proj as it is."),
        Mistake("dropout before the activation", _DropoutBeforeActivation,
                "the dropout goes on the activation's output; before it, GELU sees the rescaled h/(1 − p), and "
                "GELU(h/(1 − p)) is not GELU(h)/(1 − p) (with ReLU the two orders happen to agree).",
                "down_proj(self.dropout(act(up_proj(x)))): act first, then dropout."),
        Mistake("dropout twice: on the hidden layer and on the output", _DropoutTwice,
                "the FFN drops out once, on the hidden activations; the output's dropout belongs to the block's "
                "residual branch (chapter 8), so yours would drop the output twice there.",
                "down_proj(self.dropout(act(up_proj(x)))), with nothing after down_proj."),
        Mistake("dropout on by default", _FeedForwardDropoutByDefault,
                "the constructor's `dropout` defaults to 0, as the notebook's signature says: built without one, the "
                "module drops nothing, in training mode too; yours drops by default.",
                "def __init__(self, d_model, d_ff, activation=\"relu\", dropout=0.0, bias=True)."),
        Mistake("dropout twice: on the input and on the hidden layer", _DropoutOnInputAndHidden,
                "the FFN drops out once, on the hidden activations; yours also drops entries of the input x "
                "before up_proj.",
                "x goes into up_proj as it is: down_proj(self.dropout(act(up_proj(x))))."),
        Mistake("tanh approximation of GELU", _TanhGelu,
                "tfm_ref and nn.Transformer use the exact GELU, x·Φ(x) with the erf; yours is the tanh "
                "approximation.",
                "F.gelu(h), not F.gelu(h, approximate=\"tanh\")."),
        Mistake("GELU for activation=\"relu\" (always GELU, or the two swapped)", _with_activations(F.gelu, F.relu),
                "activation=\"relu\" asks for ReLU, max(0, h), which is exactly 0 for every negative h; yours "
                "applies GELU there, which is not. Either the `activation` argument is ignored, \"relu\" and \"gelu\" "
                "are matched to each other's function, or the constructor's default is \"gelu\" (the notebook's is "
                "\"relu\").",
                "F.relu when activation == \"relu\", F.gelu when activation == \"gelu\"."),
        Mistake("SiLU instead of GELU", _with_activations(F.relu, F.silu),
                "activation=\"gelu\" asks for GELU, x·Φ(x) with Φ the normal CDF; yours is SiLU (Swish), "
                "x·σ(x), the activation of SwiGLU's gate: close in shape, not the same curve.",
                "F.gelu(h) for \"gelu\"; F.silu belongs to SwiGLU."),
        Mistake("sigmoid approximation of GELU, x·σ(1.702x)", _with_activations(F.relu, _gelu_sigmoid),
                "tfm_ref and nn.Transformer use the exact GELU, x·Φ(x) with the erf; yours is the sigmoid "
                "approximation x·σ(1.702·x), which is off by up to about 0.02.",
                "F.gelu(h), or 0.5 * h * (1 + torch.erf(h / math.sqrt(2))) by hand."),
        Mistake("GELU by hand: erf(x) instead of erf(x/√2)", _with_activations(F.relu, _gelu_erf_without_root_two),
                "Φ, the standard normal CDF, is ½(1 + erf(x/√2)); with erf(x) your GELU uses the CDF of a normal "
                "whose variance is ½, not 1.",
                "0.5 * h * (1 + torch.erf(h / math.sqrt(2))), or F.gelu(h)."),
        Mistake("GELU by hand: the tanh form without its cubic term",
                _with_activations(F.relu, _gelu_tanh_without_cube),
                "tfm_ref uses the exact GELU, x·Φ(x) with the erf; yours is the tanh approximation with its "
                "0.044715·x³ term left out, which is off even for moderate x.",
                "F.gelu(h), or 0.5 * h * (1 + torch.erf(h / math.sqrt(2))) by hand."),
        Mistake("residual added inside the FFN", _ResidualInside,
                "the FFN is the sublayer alone, down_proj(act(up_proj(x))); the residual connection x + … belongs "
                "to the block around it (chapter 8), which would then add x twice.",
                "return down_proj(dropout(act(up_proj(x)))), without x + …."),
    ],
)


# --------------------------------------------------------------------------- 2. SwiGLU

class _SiluOnUp(tfm_ref.SwiGLU):
    def forward(self, x):
        return self.down_proj(self.gate_proj(x) * F.silu(self.up_proj(x)))


class _SigmoidGate(tfm_ref.SwiGLU):
    def forward(self, x):
        return self.down_proj(torch.sigmoid(self.gate_proj(x)) * self.up_proj(x))


class _ReluGate(tfm_ref.SwiGLU):
    def forward(self, x):
        return self.down_proj(F.relu(self.gate_proj(x)) * self.up_proj(x))


class _SiluOfProduct(tfm_ref.SwiGLU):
    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x) * self.up_proj(x)))


class _NoDownProjection(tfm_ref.SwiGLU):
    def forward(self, x):
        return F.silu(self.gate_proj(x)) * self.up_proj(x)


class _SwiGLUDropoutByDefault(tfm_ref.SwiGLU):
    def __init__(self, d_model, d_hidden, bias=False, dropout=0.1):
        super().__init__(d_model, d_hidden, bias=bias, dropout=dropout)


class _GeluGate(tfm_ref.SwiGLU):
    def forward(self, x):
        return self.down_proj(self.dropout(F.gelu(self.gate_proj(x)) * self.up_proj(x)))


class _SumNotProduct(tfm_ref.SwiGLU):
    def forward(self, x):
        return self.down_proj(self.dropout(F.silu(self.gate_proj(x)) + self.up_proj(x)))


class _GateTwice(tfm_ref.SwiGLU):
    def forward(self, x):
        gate = self.gate_proj(x)
        return self.down_proj(self.dropout(F.silu(gate) * gate))


class _SiluOnBoth(tfm_ref.SwiGLU):
    def forward(self, x):
        return self.down_proj(self.dropout(F.silu(self.gate_proj(x)) * F.silu(self.up_proj(x))))


class _SwiGLUDropoutOnOutput(tfm_ref.SwiGLU):
    def forward(self, x):
        return self.dropout(self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x)))


class _SwiGLUDropoutOnInput(tfm_ref.SwiGLU):
    def forward(self, x):
        x = self.dropout(x)
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


SWIGLU = Exercise(
    name="SwiGLU",
    key="swiglu",
    reference=tfm_ref.SwiGLU,
    adapter=ModuleAdapter(lambda dims: dict(d_model=dims["D"], d_hidden=dims["F"]) if dims.get("defaults") else dict(
        d_model=dims["D"], d_hidden=dims["F"], bias=bool(dims.get("bias")), dropout=dropout_rate(dims))),
    inputs=_tokens,
    arg_names=("x",),
    shapes=_MODULE_SHAPES,
    # dropout in training mode is visible: the notebook asks for it on the hidden product, and left out it passed
    visible=[Case("SwiGLU on (B, T, D)"), Case("training mode, dropout=0.3", dims=dict(B=2, T=3, D=8, F=16, training=1))],
    hidden=[
        Case("random sizes", dims=_MODULE_SIZES),
        Case("one position", dims=dict(B=1, T=1, D=6, F=16)),
        Case("with biases (bias=True)", dims=dict(B=2, T=3, D=8, F=16, bias=1)),
        Case("large inputs", inputs=lambda gen, dims, dtype: _tokens(gen, dims, dtype).scaled(10.0)),
        Case("gradients", grad=True),
        Case("training mode, dropout=0.3", dims=dict(B=2, T=3, D=8, F=16, training=1)),
        Case("eval mode, built with dropout=0.3: nothing drops", dims=dict(B=2, T=3, D=8, F=16, with_dropout=1)),
        Case("built with the default arguments: SwiGLU(d_model, d_hidden)", dims=dict(B=2, T=3, D=8, F=16, defaults=1)),
        Case("built with the default arguments, in training mode: dropout 0 drops nothing",
             dims=dict(B=2, T=3, D=8, F=16, defaults=1, training=1)),
    ],
    mistakes=[
        Mistake("SiLU on the up branch (gate and up swapped)", _SiluOnUp,
                "the SiLU goes on the gate branch, and the up branch stays linear; yours are the other way round.",
                "F.silu(self.gate_proj(x)) * self.up_proj(x)."),
        Mistake("sigmoid instead of SiLU (that is GLU)", _SigmoidGate,
                "SwiGLU gates with SiLU(z) = z·σ(z) (Swish), not with σ(z) alone.",
                "F.silu(gate), not torch.sigmoid(gate)."),
        Mistake("ReLU instead of SiLU (that is ReGLU)", _ReluGate,
                "SwiGLU gates with SiLU(z) = z·σ(z); ReLU makes it another variant, ReGLU.",
                "F.silu(gate), not F.relu(gate)."),
        Mistake("SiLU of the product", _SiluOfProduct,
                "only the gate goes through the SiLU; the product is taken afterwards.",
                "F.silu(gate) * up, not F.silu(gate * up)."),
        Mistake("missing down projection", _NoDownProjection,
                "the hidden (B, T, F) product must be mapped back to the model width; yours is returned as it is.",
                "self.down_proj(F.silu(gate) * up)."),
        Mistake("GELU instead of SiLU (that is GeGLU)", _GeluGate,
                "SwiGLU gates with SiLU(z) = z·σ(z) (Swish); GELU makes it another variant, GeGLU.",
                "F.silu(gate), not F.gelu(gate)."),
        Mistake("SiLU on both branches", _SiluOnBoth,
                "only the gate goes through the SiLU; the up branch is the value the gate lets through, and stays "
                "linear.",
                "F.silu(self.gate_proj(x)) * self.up_proj(x), with no F.silu around up_proj."),
        Mistake("gate and up added instead of multiplied", _SumNotProduct,
                "the gate *multiplies* the up branch elementwise (⊙): where the gate is near 0 it shuts that "
                "hidden unit, whatever the up branch says; a sum lets every unit through.",
                "F.silu(gate) * up, not F.silu(gate) + up."),
        Mistake("gate_proj used for both branches (up_proj unused)", _GateTwice,
                "the two branches are two different projections of x, gate_proj and up_proj; yours multiplies the "
                "SiLU of gate_proj(x) by gate_proj(x) itself, and up_proj is never used (its gradient is zero).",
                "F.silu(self.gate_proj(x)) * self.up_proj(x)."),
        Mistake("dropout argument ignored", built_without_dropout(tfm_ref.SwiGLU), _DROPOUT_IGNORED,
                "self.dropout = nn.Dropout(dropout) in __init__, and self.down_proj(self.dropout(F.silu(gate) * up))."),
        Mistake("dropout on by default", _SwiGLUDropoutByDefault,
                "the constructor's `dropout` defaults to 0, as the notebook's signature says: built without one, the "
                "module drops nothing, in training mode too; yours drops by default.",
                "def __init__(self, d_model, d_hidden, bias=False, dropout=0.0)."),
        Mistake("dropout on the output instead of the hidden product", _SwiGLUDropoutOnOutput,
                "the SwiGLU's dropout goes on the hidden product SiLU(gate) ⊙ up, before down_proj, as in the FFN; "
                "the block's residual dropout takes care of the output.",
                "self.down_proj(self.dropout(F.silu(gate) * up)), with nothing after down_proj."),
        Mistake("dropout on the input instead of the hidden product", _SwiGLUDropoutOnInput,
                "the SwiGLU's dropout goes on the hidden product SiLU(gate) ⊙ up; yours drops entries of the "
                "input x, before the projections.",
                "self.down_proj(self.dropout(F.silu(gate) * up)), with x going into the projections as it is."),
    ],
)


# --------------------------------------------------------------------------- 3. swiglu_hidden_size

def _widths(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    return Call(dims["F"], multiple_of=dims["M"])


def _hidden_floor(d_ff, multiple_of=1):
    return multiple_of * math.ceil(int(2 * d_ff / 3) / multiple_of)


def _hidden_nearest(d_ff, multiple_of=1):
    return multiple_of * round(2 * d_ff / 3 / multiple_of)


def _hidden_no_multiple(d_ff, multiple_of=1):
    return math.ceil(2 * d_ff / 3)


def _hidden_three_halves(d_ff, multiple_of=1):
    return multiple_of * math.ceil(3 * d_ff / 2 / multiple_of)


def _hidden_down_to_multiple(d_ff, multiple_of=1):
    return math.ceil(2 * d_ff / 3) // multiple_of * multiple_of  # (2 * d_ff // 3) // multiple_of * multiple_of alike


def _hidden_one_more_multiple(d_ff, multiple_of=1):
    return multiple_of * (int(2 * d_ff / 3 / multiple_of) + 1)


def _hidden_third_first(d_ff, multiple_of=1):
    return multiple_of * math.ceil(2 * (d_ff // 3) / multiple_of)


def _hidden_llama_four(d_ff, multiple_of=1):
    return multiple_of * math.ceil(2 * (4 * d_ff) / 3 / multiple_of)


HIDDEN_SIZE = Exercise(
    name="swiglu_hidden_size",
    key="hidden_size",
    reference=tfm_ref.swiglu_hidden_size,
    inputs=_widths,
    arg_names=("d_ff",),
    shapes=[dict(F=4, M=1), dict(F=2048, M=1), dict(F=2048, M=256)],
    # d_ff = 3000 (2000 → 2048) first: rounding to the nearest multiple is right there, rounding down is not (at
    # 2048 → 1536 the two give 1280, and only this case tells them apart)
    visible=[Case("rounded up to the next multiple of 256, which is also the nearest (d_ff = 3000)",
                  dims=dict(F=3000, M=256)),
             Case("d_ff = 2048, rounded up to a multiple of 256", dims=dict(F=2048, M=256)),
             Case("the 2017 base model, d_ff = 2048", dims=dict(F=2048, M=1))],
    hidden=[
        Case("d_ff divisible by 3", dims=dict(F=3072, M=1)),
        Case("d_ff = 1000: 2·d_ff/3 = 666.67 is not whole", dims=dict(F=1000, M=1)),
        Case("Llama-7B: 4·4096, multiple of 256", dims=dict(F=16384, M=256)),
        Case("random widths and multiples", dims=random_dims(F=(1, 5000), M=(1, 64))),
        Case("d_ff = 1", dims=dict(F=1, M=1)),
    ],
    mistakes=[
        # round() before the ceil gives the same widths wherever it is wrong (2·d_ff/3 = n + ⅓): one entry for both
        Mistake("rounded to a whole number (int or round) before rounding to the multiple", _hidden_floor,
                "tfm_ref rounds 2·d_ff/3 *up*, so that the SwiGLU has no fewer parameters than the FFN it "
                "replaces; you made it a whole number first, which rounds it down here (as Llama's code does with "
                "int(), or round() to the nearest; this course does not).",
                "math.ceil(2 * d_ff / 3 / multiple_of) * multiple_of, with no int() or round() before."),
        Mistake("rounded to the nearest multiple", _hidden_nearest,
                "the width is rounded *up* to the next multiple of multiple_of; you rounded to the nearest one.",
                "multiple_of * math.ceil(2 * d_ff / 3 / multiple_of)."),
        Mistake("multiple_of ignored", _hidden_no_multiple,
                "the width must be a multiple of multiple_of (hardware likes multiples of 64 or 256); yours "
                "ignores it.",
                "round up to the multiple: multiple_of * math.ceil(2 * d_ff / 3 / multiple_of)."),
        Mistake("rounded down to the multiple", _hidden_down_to_multiple,
                "the width is rounded *up* to the next multiple of multiple_of, so that the SwiGLU keeps at least "
                "the FFN's parameters; // (or int()) rounds down, to the multiple below.",
                "multiple_of * math.ceil(2 * d_ff / 3 / multiple_of)."),
        Mistake("one multiple added even when the width is already a multiple", _hidden_one_more_multiple,
                "rounding up leaves a width that is already a multiple of multiple_of as it is; int(y / m) + 1 "
                "adds a whole multiple to it.",
                "multiple_of * math.ceil(2 * d_ff / 3 / multiple_of): ceil of a whole number is that number."),
        Mistake("d_ff // 3 taken before the 2", _hidden_third_first,
                "2·(d_ff // 3) throws the remainder of d_ff / 3 away before doubling it, so it can land below "
                "⅔·d_ff, even after rounding up.",
                "divide last, as a float: math.ceil(2 * d_ff / 3 / multiple_of)."),
        Mistake("4·d_ff·⅔ (Llama's code, whose argument is d_model)", _hidden_llama_four,
                "Llama's code starts from hidden = 4·d_model, then takes ⅔ of it; here the argument is already "
                "d_ff, the FFN's width, so only the ⅔ applies.",
                "2 * d_ff / 3, with no factor 4."),
        Mistake("3/2 instead of 2/3", _hidden_three_halves,
                "SwiGLU has three matrices instead of two, so its width *shrinks* to ⅔ of d_ff to keep the "
                "parameter count; you widened it.",
                "2 * d_ff / 3, not 3 * d_ff / 2."),
    ],
)


# --------------------------------------------------------------------------- 4. parameter count

def ffn_parameter_count(d_model: int, d_ff: int, kind: str = "relu", bias: bool = True) -> int:
    """Parameters of one FFN sublayer of ``kind`` ("relu", "gelu", "swiglu"; d_ff is the hidden width),
    counted on the tfm_ref module itself (built on the meta device: shapes, no memory)."""
    with torch.device("meta"):
        return sum(p.numel() for p in make_ffn(kind, d_model, d_ff, 0.0, bias).parameters())


def _counting(kind: str, bias: bool):
    def inputs(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
        return Call(dims["D"], dims["F"], kind, bias)
    return inputs


def _count_no_biases(d_model, d_ff, kind="relu", bias=True):
    return (3 if kind == "swiglu" else 2) * d_model * d_ff


def _count_two_matrices(d_model, d_ff, kind="relu", bias=True):
    return 2 * d_model * d_ff + (d_ff + d_model if bias else 0)


def _count_bias_always(d_model, d_ff, kind="relu", bias=True):
    return ffn_parameter_count(d_model, d_ff, kind, True)


def _count_swiglu_two_thirds(d_model, d_ff, kind="relu", bias=True):
    width = tfm_ref.swiglu_hidden_size(d_ff) if kind == "swiglu" else d_ff
    return ffn_parameter_count(d_model, width, kind, bias)


def _count_square_biases(d_model, d_ff, kind="relu", bias=True):
    matrices = 3 if kind == "swiglu" else 2
    return matrices * d_model * d_ff + (matrices * d_ff if bias else 0)


def _up_maps(kind: str) -> int:
    """The maps from d_model to d_ff: up_proj, and gate_proj for SwiGLU."""
    return 2 if kind == "swiglu" else 1


def _count_swiglu_without_biases(d_model, d_ff, kind="relu", bias=True):
    return ffn_parameter_count(d_model, d_ff, kind, bias and kind != "swiglu")


def _count_bias_widths_swapped(d_model, d_ff, kind="relu", bias=True):
    return (_up_maps(kind) + 1) * d_model * d_ff + (_up_maps(kind) * d_model + d_ff if bias else 0)


def _count_swiglu_one_hidden_bias(d_model, d_ff, kind="relu", bias=True):
    return (_up_maps(kind) + 1) * d_model * d_ff + (d_ff + d_model if bias else 0)


def _count_one_bias_per_map(d_model, d_ff, kind="relu", bias=True):
    return (_up_maps(kind) + 1) * (d_model * d_ff + (1 if bias else 0))


def _count_no_down_bias(d_model, d_ff, kind="relu", bias=True):
    return (_up_maps(kind) + 1) * d_model * d_ff + (_up_maps(kind) * d_ff if bias else 0)


def _count_only_down_bias(d_model, d_ff, kind="relu", bias=True):
    return (_up_maps(kind) + 1) * d_model * d_ff + (d_model if bias else 0)


def _count_down_proj_forgotten(d_model, d_ff, kind="relu", bias=True):
    return _up_maps(kind) * (d_model * d_ff + (d_ff if bias else 0))


def _count_four_d_model(d_model, d_ff, kind="relu", bias=True):
    return ffn_parameter_count(d_model, 4 * d_model, kind, bias)


PARAMETER_COUNT = Exercise(
    name="ffn_parameter_count",
    key="parameter_count",
    reference=ffn_parameter_count,
    inputs=_counting("relu", True),
    arg_names=("d_model", "d_ff", "kind", "bias"),
    shapes=[dict(D=2, F=3), dict(D=512, F=2048)],
    visible=[Case("2017 base FFN: 512 → 2048 → 512, with biases"),
             Case("Llama-7B SwiGLU: 4096 → 11008, no biases", dims=dict(D=4096, F=11008),
                  inputs=_counting("swiglu", False)),
             Case("SwiGLU with biases", inputs=_counting("swiglu", True), dims=dict(D=10, F=7))],
    hidden=[
        Case("GELU, with biases", inputs=_counting("gelu", True), dims=dict(D=768, F=3072)),
        Case("ReLU, no biases", inputs=_counting("relu", False), dims=dict(D=64, F=256)),
        Case("random widths, SwiGLU", inputs=_counting("swiglu", False), dims=random_dims(D=(1, 300), F=(1, 900))),
        Case("random widths, ReLU", dims=random_dims(D=(1, 300), F=(1, 900))),
    ],
    mistakes=[
        # listed before "biases forgotten": the two give the same count for a SwiGLU, where this one alone is wrong
        Mistake("SwiGLU counted without biases", _count_swiglu_without_biases,
                "with bias=True every linear map has biases, the SwiGLU's three too (Llama builds it with "
                "bias=False, but the count follows the argument); yours leaves them out for \"swiglu\".",
                "for \"swiglu\" with bias=True, add d_ff (gate_proj) + d_ff (up_proj) + d_model (down_proj)."),
        Mistake("biases forgotten", _count_no_biases,
                "with bias=True every linear map also has one bias per output; you counted the weights only.",
                "add d_ff for up_proj (and d_ff for gate_proj) and d_model for down_proj."),
        Mistake("SwiGLU counted with two matrices", _count_two_matrices,
                "SwiGLU has three matrices, gate_proj and up_proj (d_model × d_ff each) and down_proj "
                "(d_ff × d_model); you counted two.",
                "3 · d_model · d_ff weights for \"swiglu\" (and biases d_ff + d_ff + d_model)."),
        Mistake("bias=False ignored", _count_bias_always,
                "with bias=False the linear maps have no biases (as in Llama); you counted them anyway.",
                "count the weight matrices only when bias is False."),
        Mistake("SwiGLU width shrunk to ⅔ inside the count", _count_swiglu_two_thirds,
                "d_ff is the hidden width the SwiGLU is built with; the ⅔ rule applies when choosing it "
                "(swiglu_hidden_size), not again when counting.",
                "use d_ff as it is for every kind."),
        Mistake("bias widths swapped: d_model for the up-projections, d_ff for down_proj", _count_bias_widths_swapped,
                "a bias has one entry per *output* of its map: gate_proj and up_proj output d_ff values, "
                "down_proj d_model; yours sizes them by the other width (for the FFN the sum happens to agree, for "
                "SwiGLU it does not).",
                "2 · d_ff + d_model biases for \"swiglu\" (d_ff + d_model for the FFN)."),
        Mistake("SwiGLU: one hidden bias instead of two", _count_swiglu_one_hidden_bias,
                "SwiGLU has two maps into the hidden width, gate_proj and up_proj, each with its own bias of d_ff "
                "entries; yours counts the FFN's biases, one of d_ff and one of d_model.",
                "biases for \"swiglu\": d_ff + d_ff + d_model."),
        Mistake("one bias per linear map instead of one per output", _count_one_bias_per_map,
                "a bias is a vector with one entry per output of its map (n_out numbers), not a single number "
                "per map.",
                "up_proj's bias has d_ff entries (gate_proj's too), down_proj's d_model."),
        Mistake("down_proj's bias forgotten", _count_no_down_bias,
                "down_proj has a bias too, with d_model entries (one per output); you counted the biases of the "
                "maps into the hidden width only.",
                "add d_model for down_proj's bias when bias is True."),
        Mistake("only down_proj's bias counted", _count_only_down_bias,
                "every linear map has a bias when bias is True, the maps into the hidden width too: up_proj's "
                "(and gate_proj's) has d_ff entries; you counted down_proj's d_model only.",
                "add d_ff for up_proj's bias (and d_ff for gate_proj's in a SwiGLU)."),
        Mistake("down_proj forgotten", _count_down_proj_forgotten,
                "the FFN maps back to the model width: down_proj (d_ff × d_model weights, d_model biases) is "
                "part of it; you counted the maps into the hidden width only.",
                "add d_ff · d_model weights (and d_model biases when bias is True) for down_proj."),
        Mistake("d_ff ignored: the hidden width taken as 4·d_model", _count_four_d_model,
                "d_ff is the hidden width to count with; 4·d_model is only the 2017 paper's choice of it "
                "(Llama-7B's is 11008, not 4 · 4096).",
                "use the d_ff argument in every term."),
        Mistake("biases sized by the hidden width only", _count_square_biases,
                "down_proj maps back to d_model, so its bias has d_model entries; you gave it d_ff.",
                "biases: d_ff per up-projection (up_proj, and gate_proj for SwiGLU) plus d_model for down_proj."),
    ],
)

EXERCISES = (FEED_FORWARD, SWIGLU, HIDDEN_SIZE, PARAMETER_COUNT)
