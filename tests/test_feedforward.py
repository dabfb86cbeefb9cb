import pytest
import torch
import torch.nn.functional as F

from tfm_ref import FeedForward, SwiGLU, swiglu_hidden_size


@pytest.mark.parametrize("activation, fn", [("relu", F.relu), ("gelu", F.gelu)])
def test_feedforward_is_two_linear_maps_around_the_activation(activation, fn):
    ffn = FeedForward(8, 32, activation=activation)
    x = torch.randn(2, 5, 8)
    expected = F.linear(fn(F.linear(x, ffn.up_proj.weight, ffn.up_proj.bias)), ffn.down_proj.weight, ffn.down_proj.bias)
    torch.testing.assert_close(ffn(x), expected)


def test_feedforward_treats_each_position_alone():
    ffn = FeedForward(8, 32)
    x = torch.randn(1, 6, 8)
    torch.testing.assert_close(ffn(x)[:, 2], ffn(x[:, 2:3])[:, 0])


def test_swiglu_gates_with_silu():
    ffn = SwiGLU(8, 12)
    x = torch.randn(3, 8)
    expected = ffn.down_proj(F.silu(ffn.gate_proj(x)) * ffn.up_proj(x))
    torch.testing.assert_close(ffn(x), expected)


def test_two_thirds_rule_keeps_the_parameter_count_of_a_relu_ffn():
    d_model, d_ff = 512, 2048
    relu = FeedForward(d_model, d_ff, bias=False)
    swiglu = SwiGLU(d_model, swiglu_hidden_size(d_ff, multiple_of=1))
    n_relu = sum(p.numel() for p in relu.parameters())
    n_swiglu = sum(p.numel() for p in swiglu.parameters())
    assert abs(n_swiglu - n_relu) <= 3 * d_model  # equal up to rounding ⅔·d_ff to an integer
    assert swiglu_hidden_size(2048, multiple_of=256) % 256 == 0


def test_unknown_activation_raises_a_named_error():
    with pytest.raises(ValueError, match="activation must be one of"):
        FeedForward(8, 16, activation="tanh")
