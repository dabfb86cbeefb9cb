import pytest
import torch

from tfm_ref import sinusoidal_positional_encoding
from tfm_widgets.positional import explorer_anchors, offset_dot_products, pe_explorer, pe_figure, pe_table


def test_pe_explorer_builds_and_its_snapshot_holds_a_figure():
    html = pe_explorer().snapshot_html()
    assert "data:image/png;base64," in html and "d_model" in html


def test_pe_explorer_draws_with_the_plugged_in_function():
    calls = []

    def my_pe(n_positions, d_model):
        calls.append((n_positions, d_model))
        return sinusoidal_positional_encoding(n_positions, d_model)

    pe_explorer(fn=my_pe, n_positions=40, d_model=8)
    assert (40, 8) in calls


def test_pe_table_rejects_a_function_of_the_wrong_shape():
    with pytest.raises(ValueError, match="n_positions, d_model"):
        pe_table(10, 4, fn=lambda n, d: torch.zeros(n, d + 1))


def test_dot_product_against_offset_is_the_same_for_every_anchor():
    table = pe_table(120, 32)
    torch.testing.assert_close(offset_dot_products(table, 0, 40), offset_dot_products(table, 50, 40))


def test_dot_product_at_offset_zero_is_one_after_normalising():
    assert offset_dot_products(pe_table(20, 16), 3, 5)[0].item() == pytest.approx(1.0)


def test_pe_figure_has_a_heatmap_and_a_curve_per_anchor():
    fig = pe_figure(pe_table(60, 16), anchors=(0, 5, 9), max_offset=20)
    heat, curve = fig.axes[0], fig.axes[1]  # the colour bar comes last
    assert heat.images and len(curve.lines) == 3


def test_explorer_anchors_keep_the_chosen_anchor_in_the_first_half_and_never_repeat_one():
    assert explorer_anchors(10, 100) == (10, 0, 25)
    assert explorer_anchors(90, 100) == (50, 0, 25)
    assert explorer_anchors(0, 100) == (0, 25)


def test_the_coinciding_curves_each_show_on_offsets_of_their_own():
    # The anchors' curves are the same curve: each must still be visible, by a style of its own and its marks
    # on offsets no other curve marks.
    fig = pe_figure(pe_table(100, 64), anchors=(10, 0, 25), max_offset=50)
    (curves,) = [ax for ax in fig.axes if ax.get_lines()]
    lines = curves.get_lines()
    assert len({(line.get_linestyle(), line.get_marker()) for line in lines}) == len(lines) == 3
    marked = [set(line.get_xdata()[line.get_markevery()[0]::line.get_markevery()[1]])
              for line in lines if line.get_linestyle() == "None"]
    assert len(marked) == 2 and all(marked) and not marked[0] & marked[1]
