"""tfm_ref/widgets/display.py: a widget shows live in Jupyter and as a static snapshot on the site."""
from __future__ import annotations

import base64
import html
import re

import ipywidgets as widgets
from matplotlib.figure import Figure

from tfm_ref.widgets.display import LIVE_HINT, LiveWidget, figure_png


def _figure() -> Figure:
    fig = Figure(figsize=(2, 1))
    fig.subplots().plot([0, 1], [1, 0])
    return fig


def test_figure_png_is_a_png():
    assert figure_png(_figure()).startswith(b"\x89PNG")


def test_bundle_has_the_live_view_and_a_snapshot_with_controls_figure_and_hint():
    slider = widgets.IntSlider(value=7, description="heads")
    live = LiveWidget(widgets.VBox([slider, widgets.Output()]), _figure, "demo")
    bundle = live._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    snapshot = bundle["text/html"]
    assert "<td>heads</td><td><code>7</code></td>" in snapshot
    png = re.search(r'src="data:image/png;base64,([^"]+)"', snapshot).group(1)
    assert base64.b64decode(png).startswith(b"\x89PNG")
    assert html.escape(LIVE_HINT) in snapshot
