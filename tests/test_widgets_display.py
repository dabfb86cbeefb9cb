"""tfm_widgets/display.py: a widget shows live in Jupyter and as an HTML snapshot elsewhere."""
from __future__ import annotations

import base64
import html
import re

import ipywidgets as widgets
from matplotlib.figure import Figure

from tfm_widgets.display import LIVE_HINT, LiveWidget, figure_png
from tfm_widgets.static import StaticRecipe, StaticWidget


def _figure(layout: str | None = None) -> Figure:
    fig = Figure(figsize=(2, 1), layout=layout)
    fig.subplots().plot([0, 1], [1, 0])
    return fig


def _static_demo() -> StaticWidget:
    raise AssertionError("a snapshot only names its static version, it does not build it")


def test_figure_png_is_a_png():
    assert figure_png(_figure()).startswith(b"\x89PNG")


def test_a_figure_with_a_layout_engine_keeps_its_size_and_one_without_is_cropped():
    def width(png: bytes) -> int:
        return int.from_bytes(png[16:20], "big")  # the IHDR chunk's width

    assert width(figure_png(_figure("constrained"), dpi=100)) == 200
    assert width(figure_png(_figure(), dpi=100)) < 200


def test_bundle_has_the_live_view_and_a_snapshot_with_title_figure_and_hint():
    live = LiveWidget(widgets.VBox([widgets.IntSlider(value=7, description="heads"), widgets.Output()]), _figure,
                      "demo")
    bundle = live._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    snapshot = bundle["text/html"]
    assert "<strong>demo</strong>" in snapshot
    png = re.search(r'src="data:image/png;base64,([^"]+)"', snapshot).group(1)
    assert base64.b64decode(png).startswith(b"\x89PNG")
    assert html.escape(LIVE_HINT) in snapshot
    assert StaticRecipe.find_in(snapshot) is None


def test_the_snapshot_names_the_static_version_it_is_given():
    recipe = StaticRecipe.of(_static_demo, size=3)
    live = LiveWidget(widgets.VBox([widgets.Output()]), _figure, "demo", static=recipe)
    assert StaticRecipe.find_in(live.snapshot_html()) == recipe
