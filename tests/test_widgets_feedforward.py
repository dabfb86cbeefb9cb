import torch

from tfm_widgets.feedforward import ffn_explorer, ffn_figure, ffn_parameter_counts


def test_ffn_explorer_builds_and_its_snapshot_holds_a_figure():
    assert "data:image/png;base64," in ffn_explorer().snapshot_html()


def test_ffn_explorer_plots_the_plugged_in_activation():
    calls = []

    def my_activation(x):
        calls.append(x.shape)
        return torch.clamp(x, min=0)

    ffn_explorer(fn=my_activation)
    assert calls


def test_parameter_counts_match_the_formulas():
    d, f = 512, 2048
    counts = list(ffn_parameter_counts(d, f, bias=True).values())
    assert counts[0] == 2 * d * f + f + d  # W1, b1, W2, b2
    assert counts[1] == 3 * d * f + 2 * f + d  # gate, up, down (+ their biases)


def test_two_thirds_rule_gives_swiglu_about_the_cost_of_the_relu_ffn():
    relu, swiglu_full, swiglu_two_thirds = ffn_parameter_counts(4096, 16384, bias=False).values()
    assert swiglu_full == relu * 3 // 2
    assert abs(swiglu_two_thirds - relu) / relu < 1e-3


def test_ffn_figure_draws_one_curve_per_activation_and_three_bars():
    fig = ffn_figure(64, 256, fn=torch.tanh)
    curves, bars = fig.axes
    assert len([line for line in curves.lines if line.get_label() in ("your fn", "ReLU")]) == 2
    assert len(bars.patches) == 3
