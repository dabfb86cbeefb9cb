import pytest
import torch
from torch import nn

from tfm_ref import LayerNorm, RMSNorm, layer_norm, rms_norm


def test_layer_norm_equals_nn_layer_norm_with_trained_parameters():
    ref = nn.LayerNorm(16, eps=1e-5)
    nn.init.normal_(ref.weight), nn.init.normal_(ref.bias)
    ours = LayerNorm(16)
    ours.load_state_dict(ref.state_dict())
    x = torch.randn(3, 7, 16) * 5 + 2
    torch.testing.assert_close(ours(x), ref(x))
    torch.testing.assert_close(layer_norm(x, None, None), nn.functional.layer_norm(x, (16,)))


def test_rms_norm_equals_nn_rms_norm():
    ref = nn.RMSNorm(16, eps=1e-6)
    nn.init.normal_(ref.weight)
    ours = RMSNorm(16)
    ours.load_state_dict(ref.state_dict())
    x = torch.randn(3, 7, 16) * 5 + 2
    torch.testing.assert_close(ours(x), ref(x))
    torch.testing.assert_close(rms_norm(x, None, 1e-6), nn.functional.rms_norm(x, (16,), eps=1e-6))


def test_norms_compute_in_float32_and_return_the_input_dtype():
    x = (torch.randn(4, 64) * 300).to(torch.bfloat16)
    out = LayerNorm(64)(x)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), nn.functional.layer_norm(x.float(), (64,)), atol=2e-2, rtol=2e-2)


def test_layer_norm_normalises_each_position_on_its_own():
    x = torch.randn(2, 5, 8)
    y = layer_norm(x, None, None)
    torch.testing.assert_close(y.mean(-1), torch.zeros(2, 5), atol=1e-6, rtol=0)
    torch.testing.assert_close(y.var(-1, unbiased=False), torch.ones(2, 5), atol=1e-4, rtol=0)
    x2 = x.clone()
    x2[1] += 100
    torch.testing.assert_close(layer_norm(x2, None, None)[0], y[0])


@pytest.mark.parametrize("call, words", [
    (lambda: LayerNorm(8)(torch.randn(2, 4)), "last dimension 8"),
    (lambda: RMSNorm(0), "d must be positive"),
])
def test_bad_norm_arguments_raise_a_named_error(call, words):
    with pytest.raises(ValueError, match=words):
        call()


def test_float64_inputs_keep_float64_precision():
    x = torch.randn(4, 16, dtype=torch.float64) * 3
    torch.testing.assert_close(layer_norm(x, None, None), nn.functional.layer_norm(x, (16,)), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(rms_norm(x, None, 1e-6), nn.functional.rms_norm(x, (16,), eps=1e-6), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fused_modules_equal_the_readable_functions(dtype):
    x = (torch.randn(3, 5, 32) * 4 + 1).to(dtype)
    ln, rms = LayerNorm(32), RMSNorm(32)
    with torch.no_grad():
        for p in (ln.weight, ln.bias, rms.weight):
            p.normal_()
    tol = dict(atol=1e-5, rtol=1e-5) if dtype == torch.float32 else dict(atol=3e-2, rtol=3e-2)
    torch.testing.assert_close(ln(x), layer_norm(x, ln.weight, ln.bias, ln.eps), **tol)
    torch.testing.assert_close(rms(x), rms_norm(x, rms.weight, rms.eps), **tol)
