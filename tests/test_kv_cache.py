import pytest
import torch

from tfm_ref import AttentionCache, kv_cache_bytes


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
