"""Chapter 6 widget — activations of the feed-forward network and what each FFN costs in parameters.

Panel (a) plots ReLU, GELU and SiLU (Swish), with your own activation if you pass one:
``ffn_explorer(fn=my_activation)``, ``fn(x) -> y`` elementwise on a tensor. Panel (b) counts
the parameters of the tfm_ref modules themselves — a ReLU/GELU FFN of width F, a SwiGLU of
width F, and a SwiGLU of width ⅔·F (the rule that makes it cost what the ReLU FFN costs).
The modules are built on PyTorch's "meta" device, so even a 70B-model width costs no memory.
On the book's pages, `static_ffn_explorer` is the widget.

Shapes: D model width · F hidden width.
"""
from __future__ import annotations

from collections.abc import Callable

import ipywidgets as widgets
import numpy as np
import torch
import torch.nn.functional as F
from matplotlib.figure import Figure
from torch import nn

from tfm_ref.feedforward import FeedForward, SwiGLU, swiglu_hidden_size
from .controls import live_widget
from .display import FIGURE_WIDTH, LiveWidget
from .static import Control, Panel, StaticRecipe, StaticWidget, single_panel

__all__ = ["ACTIVATION_CURVES", "count_parameters", "ffn_parameter_counts", "activation_curves", "parameter_bars",
           "ffn_figure", "ffn_explorer", "static_ffn_explorer"]

ActivationFn = Callable[[torch.Tensor], torch.Tensor]

ACTIVATION_CURVES: dict[str, ActivationFn] = {
    "ReLU": F.relu,
    "GELU (exact, erf)": F.gelu,
    "GELU (tanh approx.)": lambda x: F.gelu(x, approximate="tanh"),
    "SiLU / Swish": F.silu,
}


def count_parameters(module: nn.Module) -> int:
    """Number of scalars in the module's parameters."""
    return sum(p.numel() for p in module.parameters())


def ffn_parameter_counts(d_model: int, d_ff: int, bias: bool = True) -> dict[str, int]:
    """Parameters of one FFN sublayer of each kind, counted on the real modules.

    Returns:
        {"FFN (ReLU/GELU), F": …, "SwiGLU, F": …, "SwiGLU, ⅔F": …}; the SwiGLUs follow
        ``bias`` as well (Llama uses none).
    """
    with torch.device("meta"):  # shapes only: no memory, so any width is fine
        return {
            f"FFN (ReLU/GELU), F={d_ff}": count_parameters(FeedForward(d_model, d_ff, bias=bias)),
            f"SwiGLU, F={d_ff}": count_parameters(SwiGLU(d_model, d_ff, bias=bias)),
            f"SwiGLU, ⅔F={swiglu_hidden_size(d_ff)}": count_parameters(
                SwiGLU(d_model, swiglu_hidden_size(d_ff), bias=bias)),
        }


def activation_curves(x_range: float, fn: ActivationFn | None, curves) -> None:
    """(a) the activation curves on [−x_range, x_range], drawn on the axes ``curves``.

    Raises:
        ValueError: ``fn`` returned a tensor of another shape than its input.
    """
    x = torch.linspace(-x_range, x_range, 401, dtype=torch.float64)
    named = dict(ACTIVATION_CURVES)
    if fn is not None:
        named["your fn"] = fn
    for name, activation in named.items():
        y = torch.as_tensor(activation(x.clone()))
        if y.shape != x.shape:
            raise ValueError(f"{name} must be elementwise: input {tuple(x.shape)}, output {tuple(y.shape)}")
        curves.plot(x.numpy(), y.double().numpy(), label=name, lw=2.5 if name == "your fn" else 1.5,
                    ls=":" if name == "your fn" else "-")
    curves.axhline(0, color="grey", lw=0.5)
    curves.axvline(0, color="grey", lw=0.5)
    curves.set_title("(a) activations", fontsize=10)
    curves.set_xlabel("x")
    curves.legend(fontsize=9)
    curves.grid(alpha=0.3)


def parameter_bars(d_model: int, d_ff: int, bias: bool, bars) -> None:
    """(b) the parameter counts of one FFN sublayer of each kind, drawn on the axes ``bars``."""
    counts = ffn_parameter_counts(d_model, d_ff, bias)
    positions = np.arange(len(counts))
    bars.barh(positions, list(counts.values()), color=["tab:blue", "tab:red", "tab:green"])
    bars.set_yticks(positions, list(counts))
    for y, value in zip(positions, counts.values()):
        bars.text(value, y, f" {value:,}", va="center", fontsize=9)
    bars.set_xlim(0, max(counts.values()) * 1.45)
    bars.set_title(f"(b) parameters of one FFN sublayer, d_model = {d_model}", fontsize=10)
    bars.set_xlabel("parameters")


def ffn_figure(d_model: int = 512, d_ff: int = 2048, bias: bool = True, fn: ActivationFn | None = None,
               x_range: float = 4.0, fig: Figure | None = None) -> Figure:
    """(a) activation curves on [−x_range, x_range] above (b) parameter counts of one FFN sublayer.

    Raises:
        ValueError: ``fn`` returned a tensor of another shape than its input.
    """
    fig = fig if fig is not None else Figure(figsize=(FIGURE_WIDTH, 6.4), layout="constrained")
    curves, bars = fig.subplots(2, 1)
    activation_curves(x_range, fn, curves)
    parameter_bars(d_model, d_ff, bias, bars)
    return fig


def ffn_explorer(fn: ActivationFn | None = None) -> LiveWidget:
    """Widths, bias and the x range as controls; the figure of `ffn_figure`."""
    d_model = widgets.IntSlider(value=512, min=16, max=8192, step=16, description="d_model")
    ratio = widgets.FloatSlider(value=4.0, min=1.0, max=8.0, step=0.5, description="F / d_model")
    bias = widgets.Checkbox(value=True, description="biases")
    x_range = widgets.FloatSlider(value=4.0, min=1.0, max=10.0, step=0.5, description="x range")

    def draw() -> Figure:
        return ffn_figure(d_model.value, round(ratio.value * d_model.value), bias.value, fn, x_range.value)

    return live_widget([[d_model, ratio], [bias, x_range]], draw, "FFN explorer — activations and parameter counts",
                       StaticRecipe.of(static_ffn_explorer) if fn is None else None)


def static_ffn_explorer() -> StaticWidget:
    """The explorer on the book's pages: three widths, three ratios, with and without biases, three x ranges."""
    return StaticWidget(
        "FFN explorer — activations and parameter counts",
        controls=(Control("d_model", "d_model", (128, 512, 4096), 512),
                  Control("ratio", "F / d_model", (2.0, 4.0, 8.0), 4.0),
                  Control("bias", "biases", (False, True), True), Control("x_range", "x range", (2.0, 4.0, 8.0), 4.0)),
        panels=(Panel(lambda x_range: single_panel(activation_curves, x_range, None), ("x_range",),
                      alt="ReLU, GELU and SiLU curves"),
                Panel(lambda d_model, ratio, bias: single_panel(parameter_bars, d_model, round(ratio * d_model), bias),
                      ("d_model", "ratio", "bias"), alt="parameters of a ReLU/GELU FFN, a SwiGLU and a ⅔-width SwiGLU")))
