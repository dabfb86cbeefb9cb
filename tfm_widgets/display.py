"""Show a widget live in Jupyter, and as an HTML snapshot of its initial state where no kernel runs.

The snapshot (title and first figure) names the widget's static version, if any, which the book's build puts
in its place. Figures are `matplotlib.figure.Figure` objects, never pyplot's: no GUI backend is needed.
"""
from __future__ import annotations

import base64
import html
import io
from collections.abc import Callable
from typing import TYPE_CHECKING

import ipywidgets as widgets
from IPython.display import Image, clear_output, display
from matplotlib.figure import Figure

if TYPE_CHECKING:
    from .static import StaticRecipe

__all__ = ["LiveWidget", "figure_png", "show_figure", "redraw", "LIVE_HINT", "FIGURE_WIDTH", "PAGE_DPI"]

# A figure FIGURE_WIDTH inches wide, drawn at PAGE_DPI (on the site and in Jupyter), fits the book's
# text column (about 630 px) without shrinking, so its 9-10 pt text shows at 12 px or more.
FIGURE_WIDTH = 6.3
PAGE_DPI = 100

LIVE_HINT = (
    "Snapshot of the widget's initial state. To use the controls, open this page live with the rocket "
    "(launch) button at the top (Binder, JupyterHub or Colab), or download it as a notebook, and run the cells."
)


def figure_png(fig: Figure, dpi: int = PAGE_DPI) -> bytes:
    """Render a figure to PNG bytes.

    A figure with a layout engine already fits its contents; cropping it ("tight") would draw it twice.
    """
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, bbox_inches=None if fig.get_layout_engine() else "tight")
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


class LiveWidget:
    """An ipywidgets container that renders as an HTML snapshot where no kernel runs.

    Args:
        widget: the live container (controls and an output area).
        snapshot: draws the figure of the initial state.
        title: a line shown above the snapshot.
        static: how the book's build makes the widget's static version; None when it has none
            (e.g. it runs a student's function, which the build does not have).
    """

    def __init__(self, widget: widgets.Widget, snapshot: Callable[[], Figure], title: str,
                 static: StaticRecipe | None = None) -> None:
        self.widget, self.snapshot, self.title, self.static = widget, snapshot, title, static

    def snapshot_html(self) -> str:
        image = base64.b64encode(figure_png(self.snapshot())).decode("ascii")
        recipe = f" {self.static.html_attribute()}" if self.static is not None else ""
        return (
            f'<div class="widget-snapshot"{recipe}><p><strong>{html.escape(self.title)}</strong></p>'
            f'<img src="data:image/png;base64,{image}" alt="{html.escape(self.title)}: initial state" '
            f'style="max-width:100%"/><p><em>{html.escape(LIVE_HINT)}</em></p></div>'
        )

    def _repr_mimebundle_(self, **kwargs) -> dict:
        bundle = self.widget._repr_mimebundle_(**kwargs) or {}
        bundle = dict(bundle)
        bundle["text/html"] = self.snapshot_html()
        return bundle
