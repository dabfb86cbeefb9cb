import pytest
import torch
from torch import nn

from tfm_ref import AttentionCache, MultiHeadAttention, causal_mask, from_torch, padding_mask, record_attention


def torch_mha(d=16, h=4, bias=True):
    return nn.MultiheadAttention(d, h, bias=bias, batch_first=True).eval()


@pytest.mark.parametrize("bias", [True, False])
def test_self_attention_equals_nn_multihead_attention(bias):
    ref = torch_mha(bias=bias)
    ours = from_torch(ref)
    x = torch.randn(3, 5, 16)
    torch.testing.assert_close(ours(x), ref(x, x, x, need_weights=False)[0])


def test_cross_attention_equals_nn_multihead_attention():
    ref = torch_mha()
    ours = from_torch(ref)
    x, memory = torch.randn(2, 4, 16), torch.randn(2, 9, 16)
    torch.testing.assert_close(ours(x, memory), ref(x, memory, memory, need_weights=False)[0])


def test_causal_and_key_padding_masks_match_pytorch_with_the_opposite_convention():
    ref = torch_mha()
    ours = from_torch(ref)
    x = torch.randn(2, 6, 16)
    causal = causal_mask(6)
    keep = padding_mask([6, 4], 6)
    expected = ref(x, x, x, attn_mask=~causal, key_padding_mask=~keep, need_weights=False)[0]
    got = ours(x, mask=causal & keep[:, None, None, :])
    torch.testing.assert_close(got[0], expected[0])
    torch.testing.assert_close(got[1], expected[1])


@pytest.mark.parametrize("impl", ["eager", "sdpa"])
def test_gqa_with_as_many_kv_heads_as_heads_is_mha(impl):
    mha = MultiHeadAttention(16, 4, attn_impl=impl)
    gqa = MultiHeadAttention(16, 4, n_kv_heads=4, attn_impl=impl)
    gqa.load_state_dict(mha.state_dict())
    x = torch.randn(2, 5, 16)
    torch.testing.assert_close(gqa(x), mha(x))


@pytest.mark.parametrize("n_kv_heads", [1, 2])
def test_gqa_equals_torch_sdpa_with_enable_gqa(n_kv_heads):
    attn = MultiHeadAttention(16, 4, n_kv_heads=n_kv_heads, attn_impl="eager")
    x = torch.randn(2, 5, 16)
    q = attn.q_proj(x).view(2, 5, 4, 4).transpose(1, 2)  # (B, H, T, Dh)
    k = attn.k_proj(x).view(2, 5, n_kv_heads, 4).transpose(1, 2)  # (B, G, S, Dh)
    v = attn.v_proj(x).view(2, 5, n_kv_heads, 4).transpose(1, 2)
    out = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    expected = attn.out_proj(out.transpose(1, 2).reshape(2, 5, 16))
    torch.testing.assert_close(attn(x, mask=causal_mask(5)), expected)


def test_gqa_and_mqa_have_fewer_key_value_parameters():
    sizes = {g: MultiHeadAttention(64, 8, n_kv_heads=g).k_proj.weight.numel() for g in (8, 2, 1)}
    assert sizes[8] == 4 * sizes[2] == 8 * sizes[1]


def test_eager_and_sdpa_multihead_paths_agree():
    eager = MultiHeadAttention(32, 4, n_kv_heads=2, attn_impl="eager")
    fast = MultiHeadAttention(32, 4, n_kv_heads=2, attn_impl="sdpa")
    fast.load_state_dict(eager.state_dict())
    x = torch.randn(2, 7, 32)
    mask = causal_mask(7) & padding_mask([7, 3], 7)[:, None, None, :]
    torch.testing.assert_close(fast(x, mask=mask), eager(x, mask=mask), atol=1e-5, rtol=1e-4)


def test_cached_self_attention_equals_full_causal_attention():
    attn = MultiHeadAttention(16, 4, n_kv_heads=2).eval()
    x = torch.randn(2, 6, 16)
    full = attn(x, mask=causal_mask(6))
    cache = AttentionCache()
    steps = [attn(x[:, t : t + 1], mask=causal_mask(1, t + 1), cache=cache) for t in range(6)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)


def test_record_attention_keeps_the_maps_and_then_stops():
    attn = MultiHeadAttention(16, 4)
    x = torch.randn(2, 5, 16)
    with record_attention(attn) as maps:
        attn(x)
    assert maps[""].shape == (2, 4, 5, 5)
    torch.testing.assert_close(maps[""].sum(-1), torch.ones(2, 4, 5))
    assert attn.record_weights is False and attn.last_weights is None


@pytest.mark.parametrize("kwargs, words", [
    (dict(d_model=30, n_heads=4), "d_model .30. is not divisible by n_heads .4."),
    (dict(d_model=32, n_heads=4, n_kv_heads=3), "n_heads .4. is not divisible by n_kv_heads .3."),
    (dict(d_model=32, n_heads=4, attn_impl="flash"), "attn_impl"),
    (dict(d_model=32, n_heads=4, dropout=1.5), "dropout"),
])
def test_bad_multihead_arguments_raise_a_named_error(kwargs, words):
    with pytest.raises(ValueError, match=words):
        MultiHeadAttention(**kwargs)


def test_wrong_input_width_raises_a_named_error():
    with pytest.raises(ValueError, match="last dimension 16"):
        MultiHeadAttention(16, 4)(torch.randn(2, 3, 8))
