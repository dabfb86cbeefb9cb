"""Chapter 3 widget — the mask builder.

Choose the real length of each sequence in a padded batch and whether the look-ahead (causal)
mask applies; see the boolean mask (True = may attend), the masked scores and the weights
of every sequence. Plug in your own attention with ``mask_builder(fn=my_attention)``:
``fn(q, k, v, mask, return_weights=True) -> (out, weights)`` like
`tfm_ref.scaled_dot_product_attention`. On the book's pages, `static_mask_builder` is the widget.

Shapes: B batch · T query positions · S key positions · Dk width.
"""
from __future__ import annotations

from collections.abc import Callable

import ipywidgets as widgets
import numpy as np
import torch
from matplotlib.figure import Figure

from tfm_ref.attention import scaled_dot_product_attention
from tfm_ref.masks import causal_mask, padding_mask
from .controls import live_widget
from .display import FIGURE_WIDTH, LiveWidget
from .static import Control, Panel, StaticRecipe, StaticWidget

__all__ = ["parse_lengths", "build_mask", "masked_attention", "mask_figure", "mask_panel", "mask_builder",
           "static_mask_builder"]

# Batches the book's static builder offers (the live widget takes any lengths).
LENGTH_PRESETS = ("3, 5", "2, 4", "5, 1")


def parse_lengths(text: str) -> list[int]:
    """'3, 5' (commas or spaces) → [3, 5].

    Raises:
        ValueError: a length that is not a whole number, or no length at all.
    """
    try:
        values = [int(v) for v in text.replace(",", " ").split()]
    except ValueError:
        raise ValueError(f"lengths must be whole numbers, got {text!r}") from None
    if not values:
        raise ValueError("give at least one length")
    return values


def build_mask(lengths: list[int], max_len: int, causal: bool, pad_queries: bool = False) -> torch.Tensor:
    """The combined boolean mask (B, T, S), True = may attend.

    Args:
        lengths: real tokens of each sequence; the rest of ``max_len`` is padding.
        causal: add the look-ahead mask (decoder self-attention).
        pad_queries: also block padded *query* rows (their outputs are thrown away anyway).
    """
    keys = padding_mask(lengths, max_len)[:, None, :]  # (B, 1, S): which keys are real
    mask = keys.expand(len(lengths), max_len, max_len)  # (B, T, S)
    if causal:
        mask = mask & causal_mask(max_len)  # (B, T, S) & (T, S)
    if pad_queries:
        mask = mask & padding_mask(lengths, max_len)[:, :, None]  # (B, T, 1): which queries are real
    return mask


def masked_attention(mask: torch.Tensor, d_k: int = 4, seed: int = 0,
                     fn: Callable[..., tuple[torch.Tensor, torch.Tensor]] | None = None) -> dict[str, torch.Tensor]:
    """Random q, k, v under ``mask`` (B, T, S): the masked scores (−∞ where blocked) and the weights."""
    fn = fn or scaled_dot_product_attention
    generator = torch.Generator().manual_seed(seed)
    batch, length, _ = mask.shape
    q, k, v = (torch.randn(batch, length, d_k, generator=generator) for _ in range(3))  # (B, T, Dk)
    scores = q @ k.transpose(-2, -1) / d_k**0.5  # (B, T, S)
    _, weights = fn(q, k, v, mask, return_weights=True)
    return {"scores": scores.masked_fill(~mask, float("-inf")), "weights": weights}


def mask_figure(mask: torch.Tensor, result: dict[str, torch.Tensor], fig: Figure | None = None) -> Figure:
    """For each sequence (a row): the mask, the masked scores and the weights (rows = queries)."""
    batch, length = mask.shape[0], mask.shape[-1]
    cell = 0.34  # inches per matrix cell: room for a "-0.53" at 9 pt
    size = (max(FIGURE_WIDTH, 3 * cell * length + 1.1), (cell * length + 0.9) * batch)
    fig = fig if fig is not None else Figure(figsize=size, layout="constrained")
    axes = np.array(fig.subplots(batch, 3, squeeze=False))
    for b in range(batch):
        panels = [(mask[b].float(), "mask (1 = may attend)", "Greens", (-0.5, 1.5)),
                  (result["scores"][b], "scores (blank = −∞)", "coolwarm", (-3, 3)),
                  (result["weights"][b], "weights", "Blues", (0, 1.6))]
        for ax, (data, title, cmap, (low, high)) in zip(axes[b], panels):
            ax.imshow(data.masked_fill(~torch.isfinite(data), float("nan")).numpy(), cmap=cmap, vmin=low, vmax=high)
            for (i, j), value in np.ndenumerate(data.numpy()):
                if np.isfinite(value):
                    ax.text(j, i, f"{value:.2f}" if cmap != "Greens" else str(int(value)), ha="center",
                            va="center", fontsize=9)
            if b == 0:
                ax.set_title(title, fontsize=10)
            ax.set_xlabel("key position", fontsize=9)
            ax.set_xticks(range(data.shape[1]))
            ax.set_yticks(range(data.shape[0]))
            ax.tick_params(labelsize=9)
        axes[b, 0].set_ylabel(f"sequence {b}: query", fontsize=10)
    return fig


def mask_builder(fn: Callable[..., tuple[torch.Tensor, torch.Tensor]] | None = None) -> LiveWidget:
    """The mask builder (chapter 3). ``fn`` is your masked attention function, or None."""
    lengths = widgets.Text(value="3, 5", description="lengths")
    max_len = widgets.IntSlider(value=5, min=1, max=10, description="padded to")
    causal = widgets.Checkbox(value=True, description="causal (look-ahead)")
    pad_queries = widgets.Checkbox(value=False, description="mask padded queries too")

    def draw() -> Figure:
        return mask_panel(lengths.value, max_len.value, causal.value, pad_queries.value, fn)

    return live_widget([[lengths, max_len], [causal, pad_queries]], draw, "Mask builder",
                       StaticRecipe.of(static_mask_builder) if fn is None else None)


def mask_panel(lengths: str, max_len: int, causal: bool, pad_queries: bool,
               fn: Callable[..., tuple[torch.Tensor, torch.Tensor]] | None = None) -> Figure:
    """`mask_figure` of the batch with the typed ``lengths`` padded to ``max_len`` (ValueError for bad lengths)."""
    mask = build_mask(parse_lengths(lengths), max_len, causal, pad_queries)
    return mask_figure(mask, masked_attention(mask, fn=fn))


def static_mask_builder() -> StaticWidget:
    """The builder on the book's pages: three batches, with and without each mask."""
    return StaticWidget(
        "Mask builder",
        controls=(Control("lengths", "lengths", LENGTH_PRESETS, "3, 5"), Control("max_len", "padded to", (5,), 5),
                  Control("causal", "causal (look-ahead)", (False, True), True),
                  Control("pad_queries", "mask padded queries too", (False, True), False)),
        panels=(Panel(mask_panel, ("lengths", "max_len", "causal", "pad_queries"),
                      alt="for each sequence: the boolean mask, the masked scores and the attention weights"),))
