import pytest
import torch
import torch.nn.functional as F

from tfm_ref import causal_mask, online_softmax, padding_mask, tiled_attention


def random_qkv(b=2, h=3, t=7, s=10, dk=8, dv=5, dtype=torch.float64):
    return (torch.randn(b, h, t, dk, dtype=dtype), torch.randn(b, h, s, dk, dtype=dtype),
            torch.randn(b, h, s, dv, dtype=dtype))


@pytest.mark.parametrize("block_size", [1, 3, 4, 10, 25])
def test_online_softmax_equals_torch_softmax_for_every_block_size_and_axis(block_size):
    x = 3 * torch.randn(4, 5, 10, dtype=torch.float64)
    for dim in (-1, 0, 1):
        torch.testing.assert_close(online_softmax(x, block_size, dim), torch.softmax(x, dim=dim))


def test_online_softmax_survives_huge_logits_whose_maximum_arrives_late():
    x = torch.tensor([[-1e4, 0.0, 1e4, 1e4 - 1.0]])  # the max rises block after block
    out = online_softmax(x, block_size=1)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, torch.softmax(x, dim=-1))


def test_online_softmax_of_an_all_minus_inf_row_is_zero_and_a_leading_minus_inf_block_is_harmless():
    x = torch.tensor([[float("-inf")] * 4, [float("-inf"), float("-inf"), 1.0, 2.0]])
    out = online_softmax(x, block_size=2)
    assert torch.equal(out[0], torch.zeros(4))
    torch.testing.assert_close(out[1], torch.softmax(x[1], dim=-1))


def test_online_softmax_gradient_equals_torch_softmax_gradient():
    x = torch.randn(3, 9, dtype=torch.float64, requires_grad=True)
    upstream = torch.randn(3, 9, dtype=torch.float64)
    (ours,) = torch.autograd.grad(online_softmax(x, 4), x, upstream)
    (torchs,) = torch.autograd.grad(torch.softmax(x, dim=-1), x, upstream)
    torch.testing.assert_close(ours, torchs)


@pytest.mark.parametrize(("q_tile", "k_tile"), [(1, 1), (2, 3), (3, 4), (7, 10), (64, 64)])
def test_tiled_attention_equals_torch_sdpa_for_any_tile_sizes(q_tile, k_tile):
    q, k, v = random_qkv()
    expected = F.scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(tiled_attention(q, k, v, q_tile=q_tile, k_tile=k_tile), expected)


@pytest.mark.parametrize(("q_tile", "k_tile"), [(1, 1), (2, 3), (4, 16)])
def test_tiled_attention_with_a_causal_and_padding_mask_equals_torch_sdpa(q_tile, k_tile):
    q, k, v = random_qkv(t=6, s=9)
    mask = causal_mask(6, 9) & padding_mask([9, 5], 9)[:, None, None, :]  # (B, 1, T, S), aligned to the end
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(tiled_attention(q, k, v, mask, q_tile=q_tile, k_tile=k_tile), expected)


def test_tiled_attention_gives_zeros_for_a_query_that_sees_no_key():
    q, k, v = random_qkv(t=3, s=5)
    mask = torch.ones(3, 5, dtype=torch.bool)
    mask[1] = False
    out = tiled_attention(q, k, v, mask, q_tile=2, k_tile=2)
    assert torch.equal(out[..., 1, :], torch.zeros_like(out[..., 1, :]))
    keep = torch.tensor([0, 2])
    expected = F.scaled_dot_product_attention(q[..., keep, :], k, v, attn_mask=mask[keep])
    torch.testing.assert_close(out[..., keep, :], expected)


def test_tiled_attention_gradients_equal_torch_sdpa_gradients():
    q, k, v = (t.requires_grad_() for t in random_qkv(t=5, s=6))
    mask = causal_mask(5, 6)
    upstream = torch.randn(2, 3, 5, 5, dtype=torch.float64)
    ours = torch.autograd.grad(tiled_attention(q, k, v, mask, q_tile=2, k_tile=4), (q, k, v), upstream)
    torchs = torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, attn_mask=mask), (q, k, v), upstream)
    for a, b in zip(ours, torchs):
        torch.testing.assert_close(a, b)


def test_tiled_attention_keeps_half_precision_inputs_in_their_dtype():
    q, k, v = random_qkv(dtype=torch.bfloat16)
    out = tiled_attention(q, k, v, q_tile=3, k_tile=4)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v), atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize(("call", "message"), [
    (lambda: online_softmax(torch.randn(4), 0), "block_size"),
    (lambda: tiled_attention(*random_qkv(), k_tile=0), "k_tile"),
    (lambda: tiled_attention(*random_qkv(), torch.ones(7, 10)), "boolean"),
    (lambda: tiled_attention(*random_qkv(), torch.ones(3, 10, dtype=torch.bool)), "broadcast"),
    (lambda: tiled_attention(torch.randn(4, 3), torch.randn(5, 2), torch.randn(5, 2)), "width"),
])
def test_bad_input_raises_a_named_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()
