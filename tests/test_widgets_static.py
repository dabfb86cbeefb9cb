"""tfm_widgets/static.py: a widget's static version — its states drawn ahead, keyed by the controls —
and the static versions of the book's widgets: where they start, and that their figures are readable."""
from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest
from matplotlib.figure import Figure
from matplotlib.text import Text

from tfm_ref import scaled_dot_product_attention
from tfm_widgets import (alignment, attention, decoder_stepper, efficiency, feedforward, heads, masks, norms,
                             positional)
from tfm_widgets.display import FIGURE_WIDTH, PAGE_DPI
from tfm_widgets.static import (STATIC_HINT, Control, Panel, StaticRecipe, StaticWidget,
                                    cached_render, code_fingerprint, render, static_html)


# 9 pt at the site's 100 dpi is 12.5 px: readable even when a phone shrinks the figure a little.
SMALLEST_TEXT_PT = 9


def _figure(title: str) -> Figure:
    fig = Figure(figsize=(2, 1), layout="constrained")
    fig.subplots().set_title(title)
    return fig


drawn: list[dict] = []


def _draw(**values) -> Figure:
    drawn.append(values)
    if values.get("size") == 3 and values.get("odd"):
        raise ValueError("3 is odd already")
    return _figure(repr(sorted(values.items())))


def toy_widget(note: str = "") -> StaticWidget:
    """Two panels: one depends on both controls (one combination refused), one on the size only."""
    return StaticWidget(
        "toy",
        controls=(Control("size", "size", (1, 2, 3), 2), Control("odd", "odd only", (False, True), False)),
        panels=(Panel(_draw, ("size", "odd"), alt="both"), Panel(_draw, ("size",), alt="size")),
        note=note)


def test_every_combination_of_a_panels_controls_gets_a_file_or_its_error(tmp_path):
    manifest = render(toy_widget(), tmp_path)
    both, size_only = manifest["panels"]
    assert set(both["states"]) == {f"{i}-{j}" for i in range(3) for j in range(2)}
    assert both["states"]["2-1"] == {"error": "3 is odd already"}
    assert set(size_only["states"]) == {"0", "1", "2"}
    files = [state for panel in manifest["panels"] for state in panel["states"].values() if isinstance(state, str)]
    assert len(set(files)) == len(files) == 5 + 3
    assert all((tmp_path / name).read_bytes().startswith(b"\x89PNG") for name in files)
    assert json.loads((tmp_path / "manifest.json").read_text()) == manifest


def test_a_refused_combination_s_message_speaks_the_editions_language_and_is_listed_for_the_translators(
        tmp_path, monkeypatch):
    from tfm_widgets import figure_text

    class Chinese:
        def gettext(self, message: str) -> str:
            return {"{0} is odd already": "{0} 已经是奇数了"}.get(message, message)

    monkeypatch.setattr(figure_text, "_catalogue", Chinese())
    manifest = render(toy_widget(), tmp_path)
    assert manifest["panels"][0]["states"]["2-1"] == {"error": "3 已经是奇数了"}
    assert "{0} is odd already" in manifest["texts"]


def test_the_manifest_describes_each_control_and_its_initial_value(tmp_path):
    controls = render(toy_widget(), tmp_path)["controls"]
    assert controls == [{"label": "size", "kind": "range", "labels": ["1", "2", "3"], "initial": 1},
                        {"label": "odd only", "kind": "checkbox", "labels": ["False", "True"], "initial": 0}]


def test_combinations_with_the_same_key_are_drawn_once(tmp_path):
    drawn.clear()
    widget = StaticWidget("keyed", controls=(Control("n", "n", (1, 2, 3, 4), 1),),
                          panels=(Panel(_draw, ("n",), key=lambda n: n % 2),))
    states = render(widget, tmp_path)["panels"][0]["states"]
    assert len(drawn) == 2
    assert states["0"] == states["2"] != states["1"] == states["3"]


def test_a_panel_that_cannot_draw_the_initial_state_is_a_value_error(tmp_path):
    widget = StaticWidget("broken", controls=(Control("size", "size", (3,), 3), Control("odd", "odd", (False, True), True)),
                          panels=(Panel(_draw, ("size", "odd")),))
    with pytest.raises(ValueError, match="initial state: 3 is odd"):
        render(widget, tmp_path)


@pytest.mark.parametrize("values, kind", [((4,), "fixed"), ((False, True), "checkbox"), ((1, 2, 4), "range"),
                                          ((1, 2), "select"), (("a", "b", "c"), "select")])
def test_the_kind_of_control_follows_its_values(values, kind):
    assert Control("c", "c", values, values[0]).kind == kind


@pytest.mark.parametrize("arguments, message", [
    (((), None), "no values"),
    (((1, 1), 1), "twice"),
    (((1, 2), 3), "not one of"),
    (((True, False), True), "exactly"),
])
def test_a_control_rejects_values_it_cannot_offer(arguments, message):
    values, initial = arguments
    with pytest.raises(ValueError, match=message):
        Control("c", "c", values, initial)


def test_a_control_rejects_labels_that_do_not_match_its_values():
    with pytest.raises(ValueError, match="labels"):
        Control("c", "c", (1, 2), 1, labels=("one",))


def test_a_widget_rejects_a_panel_on_an_unknown_control_and_duplicate_names():
    size = Control("size", "size", (1, 2), 1)
    with pytest.raises(ValueError, match="unknown controls"):
        StaticWidget("w", (size,), (Panel(_draw, ("colour",)),))
    with pytest.raises(ValueError, match="share a name"):
        StaticWidget("w", (size, size), (Panel(_draw, ("size",)),))
    with pytest.raises(ValueError, match="at least one panel"):
        StaticWidget("w", (size,), ())


def test_a_recipe_travels_in_html_and_builds_its_widget():
    recipe = StaticRecipe.of(toy_widget, note='a "quoted" <note>')
    text = f"<div {recipe.html_attribute()}>snapshot</div>"
    found = StaticRecipe.find_in(text)
    assert found == recipe and found.factory == f"{__name__}:toy_widget"
    assert StaticRecipe.find_in("<div>no recipe</div>") is None


def test_a_recipe_builds_only_widgets_of_tfm_ref():
    with pytest.raises(ValueError, match="tfm_widgets"):
        StaticRecipe.of(toy_widget).build()  # this test module is not part of tfm_widgets
    with pytest.raises(ValueError, match="JSON"):
        StaticRecipe.of(toy_widget, note=object())


def test_cached_render_draws_once_per_recipe_and_fingerprint(tmp_path, monkeypatch):
    monkeypatch.setattr(StaticRecipe, "build", lambda self: toy_widget(**self.kwargs))
    drawn.clear()
    recipe = StaticRecipe.of(toy_widget)
    name, manifest = cached_render(recipe, tmp_path, "code v1")
    count = len(drawn)
    assert cached_render(recipe, tmp_path, "code v1") == (name, manifest)
    assert len(drawn) == count  # the second call read the folder
    assert cached_render(recipe, tmp_path, "code v2")[0] != name
    assert cached_render(StaticRecipe.of(toy_widget, note="other"), tmp_path, "code v1")[0] != name
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no half-written folder


def test_code_fingerprint_is_a_stable_hash():
    assert code_fingerprint() == code_fingerprint()
    assert re.fullmatch(r"[0-9a-f]{64}", code_fingerprint())


def test_static_html_shows_the_controls_at_their_initial_values_and_the_initial_figures(tmp_path):
    manifest = render(toy_widget(note="a <note>"), tmp_path)
    page = static_html(manifest, "../_widgets/abc/")
    initial_files = [manifest["panels"][0]["states"]["1-0"], manifest["panels"][1]["states"]["1"]]
    assert re.findall(r'<img src="([^"]+)"', page) == [f"../_widgets/abc/{name}" for name in initial_files]
    assert '<input type="range" min="0" max="2" step="1" value="1" data-control="0"/> <output>2</output>' in page
    assert '<input type="checkbox" data-control="1"/>' in page
    assert html.escape("a <note>") in page and html.escape(STATIC_HINT) in page
    table = json.loads(re.search(r'<script type="application/json" class="tfm-widget-states">(.*?)</script>',
                                 page, re.S).group(1))
    assert table["initial"] == [1, 0] and table["panels"][0]["states"]["2-1"] == {"error": "3 is odd already"}


def test_static_html_keeps_the_states_table_inside_its_script(tmp_path):
    widget = StaticWidget("w", (Control("tag", "tag", ("</script>", "b"), "b"),), (Panel(_draw, ("tag",)),))
    page = static_html(render(widget, tmp_path), "")
    assert page.count("</script>") == 1 and "<\\/script>" in page


def test_static_figures_are_drawn_at_the_dpi_the_page_expects(tmp_path):
    manifest = render(toy_widget(), tmp_path)
    png = (tmp_path / manifest["panels"][1]["states"]["0"]).read_bytes()
    assert int.from_bytes(png[16:20], "big") == 2 * PAGE_DPI  # the 2-inch toy figure


# The book's widgets as its pages call them (chapter 9 passes the recorded benchmark).
def _recorded_benchmark() -> dict:
    import tfm_lab
    from tfm_widgets.efficiency import recorded_benchmarks

    return recorded_benchmarks(Path(tfm_lab.__file__).parent / "results")["h100_bench.json"]


BOOK_WIDGETS = {
    "attention": lambda: attention.attention_explorer(),
    "heads": lambda: heads.heads_explorer(),
    "masks": lambda: masks.mask_builder(),
    "alignment": lambda: alignment.alignment_view(),
    "positional": lambda: positional.pe_explorer(),
    "feedforward": lambda: feedforward.ffn_explorer(),
    "norm axes": lambda: norms.norm_axes_explorer(),
    "depth": lambda: norms.depth_explorer(),
    "decoder": lambda: decoder_stepper.decoder_stepper(),
    "efficiency": lambda: efficiency.attention_cost_explorer(data=_recorded_benchmark()),
}
# Controls only the static version has: chapter 9's choice between the recording and a measurement.
STATIC_ONLY = {"efficiency": {"data"}}


def _live_values(widget) -> dict[str, object]:
    """{description: value} of every control inside an ipywidgets container."""
    found = {}
    if getattr(widget, "description", "") and hasattr(widget, "value"):
        found[widget.description] = widget.value
    for child in getattr(widget, "children", ()):
        found.update(_live_values(child))
    return found


@pytest.fixture(scope="module", params=sorted(BOOK_WIDGETS))
def book_widget(request):
    live = BOOK_WIDGETS[request.param]()
    return request.param, live, live.static.build()


def test_the_static_version_starts_where_the_live_widget_starts(book_widget):
    name, live, static = book_widget
    values = _live_values(live.widget)
    assert {c.label for c in static.controls} - set(values) == STATIC_ONLY.get(name, set())
    for control in static.controls:
        if control.label in values:
            assert values[control.label] == control.initial, f"{name}: {control.label}"


def test_the_initial_figures_fit_the_page_with_readable_text(book_widget):
    name, _, static = book_widget
    for panel in static.panels:
        fig = panel.draw(**{c.name: c.initial for c in static.controls if c.name in panel.controls})
        fig.canvas.draw()
        assert fig.get_figwidth() <= FIGURE_WIDTH + 1e-9, f"{name}: {panel.alt}"
        sizes = {t.get_text(): t.get_fontsize() for t in fig.findobj(Text) if t.get_visible() and t.get_text()}
        small = {text: size for text, size in sizes.items() if size < SMALLEST_TEXT_PT}
        assert sizes and not small, f"{name}: text below {SMALLEST_TEXT_PT} pt: {small}"


def test_a_widget_running_a_students_function_has_no_static_version():
    assert attention.attention_explorer(fn=scaled_dot_product_attention).static is None
