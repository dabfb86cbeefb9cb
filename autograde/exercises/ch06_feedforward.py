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

from ..checking import Call, Case, Exercise, Mistake, ModuleAdapter, randn, random_dims
from ._modules import built_without_dropout, dropout_rate

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
    visible=[Case("ReLU FFN on (B, T, D)")],
    hidden=[
        Case("GELU", dims=dict(B=2, T=4, D=8, F=32, gelu=1)),
        Case("random sizes", dims=_MODULE_SIZES),
        Case("one position", dims=dict(B=1, T=1, D=6, F=24)),
        Case("no biases (bias=False)", dims=dict(B=2, T=3, D=8, F=16, nobias=1)),
        Case("gradients, GELU", dims=dict(B=2, T=3, D=8, F=16, gelu=1), grad=True),
        Case("training mode, dropout=0.3, GELU", dims=dict(B=2, T=3, D=8, F=16, gelu=1, training=1)),
        Case("eval mode, built with dropout=0.3: nothing drops", dims=dict(B=2, T=3, D=8, F=16, with_dropout=1)),
        Case("built with the default arguments: FeedForward(d_model, d_ff)", dims=dict(B=2, T=3, D=8, F=16, defaults=1)),
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
        Mistake("tanh approximation of GELU", _TanhGelu,
                "tfm_ref and nn.Transformer use the exact GELU, x·Φ(x) with the erf; yours is the tanh "
                "approximation.",
                "F.gelu(h), not F.gelu(h, approximate=\"tanh\")."),
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


SWIGLU = Exercise(
    name="SwiGLU",
    key="swiglu",
    reference=tfm_ref.SwiGLU,
    adapter=ModuleAdapter(lambda dims: dict(d_model=dims["D"], d_hidden=dims["F"]) if dims.get("defaults") else dict(
        d_model=dims["D"], d_hidden=dims["F"], bias=bool(dims.get("bias")), dropout=dropout_rate(dims))),
    inputs=_tokens,
    arg_names=("x",),
    shapes=_MODULE_SHAPES,
    visible=[Case("SwiGLU on (B, T, D)")],
    hidden=[
        Case("random sizes", dims=_MODULE_SIZES),
        Case("one position", dims=dict(B=1, T=1, D=6, F=16)),
        Case("with biases (bias=True)", dims=dict(B=2, T=3, D=8, F=16, bias=1)),
        Case("large inputs", inputs=lambda gen, dims, dtype: _tokens(gen, dims, dtype).scaled(10.0)),
        Case("gradients", grad=True),
        Case("training mode, dropout=0.3", dims=dict(B=2, T=3, D=8, F=16, training=1)),
        Case("eval mode, built with dropout=0.3: nothing drops", dims=dict(B=2, T=3, D=8, F=16, with_dropout=1)),
        Case("built with the default arguments: SwiGLU(d_model, d_hidden)", dims=dict(B=2, T=3, D=8, F=16, defaults=1)),
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
        Mistake("dropout argument ignored", built_without_dropout(tfm_ref.SwiGLU), _DROPOUT_IGNORED,
                "self.dropout = nn.Dropout(dropout) in __init__, and self.down_proj(self.dropout(F.silu(gate) * up))."),
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


HIDDEN_SIZE = Exercise(
    name="swiglu_hidden_size",
    key="hidden_size",
    reference=tfm_ref.swiglu_hidden_size,
    inputs=_widths,
    arg_names=("d_ff",),
    shapes=[dict(F=4, M=1), dict(F=2048, M=1), dict(F=2048, M=256)],
    visible=[Case("d_ff = 2048, rounded up to a multiple of 256", dims=dict(F=2048, M=256)),
             Case("the 2017 base model, d_ff = 2048", dims=dict(F=2048, M=1))],
    hidden=[
        Case("d_ff divisible by 3", dims=dict(F=3072, M=1)),
        Case("d_ff = 1000: 2·d_ff/3 = 666.67 is not whole", dims=dict(F=1000, M=1)),
        Case("Llama-7B: 4·4096, multiple of 256", dims=dict(F=16384, M=256)),
        Case("random widths and multiples", dims=random_dims(F=(1, 5000), M=(1, 64))),
        Case("d_ff = 1", dims=dict(F=1, M=1)),
    ],
    mistakes=[
        Mistake("rounded down (int) before rounding to the multiple", _hidden_floor,
                "tfm_ref rounds 2·d_ff/3 *up*, so that the SwiGLU has no fewer parameters than the FFN it "
                "replaces; you truncated it first (as Llama's code does with int(); this course does not).",
                "math.ceil(2 * d_ff / 3 / multiple_of) * multiple_of, with no int() before."),
        Mistake("rounded to the nearest multiple", _hidden_nearest,
                "the width is rounded *up* to the next multiple of multiple_of; you rounded to the nearest one.",
                "multiple_of * math.ceil(2 * d_ff / 3 / multiple_of)."),
        Mistake("multiple_of ignored", _hidden_no_multiple,
                "the width must be a multiple of multiple_of (hardware likes multiples of 64 or 256); yours "
                "ignores it.",
                "round up to the multiple: multiple_of * math.ceil(2 * d_ff / 3 / multiple_of)."),
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


PARAMETER_COUNT = Exercise(
    name="ffn_parameter_count",
    key="parameter_count",
    reference=ffn_parameter_count,
    inputs=_counting("relu", True),
    arg_names=("d_model", "d_ff", "kind", "bias"),
    shapes=[dict(D=2, F=3), dict(D=512, F=2048)],
    visible=[Case("2017 base FFN: 512 → 2048 → 512, with biases"),
             Case("Llama-7B SwiGLU: 4096 → 11008, no biases", dims=dict(D=4096, F=11008),
                  inputs=_counting("swiglu", False))],
    hidden=[
        Case("GELU, with biases", inputs=_counting("gelu", True), dims=dict(D=768, F=3072)),
        Case("ReLU, no biases", inputs=_counting("relu", False), dims=dict(D=64, F=256)),
        Case("SwiGLU with biases", inputs=_counting("swiglu", True), dims=dict(D=10, F=7)),
        Case("random widths, SwiGLU", inputs=_counting("swiglu", False), dims=random_dims(D=(1, 300), F=(1, 900))),
        Case("random widths, ReLU", dims=random_dims(D=(1, 300), F=(1, 900))),
    ],
    mistakes=[
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
        Mistake("biases sized by the hidden width only", _count_square_biases,
                "down_proj maps back to d_model, so its bias has d_model entries; you gave it d_ff.",
                "biases: d_ff per up-projection (up_proj, and gate_proj for SwiGLU) plus d_model for down_proj."),
    ],
)

EXERCISES = (FEED_FORWARD, SWIGLU, HIDDEN_SIZE, PARAMETER_COUNT)
