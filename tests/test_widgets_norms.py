import numpy as np
import pytest
import torch

from tfm_widgets.norms import (
    AXES_SHAPE, NORM_KINDS, axes_figure, depth_explorer, depth_figure, gradient_norms_by_depth, group_statistics,
    norm_axes_explorer, norm_groups, reference_norm, static_norm_axes_explorer, train_deep_stack,
)


def test_norm_axes_explorer_builds_and_its_snapshot_holds_a_figure():
    assert "data:image/png;base64," in norm_axes_explorer().snapshot_html()


def test_norm_axes_explorer_shows_the_statistics_of_the_plugged_in_normalisation():
    not_normalising = norm_axes_explorer(fn=lambda x: x * 3 + 1).snapshot()
    normalising = norm_axes_explorer(fn=lambda x: torch.nn.functional.layer_norm(x, x.shape[-1:])).snapshot()
    def rms_markers(fig):
        return fig.axes[-1].lines[1].get_ydata()  # the "RMS of group" points of the statistics panel

    assert np.allclose(rms_markers(normalising), 1.0, atol=1e-3)
    assert not np.allclose(rms_markers(not_normalising), 1.0, atol=0.1)


def test_layernorm_groups_are_positions_and_batchnorm_groups_are_features():
    layer = norm_groups("LayerNorm", (2, 3, 4))
    batch = norm_groups("BatchNorm", (2, 3, 4))
    assert len(np.unique(layer)) == 2 * 3 and (layer == layer[..., :1]).all()  # constant along D
    assert len(np.unique(batch)) == 4 and (batch == batch[:1, :1]).all()  # constant along B and T


@pytest.mark.parametrize("kind", ["BatchNorm", "LayerNorm", "RMSNorm"])
def test_reference_norms_give_unit_rms_over_their_groups(kind):
    x = torch.randn(3, 5, 8, dtype=torch.float64) * 4 + 2
    stats = group_statistics(kind, reference_norm(kind)(x))
    np.testing.assert_allclose(stats["rms"], 1.0, atol=1e-3)
    if kind != "RMSNorm":
        np.testing.assert_allclose(stats["mean"], 0.0, atol=1e-6)


def test_unknown_norm_kind_is_a_value_error():
    with pytest.raises(ValueError, match="kind"):
        norm_groups("GroupNorm", (1, 2, 3))


def test_axes_figure_rejects_a_cell_outside_the_tensor():
    with pytest.raises(ValueError, match="outside"):
        axes_figure("LayerNorm", shape=(2, 2, 2), cell=(0, 5, 0))


def test_depth_explorer_uses_the_plugged_in_block():
    built = []

    def my_block(d_model, n_heads, d_ff, norm_first):
        built.append(norm_first)
        return torch.nn.Sequential(torch.nn.LayerNorm(d_model), torch.nn.Linear(d_model, d_model))

    html = depth_explorer(fn=my_block).snapshot_html()
    assert "data:image/png;base64," in html and set(built) == {False, True}


def test_gradient_reaches_every_layer_of_both_layouts():
    for norm_first in (False, True):
        norms = gradient_norms_by_depth(n_layers=4, d_model=32, norm_first=norm_first)
        assert norms.shape == (4,) and (norms > 0).all() and np.isfinite(norms).all()


@pytest.mark.slow
def test_pre_norm_stack_learns_the_reverse_task():
    losses = train_deep_stack(n_layers=2, d_model=32, norm_first=True, steps=150, lr=3e-3, progress=False)
    assert np.mean(losses[-10:]) < 0.5 * np.mean(losses[:10])


def test_depth_figure_draws_gradients_and_losses():
    fig = depth_figure({"a": np.ones(3)}, {"a": [3.0, 2.0, 1.0]})
    assert len(fig.axes) == 2 and fig.axes[0].lines and fig.axes[1].lines


def _groups_panel_key():
    return static_norm_axes_explorer().panels[0].key


def test_the_static_axis_picker_draws_each_highlighted_group_once():
    key = _groups_panel_key()
    # LayerNorm pools a token's features: every d of one (b, t) is the same picture; another t is not.
    assert key("LayerNorm", 0, 1, 0) == key("LayerNorm", 0, 1, 5) != key("LayerNorm", 0, 2, 0)
    # BatchNorm pools a feature over the batch and positions: every (b, t) of one d is the same picture.
    assert key("BatchNorm", 0, 0, 3) == key("BatchNorm", 2, 3, 3) != key("BatchNorm", 0, 0, 4)


def test_the_static_axis_picker_keys_agree_with_the_groups_they_draw():
    key = _groups_panel_key()
    for kind in NORM_KINDS:
        groups = norm_groups(kind, AXES_SHAPE)
        cells = list(np.ndindex(*AXES_SHAPE))
        for a in cells[::5]:
            for b in cells[::7]:
                same_picture = key(kind, *a) == key(kind, *b)
                assert same_picture == (groups[a] == groups[b]), (kind, a, b)
