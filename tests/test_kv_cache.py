import pytest
import torch
import torch.nn.functional as F

from tfm_ref import AttentionCache, cached_attention, kv_cache_bytes


def test_kv_cache_bytes_counts_k_and_v_for_every_layer_and_token():
    # one layer, one head of width 1, one token, fp16: a K and a V of 2 bytes each
    assert kv_cache_bytes(1, 1, 1, 1) == 4
    base = kv_cache_bytes(32, 32, 128, 4096, batch=1)
    assert kv_cache_bytes(64, 32, 128, 4096) == 2 * base
    assert kv_cache_bytes(32, 32, 128, 4096, batch=3) == 3 * base
    assert kv_cache_bytes(32, 32, 128, 4096, bytes_per_elem=4) == 2 * base


def test_gqa_and_mqa_shrink_the_cache_by_the_group_size():
    mha = kv_cache_bytes(32, 32, 128, 4096)
    assert kv_cache_bytes(32, 8, 128, 4096) * 4 == mha
    assert kv_cache_bytes(32, 1, 128, 4096) * 32 == mha


def test_kv_cache_bytes_matches_the_tensors_a_cache_holds():
    n_layers, g, dh, s, b = 3, 2, 8, 10, 4
    caches = [AttentionCache() for _ in range(n_layers)]
    for c in caches:
        for _ in range(s):
            c.append(torch.zeros(b, g, 1, dh, dtype=torch.float16), torch.zeros(b, g, 1, dh, dtype=torch.float16))
    held = sum(t.numel() * t.element_size() for c in caches for t in (c.k, c.v))
    assert held == kv_cache_bytes(n_layers, g, dh, s, batch=b)


def test_negative_sizes_raise_a_named_error():
    with pytest.raises(ValueError, match="seq_len"):
        kv_cache_bytes(1, 1, 1, -1)


def full_causal_attention(q, k, v):
    """PyTorch's causal attention over every position, K/V heads shared as repeat_interleave."""
    n_rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(n_rep, dim=1), v.repeat_interleave(n_rep, dim=1)  # (B, H, S, Dh)
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def gqa_qkv(b=2, h=4, g=2, n=6, dh=8):
    return (torch.randn(b, h, n, dh, dtype=torch.float64), torch.randn(b, g, n, dh, dtype=torch.float64),
            torch.randn(b, g, n, dh, dtype=torch.float64))


def test_decoding_token_by_token_from_an_empty_cache_equals_full_causal_attention():
    q, k, v = gqa_qkv()
    k_cache, v_cache = k[:, :, :0], v[:, :, :0]  # (B, G, 0, Dh): nothing decoded yet
    outs = []
    for t in range(q.shape[2]):
        out, k_cache, v_cache = cached_attention(q[:, :, t:t + 1], k[:, :, t:t + 1], v[:, :, t:t + 1], k_cache, v_cache)
        outs.append(out)
    torch.testing.assert_close(torch.cat(outs, dim=2), full_causal_attention(q, k, v))
    assert torch.equal(k_cache, k) and torch.equal(v_cache, v)


@pytest.mark.parametrize("n_kv_heads", [1, 2, 4])
def test_a_chunk_of_new_positions_sees_the_cache_and_its_own_prefix(n_kv_heads):
    q, k, v = gqa_qkv(g=n_kv_heads, n=7)
    out, k_cache, v_cache = cached_attention(q[:, :, 4:], k[:, :, 4:], v[:, :, 4:], k[:, :, :4], v[:, :, :4])
    torch.testing.assert_close(out, full_causal_attention(q, k, v)[:, :, 4:])
    assert torch.equal(k_cache, k) and torch.equal(v_cache, v)


@pytest.mark.parametrize(("shapes", "message"), [
    (dict(q=(1, 4, 1, 8), k=(1, 2, 1, 8), cache=(1, 2, 3, 4)), "k_cache"),
    (dict(q=(1, 4, 1, 8), k=(1, 2, 2, 8), cache=(1, 2, 3, 8)), "k and v"),
    (dict(q=(1, 4, 1, 8), k=(1, 3, 1, 8), cache=(1, 3, 3, 8)), "not divisible"),
    (dict(q=(4, 1, 8), k=(1, 2, 1, 8), cache=(1, 2, 3, 8)), "4-D"),
])
def test_cached_attention_rejects_shapes_that_do_not_fit(shapes, message):
    q, k, cache = (torch.randn(shapes[name]) for name in ("q", "k", "cache"))
    with pytest.raises(ValueError, match=message):
        cached_attention(q, k, k.clone(), cache, cache.clone())
