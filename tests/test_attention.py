import math

import pytest
import torch
import torch.nn.functional as F

from tfm_ref import causal_mask, padding_mask, scaled_dot_product_attention, sdpa_attention, softmax
from tfm_ref.attention import ATTENTION_IMPLEMENTATIONS

IMPLS = list(ATTENTION_IMPLEMENTATIONS.values())


def random_qkv(b=2, h=3, t=5, s=7, dk=8, dv=6, dtype=torch.float64):
    return (torch.randn(b, h, t, dk, dtype=dtype), torch.randn(b, h, s, dk, dtype=dtype),
            torch.randn(b, h, s, dv, dtype=dtype))


def test_softmax_equals_torch_softmax_on_every_axis():
    x = torch.randn(3, 4, 5, dtype=torch.float64)
    for dim in range(3):
        torch.testing.assert_close(softmax(x, dim=dim), torch.softmax(x, dim=dim))


def test_softmax_survives_huge_logits():
    x = torch.tensor([[1e4, 1e4 - 1.0, -1e4]])
    out = softmax(x)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, torch.softmax(x, dim=-1))


def test_softmax_of_an_all_masked_row_is_zero_not_nan():
    out = softmax(torch.full((2, 4), float("-inf")))
    assert torch.equal(out, torch.zeros(2, 4))


@pytest.mark.parametrize("attend", IMPLS)
def test_attention_equals_torch_sdpa(attend):
    q, k, v = random_qkv()
    torch.testing.assert_close(attend(q, k, v), F.scaled_dot_product_attention(q, k, v))


@pytest.mark.parametrize("attend", IMPLS)
def test_masked_attention_equals_torch_sdpa(attend):
    q, k, v = random_qkv(t=6, s=6)
    mask = causal_mask(6) & padding_mask([4, 6], 6)[:, None, None, :]
    torch.testing.assert_close(attend(q, k, v, mask), F.scaled_dot_product_attention(q, k, v, attn_mask=mask))


def test_attention_weights_rows_sum_to_one_and_follow_the_formula():
    q, k, v = random_qkv()
    out, weights = scaled_dot_product_attention(q, k, v, return_weights=True)
    torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1], dtype=weights.dtype))
    expected = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    torch.testing.assert_close(weights, expected)
    torch.testing.assert_close(out, weights @ v)


@pytest.mark.parametrize("attend", IMPLS)
def test_fully_masked_query_gets_zero_output_and_zero_weights(attend):
    q, k, v = random_qkv(t=3, s=4)
    mask = torch.ones(3, 4, dtype=torch.bool)
    mask[1] = False
    out = attend(q, k, v, mask)
    assert torch.isfinite(out).all()
    assert torch.equal(out[..., 1, :], torch.zeros_like(out[..., 1, :]))
    _, weights = attend(q, k, v, mask, return_weights=True)
    assert torch.equal(weights[..., 1, :], torch.zeros_like(weights[..., 1, :]))


@pytest.mark.parametrize("attend", IMPLS)
def test_fully_masked_query_has_finite_gradients(attend):
    q, k, v = (t.requires_grad_() for t in random_qkv(t=3, s=4))
    mask = torch.ones(3, 4, dtype=torch.bool)
    mask[0] = False
    attend(q, k, v, mask).sum().backward()
    assert all(torch.isfinite(t.grad).all() for t in (q, k, v))


@pytest.mark.parametrize("attend", IMPLS)
def test_padded_keys_never_change_the_output(attend):
    q, k, v = random_qkv(s=7)
    mask = padding_mask([4, 4], 7)[:, None, None, :]
    k2, v2 = k.clone(), v.clone()
    k2[..., 4:, :] = torch.randn_like(k2[..., 4:, :]) * 100
    v2[..., 4:, :] = torch.randn_like(v2[..., 4:, :]) * 100
    torch.testing.assert_close(attend(q, k, v, mask), attend(q, k2, v2, mask))


def test_causal_attention_ignores_future_tokens_checked_through_gradients():
    x = torch.randn(1, 1, 6, 8, dtype=torch.float64, requires_grad=True)
    out = scaled_dot_product_attention(x, x, x, causal_mask(6))
    out[0, 0, 2].sum().backward()
    assert torch.equal(x.grad[0, 0, 3:], torch.zeros_like(x.grad[0, 0, 3:]))
    assert x.grad[0, 0, :3].abs().sum() > 0


def test_eager_and_fast_paths_agree_in_float32_with_dropout_off():
    q, k, v = random_qkv(b=3, h=4, t=9, s=11, dk=16, dv=16, dtype=torch.float32)
    mask = torch.rand(3, 1, 9, 11) > 0.3
    torch.testing.assert_close(scaled_dot_product_attention(q, k, v, mask), sdpa_attention(q, k, v, mask),
                               atol=1e-5, rtol=1e-4)


def test_fast_path_returns_the_eager_weights_when_asked():
    q, k, v = random_qkv()
    _, fast_weights = sdpa_attention(q, k, v, return_weights=True)
    _, eager_weights = scaled_dot_product_attention(q, k, v, return_weights=True)
    torch.testing.assert_close(fast_weights, eager_weights)


def test_attention_works_without_head_or_batch_dimensions():
    q, k, v = torch.randn(4, 8), torch.randn(6, 8), torch.randn(6, 3)
    torch.testing.assert_close(scaled_dot_product_attention(q, k, v), F.scaled_dot_product_attention(q, k, v))


@pytest.mark.parametrize("attend", IMPLS)
@pytest.mark.parametrize("args, words", [
    ((torch.randn(2, 4), torch.randn(3, 5), torch.randn(3, 5)), "same width Dk"),
    ((torch.randn(2, 4), torch.randn(3, 4), torch.randn(2, 5)), "same number of positions"),
    ((torch.randn(2, 4), torch.randn(3, 4), torch.randn(3, 5), torch.ones(2, 3)), "boolean"),
    ((torch.randn(2, 4), torch.randn(3, 4), torch.randn(3, 5), torch.ones(4, 3, dtype=torch.bool)), "does not broadcast"),
])
def test_bad_attention_input_raises_a_named_error(attend, args, words):
    with pytest.raises(ValueError, match=words):
        attend(*args)


def test_float64_attention_keeps_float64_precision():
    q, k, v = random_qkv()
    torch.testing.assert_close(scaled_dot_product_attention(q, k, v), F.scaled_dot_product_attention(q, k, v),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("attend", IMPLS)
@pytest.mark.parametrize("t, s", [(6, 6), (2, 6)])
def test_is_causal_equals_passing_the_causal_mask(attend, t, s):
    q, k, v = random_qkv(t=t, s=s)
    keep = padding_mask([s, s - 1], s)[:, None, None, :]
    torch.testing.assert_close(attend(q, k, v, is_causal=True), attend(q, k, v, causal_mask(t, s)))
    torch.testing.assert_close(attend(q, k, v, keep, is_causal=True), attend(q, k, v, keep & causal_mask(t, s)))
