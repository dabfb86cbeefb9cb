"""Wiring shared by the widgets of chapters 5–9: controls → redraw → figure, with errors shown.

`live_widget` redraws the figure when a control changes and shows a ValueError as a red line instead of a
traceback; `figure_image` shows a figure as a PNG, whatever matplotlib backend the kernel has.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import ipywidgets as widgets
from IPython.display import Image
from matplotlib.figure import Figure

from .display import PAGE_DPI, LiveWidget, figure_png, redraw
from .static import StaticRecipe

__all__ = ["figure_image", "live_widget"]


def figure_image(fig: Figure, dpi: int = PAGE_DPI) -> Image:
    """``fig`` as a PNG image for display: a bare `Figure` has no rich output without pyplot's hooks."""
    return Image(data=figure_png(fig, dpi=dpi))


def live_widget(rows: Sequence[Sequence[widgets.Widget]], draw: Callable[[], Figure], title: str,
                static: StaticRecipe | None = None) -> LiveWidget:
    """A `LiveWidget` whose figure ``draw()`` is redrawn whenever a control in ``rows`` changes.

    Args:
        rows: controls, one list per horizontal row.
        draw: builds the figure from the controls' current values; may raise ValueError. It may
            also set controls (e.g. refill a dropdown's options): that starts no second draw.
        title: the line above the static snapshot.
        static: how the book's build makes the widget's static version (None: it has none).
    """
    message = widgets.HTML()
    output = widgets.Output()
    drawing = False

    def update(_change=None) -> Figure | None:
        nonlocal drawing
        if drawing:
            return None
        drawing = True
        try:
            return redraw(output, message, draw)
        finally:
            drawing = False

    for row in rows:
        for control in row:
            control.observe(update, names="value")
    container = widgets.VBox([*(widgets.HBox(list(row)) for row in rows), message, output])
    initial = update()
    return LiveWidget(container, draw if initial is None else (lambda: initial), title, static)
