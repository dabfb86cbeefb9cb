import ipywidgets as widgets
import pytest
from matplotlib.figure import Figure

from tfm_widgets.controls import figure_image, live_widget


def _figure(title: str) -> Figure:
    fig = Figure(figsize=(2, 2))
    fig.subplots().set_title(title)
    return fig


def test_figure_image_is_a_png():
    assert figure_image(_figure("x")).data[:8] == b"\x89PNG\r\n\x1a\n"


def test_live_widget_redraws_when_a_control_changes():
    slider = widgets.IntSlider(value=1)
    drawn = []

    def draw():
        drawn.append(slider.value)
        return _figure(str(slider.value))

    live_widget([[slider]], draw, "title")
    slider.value = 5
    assert drawn[0] == 1 and drawn[-1] == 5


def test_live_widget_shows_a_value_error_instead_of_raising():
    slider = widgets.IntSlider(value=1)

    def draw():
        if slider.value > 3:
            raise ValueError("too big")
        return _figure("ok")

    widget = live_widget([[slider]], draw, "title")
    slider.value = 4  # must not raise
    message = widget.widget.children[1]
    assert "too big" in message.value


def test_live_widget_snapshot_raises_for_a_broken_initial_state():
    with pytest.raises(ValueError):
        live_widget([[widgets.IntSlider()]], lambda: (_ for _ in ()).throw(ValueError("bad")), "t").snapshot_html()


def test_the_static_snapshot_reuses_the_first_figure_instead_of_drawing_again():
    drawn = []

    def draw():
        drawn.append(1)
        return _figure("initial")

    widget = live_widget([[widgets.IntSlider(value=1)]], draw, "title")
    assert "data:image/png;base64," in widget.snapshot_html()
    assert len(drawn) == 1


def test_a_draw_that_sets_a_control_starts_no_second_draw():
    options = widgets.Dropdown(options=["a"], value="a")
    drawn = []

    def draw():
        drawn.append(options.value)
        options.options, options.value = ["a", "b"], "b"  # e.g. refilled from what was computed
        return _figure(options.value)

    live_widget([[options]], draw, "title")
    assert drawn == ["a"]
