"""Chapter 9 checks beyond tests/test_exercises.py (where the notebook's own solutions pass under the guard,
its decoding step calling the given repeat_kv): the normaliser may not come from logsumexp, and the
decoding step may not hand the attention to tfm_ref.
"""
import pytest
import torch

import tfm_ref
from autograde.exercises import ch09_efficient as chapter


def test_online_softmax_may_not_take_its_normaliser_from_logsumexp():
    def online_softmax(x, block_size, dim=-1):
        return torch.exp(x - x.logsumexp(dim=dim, keepdim=True))

    report = chapter.ONLINE_SOFTMAX.run(online_softmax, seed=0)
    assert not report.passed
    assert "ForbiddenCall: your code called Tensor.logsumexp" in report.message


def test_cached_attention_may_not_hand_the_attention_to_tfm_ref():
    def cached_attention(q, k, v, k_cache, v_cache):
        k_cache, v_cache = torch.cat([k_cache, k], dim=-2), torch.cat([v_cache, v], dim=-2)  # (B, G, S + T, Dh)
        n_rep = q.shape[1] // k.shape[1]
        keys, values = tfm_ref.repeat_kv(k_cache, n_rep), tfm_ref.repeat_kv(v_cache, n_rep)  # (B, H, S + T, Dh)
        return tfm_ref.scaled_dot_product_attention(q, keys, values, is_causal=True), k_cache, v_cache

    report = chapter.CACHED_ATTENTION.run(cached_attention, seed=0)
    assert not report.passed
    assert "your code called tfm_ref.attention.scaled_dot_product_attention" in report.message
