"""Chapter 5 widget — the sinusoidal positional-encoding table and what its dot products say.

Panel (a) is the table PE (positions × features): fast sin/cos pairs on the left, slow ones on
the right. Panel (b) is PE(p)·PE(p + k) against the offset k for a few anchors p: the curves
lie on top of each other, because the dot product depends on k only; each anchor has its own
marks, placed apart, so that every curve shows where it covers the others. Plug in your own table
with ``pe_explorer(fn=my_pe)``: ``fn(n_positions, d_model) -> (n_positions, d_model)`` like
`tfm_ref.sinusoidal_positional_encoding`. On the book's pages, `static_pe_explorer` is the widget.

Shapes: P positions · D model width.
"""
from __future__ import annotations

from collections.abc import Callable

import ipywidgets as widgets
import numpy as np
import torch
from matplotlib.figure import Figure

from tfm_ref.positional import sinusoidal_positional_encoding
from .controls import live_widget
from .display import FIGURE_WIDTH, LiveWidget
from .static import Control, Panel, StaticRecipe, StaticWidget, single_panel

__all__ = ["pe_table", "offset_dot_products", "explorer_anchors", "pe_heatmap", "offset_curves", "pe_figure",
           "pe_explorer", "static_pe_explorer"]

PEFn = Callable[[int, int], torch.Tensor]


def pe_table(n_positions: int, d_model: int, fn: PEFn | None = None) -> torch.Tensor:
    """The table ``fn(n_positions, d_model)`` as float64 (P, D); None uses tfm_ref's.

    Raises:
        ValueError: the function returned a table of the wrong shape.
    """
    table = (fn or sinusoidal_positional_encoding)(n_positions, d_model)
    table = torch.as_tensor(table).double()
    if tuple(table.shape) != (n_positions, d_model):
        raise ValueError(f"the PE function must return (n_positions, d_model) = {(n_positions, d_model)}, "
                         f"got {tuple(table.shape)}")
    return table


def offset_dot_products(table: torch.Tensor, anchor: int, max_offset: int) -> torch.Tensor:
    """PE(anchor) · PE(anchor + k) for k = 0 … max_offset, divided by D/2 (so k = 0 gives 1).

    Raises:
        ValueError: anchor + max_offset past the end of the table.
    """
    if anchor < 0 or anchor + max_offset >= table.shape[0]:
        raise ValueError(f"anchor {anchor} + offset {max_offset} is outside the table of {table.shape[0]} positions")
    rows = table[anchor : anchor + max_offset + 1]  # (K + 1, D)
    return rows @ table[anchor] / (table.shape[1] / 2)  # (K + 1,)


def explorer_anchors(anchor: int, n_positions: int) -> tuple[int, ...]:
    """The explorer's anchors: the chosen one (kept in the first half of the table), 0 and a quarter of the way."""
    return tuple(dict.fromkeys((min(anchor, n_positions // 2), 0, n_positions // 4)))


def pe_heatmap(table: torch.Tensor, ax) -> None:
    """(a) the PE table as a heatmap on ``ax``, with its colour bar."""
    image = ax.imshow(table.numpy(), aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
    ax.set_xlabel("feature index (even = sin, odd = cos)")
    ax.set_ylabel("position p")
    ax.set_title(f"(a) PE table, {table.shape[0]} positions × d_model = {table.shape[1]}", fontsize=10)
    ax.figure.colorbar(image, ax=ax, fraction=0.05)


def offset_curves(table: torch.Tensor, anchors: tuple[int, ...], max_offset: int, ax) -> None:
    """(b) normalised PE(p)·PE(p + k) against k on ``ax``, one curve per anchor p: the first a bold line, the
    others marks alone, each on its own offsets (the curves coincide: the dot product depends on k only)."""
    max_offset = min(max_offset, table.shape[0] - 1 - max(anchors))
    offsets = np.arange(max_offset + 1)
    step = max(len(anchors), max_offset // 12)  # about a dozen marks per curve
    for i, anchor in enumerate(anchors):
        values = offset_dot_products(table, anchor, max_offset).numpy()
        if i == 0:
            ax.plot(offsets, values, lw=2, label=f"p = {anchor}")
        else:
            ax.plot(offsets, values, ls="none", marker="ox^sv"[(i - 1) % 5], ms=6, mfc="none", mew=1.5,
                    markevery=(i * step // len(anchors), step), label=f"p = {anchor}")
    ax.set_xlabel("offset k")
    ax.set_ylabel("PE(p)·PE(p+k) / (d/2)")
    ax.set_title("(b) the dot product depends on the offset only", fontsize=10)
    ax.legend(fontsize=9)
    ax.grid(alpha=0.3)


def pe_figure(table: torch.Tensor, anchors: tuple[int, ...] = (0, 10, 30), max_offset: int = 50,
              fig: Figure | None = None) -> Figure:
    """(a) the PE heatmap above (b) normalised PE(p)·PE(p + k) against k for each anchor p."""
    fig = fig if fig is not None else Figure(figsize=(FIGURE_WIDTH, 6.6), layout="constrained")
    heat, curve = fig.subplots(2, 1, height_ratios=[1.2, 1])
    pe_heatmap(table, heat)
    offset_curves(table, anchors, max_offset, curve)
    return fig



TITLE = "Positional-encoding explorer — heatmap and dot product against offset"


def pe_explorer(fn: PEFn | None = None, n_positions: int = 100, d_model: int = 64) -> LiveWidget:
    """Sliders for the width, the number of positions and the anchor; the figure of `pe_figure`."""
    width = widgets.IntSlider(value=d_model, min=2, max=256, step=2, description="d_model")
    length = widgets.IntSlider(value=n_positions, min=20, max=400, step=10, description="positions")
    anchor = widgets.IntSlider(value=10, min=0, max=200, description="anchor p")

    def draw() -> Figure:
        table = pe_table(length.value, width.value, fn)
        return pe_figure(table, anchors=explorer_anchors(anchor.value, length.value), max_offset=length.value // 2)

    return live_widget([[width, length, anchor]], draw, TITLE,
                       StaticRecipe.of(static_pe_explorer, n_positions=n_positions, d_model=d_model)
                       if fn is None else None)


def static_pe_explorer(n_positions: int = 100, d_model: int = 64) -> StaticWidget:
    """The explorer on the book's pages: three widths, three lengths, three anchors (the given ones included)."""
    def offered(defaults: tuple[int, ...], given: int) -> tuple[int, ...]:
        return tuple(sorted({*defaults, given}))

    def curves(d_model: int, n_positions: int, anchor: int) -> Figure:
        return single_panel(offset_curves, pe_table(n_positions, d_model), explorer_anchors(anchor, n_positions),
                       n_positions // 2)

    return StaticWidget(
        TITLE,
        controls=(Control("d_model", "d_model", offered((16, 64, 256), d_model), d_model),
                  Control("n_positions", "positions", offered((50, 100, 200), n_positions), n_positions),
                  Control("anchor", "anchor p", (0, 10, 30), 10)),
        panels=(Panel(lambda d_model, n_positions: single_panel(pe_heatmap, pe_table(n_positions, d_model)),
                      ("d_model", "n_positions"), alt="the sinusoidal PE table as a heatmap, positions against features"),
                Panel(curves, ("d_model", "n_positions", "anchor"),
                      alt="normalised dot product PE(p)·PE(p+k) against the offset k for three anchors")))
