"""Chapter 1 widget — the attention calculator.

Edit X, W_Q, W_K, W_V and see every intermediate of softmax(Q Kᵀ / √d_k) V; a second panel
shows how the softmax saturates when scores grow (large d_k without the 1/√d_k scaling, or a
low temperature). Plug in your own attention with ``attention_explorer(fn=my_attention)``:
``fn(q, k, v, return_weights=True) -> (out, weights)`` like
`tfm_ref.scaled_dot_product_attention`. On the book's pages, `static_attention_explorer` is the
widget: the notes' example at a few temperatures and widths.

Shapes: T query positions · S key positions · D input width · Dk query/key width · Dv value width.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import ipywidgets as widgets
import numpy as np
import torch
from matplotlib.figure import Figure

from tfm_ref.attention import scaled_dot_product_attention, softmax
from .controls import live_widget
from .display import FIGURE_WIDTH, LiveWidget
from .static import Control, Panel, StaticRecipe, StaticWidget

__all__ = ["NOTES_EXAMPLE", "parse_matrix", "attention_steps", "saturation_curve", "attention_figure",
           "saturation_figure", "explorer_figure", "attention_explorer", "static_attention_explorer"]

AttentionFn = Callable[..., tuple[torch.Tensor, torch.Tensor]]

# The worked example of the notes (000_53fd03a28cfd30be.txt): two tokens, d = 4, d_k = d_v = 2.
NOTES_EXAMPLE = {
    "X": "1 2 3 4; 4 3 2 1",
    "W_Q": "1 0; 0 1; 1 0; 0 1",
    "W_K": "0 1; 1 0; 0 1; 1 0",
    "W_V": "1 0; 0 1; 1 0; 0 1",
}
# The values the book's static calculator offers (the live sliders reach every value in between).
SCORE_MULTIPLIERS = (0.1, 0.3, 1.0, 3.0, 10.0, 30.0)
D_K_STEPS = (1, 4, 16, 64, 256, 1024)


def parse_matrix(text: str) -> torch.Tensor:
    """'1 2; 3 4' (rows split by ';' or new lines, entries by spaces or commas) → a float64 matrix.

    Raises:
        ValueError: empty text, a non-number, or rows of different lengths.
    """
    rows = [row.replace(",", " ").split() for row in text.replace("\n", ";").split(";") if row.strip()]
    if not rows:
        raise ValueError("the matrix is empty")
    if len({len(row) for row in rows}) != 1:
        raise ValueError(f"every row needs the same number of entries, got {[len(r) for r in rows]}")
    try:
        return torch.tensor([[float(v) for v in row] for row in rows], dtype=torch.float64)
    except ValueError:
        raise ValueError(f"the matrix has an entry that is not a number: {text!r}") from None


def attention_steps(x: torch.Tensor, w_q: torch.Tensor, w_k: torch.Tensor, w_v: torch.Tensor,
                    score_multiplier: float = 1.0, fn: AttentionFn | None = None) -> dict[str, torch.Tensor]:
    """Every intermediate of single-head self-attention in the row convention.

    Args:
        x: (T, D) one row per token. w_q, w_k: (D, Dk). w_v: (D, Dv).
        score_multiplier: multiplies the scaled scores (1 / temperature); 1 is plain attention.
        fn: attention function ``fn(q, k, v, return_weights=True)``; None uses tfm_ref's.
    Returns:
        dict with Q, K, V, scores (QKᵀ), scaled (QKᵀ/√d_k · multiplier), weights, output.
    Raises:
        ValueError: shapes that do not chain.
    """
    if x.shape[-1] != w_q.shape[0] or x.shape[-1] != w_k.shape[0] or x.shape[-1] != w_v.shape[0]:
        raise ValueError(f"X is (T, D) = {tuple(x.shape)}: every W needs D = {x.shape[-1]} rows, got "
                         f"W_Q {tuple(w_q.shape)}, W_K {tuple(w_k.shape)}, W_V {tuple(w_v.shape)}")
    if w_q.shape[1] != w_k.shape[1]:
        raise ValueError(f"W_Q and W_K need the same width d_k, got {w_q.shape[1]} and {w_k.shape[1]}")
    fn = fn or scaled_dot_product_attention
    q, k, v = x @ w_q, x @ w_k, x @ w_v  # (T, Dk), (T, Dk), (T, Dv)
    scores = q @ k.T  # (T, T)
    scaled = scores / math.sqrt(q.shape[-1]) * score_multiplier
    # Scaling q scales every score by the same factor, so any attention function shows the temperature.
    output, weights = fn(q * score_multiplier, k, v, return_weights=True)
    return {"Q": q, "K": k, "V": v, "scores": scores, "scaled": scaled, "weights": weights, "output": output}


def saturation_curve(d_k: int, n_keys: int = 8, scaled: bool = True, seed: int = 0) -> torch.Tensor:
    """Softmax weights of one query over ``n_keys`` keys, entries of q and k ~ N(0, 1).

    Without the 1/√d_k scaling the scores have variance d_k, so for large d_k one key takes
    almost all the weight (the softmax saturates and its gradient vanishes).
    """
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(d_k, generator=generator, dtype=torch.float64)
    k = torch.randn(n_keys, d_k, generator=generator, dtype=torch.float64)
    scores = k @ q / (math.sqrt(d_k) if scaled else 1.0)  # (n_keys,)
    return softmax(scores, dim=-1)


def _heatmap(ax, matrix: torch.Tensor, title: str) -> None:
    data = matrix.detach().double().numpy()
    ax.imshow(data, cmap="Blues")
    for (i, j), value in np.ndenumerate(data):
        ax.text(j, i, f"{value:.3g}", ha="center", va="center", fontsize=10,
                color="white" if value > data.min() + 0.6 * (np.ptp(data) or 1) else "black")
    ax.set_title(title, fontsize=10)
    ax.set_xticks([])
    ax.set_yticks([])


def attention_figure(steps: dict[str, torch.Tensor], fig: Figure | None = None) -> Figure:
    """One annotated heatmap per intermediate of `attention_steps` (drawn on ``fig`` if given), in two rows."""
    names = [("Q", "Q = X W_Q"), ("K", "K = X W_K"), ("V", "V = X W_V"), ("scores", "scores Q Kᵀ"),
             ("scaled", "scaled QKᵀ/√d_k"), ("weights", "weights (softmax)"), ("output", "output = weights·V")]
    fig = fig if fig is not None else Figure(figsize=(FIGURE_WIDTH, 3.6), layout="constrained")
    axes = fig.subplots(2, 4).flatten()
    for ax, (key, title) in zip(axes, names):
        _heatmap(ax, steps[key], title)
    for ax in axes[len(names):]:
        ax.set_axis_off()
    return fig


def saturation_figure(d_k_values: tuple[int, ...] = (4, 64, 512), n_keys: int = 8,
                      fig: Figure | None = None) -> Figure:
    """Bars of the weights of one query, with and without 1/√d_k, for a few widths d_k."""
    width = min(FIGURE_WIDTH, max(4.5, 2.1 * len(d_k_values)))
    fig = fig if fig is not None else Figure(figsize=(width, 2.8), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(d_k_values), sharey=True))
    positions = np.arange(n_keys)
    for ax, d_k in zip(axes, d_k_values):
        ax.bar(positions - 0.2, saturation_curve(d_k, n_keys, scaled=False).numpy(), 0.4, label="QKᵀ (unscaled)")
        ax.bar(positions + 0.2, saturation_curve(d_k, n_keys, scaled=True).numpy(), 0.4, label="QKᵀ / √d_k")
        ax.set_title(f"d_k = {d_k}", fontsize=10)
        ax.set_xlabel("key")
    axes[0].set_ylabel("attention weight")
    axes[0].legend(fontsize=9)
    return fig


def explorer_figure(steps: dict[str, torch.Tensor], d_k: int) -> Figure:
    """The calculator's figure: (a) every intermediate, (b) saturation at width ``d_k``."""
    fig = Figure(figsize=(FIGURE_WIDTH, 6.8), layout="constrained")
    top, bottom = fig.subfigures(2, 1, height_ratios=[1.3, 1])
    attention_figure(steps, top)
    top.suptitle("(a) every intermediate of softmax(Q Kᵀ / √d_k) V", fontsize=10)
    for ax in saturation_figure((d_k,), fig=bottom).axes:
        ax.set_title("")  # d_k goes in the panel title
    bottom.suptitle(f"(b) one query over 8 random keys, d_k = {d_k}:\nsaturation with and without 1/√d_k", fontsize=10)
    return fig


def attention_explorer(fn: AttentionFn | None = None) -> LiveWidget:
    """The attention calculator (chapter 1). ``fn`` is your attention function, or None."""
    boxes = {name: widgets.Textarea(value=value, description=name, layout=widgets.Layout(width="230px", height="70px"))
             for name, value in NOTES_EXAMPLE.items()}
    multiplier = widgets.FloatLogSlider(value=1.0, base=10, min=-1, max=1.5, step=0.05,
                                        description="1/temperature")
    d_k = widgets.IntSlider(value=64, min=1, max=1024, description="d_k (panel b)")

    def draw() -> Figure:
        matrices = {name: parse_matrix(box.value) for name, box in boxes.items()}
        steps = attention_steps(matrices["X"], matrices["W_Q"], matrices["W_K"], matrices["W_V"],
                                multiplier.value, fn)
        return explorer_figure(steps, d_k.value)

    return live_widget([list(boxes.values()), [multiplier, d_k]], draw,
                       "Attention calculator — starting from the notes' worked example",
                       StaticRecipe.of(static_attention_explorer) if fn is None else None)


def static_attention_explorer() -> StaticWidget:
    """The calculator on the book's pages: the notes' example at a few temperatures, saturation at a few d_k."""
    matrices = [parse_matrix(NOTES_EXAMPLE[name]) for name in ("X", "W_Q", "W_K", "W_V")]
    example = "; ".join(f"{name} = {text}" for name, text in NOTES_EXAMPLE.items())
    return StaticWidget(
        "Attention calculator — the notes' worked example",
        controls=(Control("multiplier", "1/temperature", SCORE_MULTIPLIERS, 1.0),
                  Control("d_k", "d_k (panel b)", D_K_STEPS, 64)),
        panels=(Panel(lambda multiplier: attention_figure(attention_steps(*matrices, multiplier)), ("multiplier",),
                      alt="Q, K, V, the scores, the scaled scores, the weights and the output as annotated heatmaps"),
                Panel(lambda d_k: saturation_figure((d_k,)), ("d_k",),
                      alt="softmax weights of one query over 8 keys, with and without the 1/√d_k scaling")),
        note=f"The matrices are the notes' example ({example}).")
