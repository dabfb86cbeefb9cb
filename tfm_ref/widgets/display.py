"""Show a widget live in Jupyter and as a static snapshot of its initial state on a book page.

The book is a static site: widget JavaScript is not loaded there, so each widget also carries
an HTML snapshot (its controls' values and its first figure) that the page shows instead.
Figures are drawn on `matplotlib.figure.Figure` objects, never through pyplot, so no GUI
backend is needed (headless builds, CI).
"""
from __future__ import annotations

import base64
import html
import io
from collections.abc import Callable

import ipywidgets as widgets
from IPython.display import Image, clear_output, display
from matplotlib.figure import Figure

__all__ = ["LiveWidget", "figure_png", "show_figure", "redraw", "LIVE_HINT"]

LIVE_HINT = (
    "Static snapshot of the widget's initial state. To use the controls, open this page live "
    "with the rocket (launch) button at the top (Binder, JupyterHub or Colab), or download it as a "
    "notebook, and run the cells."
)


def figure_png(fig: Figure, dpi: int = 80) -> bytes:
    """Render a figure to PNG bytes (a low dpi keeps the pages light)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    return buffer.getvalue()


def show_figure(output: widgets.Output, fig: Figure) -> None:
    """Replace what ``output`` shows with ``fig``."""
    with output:
        clear_output(wait=True)
        display(Image(data=figure_png(fig)))


def redraw(output: widgets.Output, message: widgets.HTML, draw: Callable[[], Figure]) -> Figure | None:
    """Show ``draw()``'s figure in ``output`` and return it; a ValueError (bad input) goes to
    ``message`` instead, and nothing is returned."""
    try:
        fig = draw()
    except ValueError as error:
        message.value = f"<span style='color:#b00'>{html.escape(str(error))}</span>"
        return None
    message.value = ""
    show_figure(output, fig)
    return fig


def _controls(widget: widgets.Widget) -> list[tuple[str, str]]:
    """(description, value) of every control inside ``widget``, depth first."""
    found = []
    if hasattr(widget, "value") and getattr(widget, "description", "") and not isinstance(widget, widgets.Output):
        found.append((widget.description, str(widget.value)))
    for child in getattr(widget, "children", ()):
        found.extend(_controls(child))
    return found


class LiveWidget:
    """An ipywidgets container that renders as a static HTML snapshot outside Jupyter.

    Args:
        widget: the live container (controls and an output area).
        snapshot: draws the figure of the initial state.
        title: a line shown above the snapshot.
    """

    def __init__(self, widget: widgets.Widget, snapshot: Callable[[], Figure], title: str) -> None:
        self.widget, self.snapshot, self.title = widget, snapshot, title

    def snapshot_html(self) -> str:
        rows = "".join(
            f"<tr><td>{html.escape(name)}</td><td><code>{html.escape(value)}</code></td></tr>"
            for name, value in _controls(self.widget)
        )
        image = base64.b64encode(figure_png(self.snapshot())).decode("ascii")
        return (
            f'<div class="widget-snapshot"><p><strong>{html.escape(self.title)}</strong></p>'
            f'<table class="widget-controls"><thead><tr><th>control</th><th>initial value</th></tr></thead>'
            f"<tbody>{rows}</tbody></table>"
            f'<img src="data:image/png;base64,{image}" alt="{html.escape(self.title)}: initial state" '
            f'style="max-width:100%"/><p><em>{html.escape(LIVE_HINT)}</em></p></div>'
        )

    def _repr_mimebundle_(self, **kwargs) -> dict:
        bundle = self.widget._repr_mimebundle_(**kwargs) or {}
        bundle = dict(bundle)
        bundle["text/html"] = self.snapshot_html()
        return bundle
