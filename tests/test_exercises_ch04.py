"""Chapter 4 checks beyond tests/test_exercises.py: the given helpers may be used, and the hidden
checks build the layer without biases.
"""

from exercise_proofs import assert_named, assert_named_in_both_languages
from student_layers import StudentAttentionLayer

import tfm_ref
from autograde.exercises import ch04_cross_attention as chapter


def test_the_given_chapter_1_attention_may_be_used():
    def cross_attention(x, memory, w_q, w_k, w_v, src_mask=None):
        mask = None if src_mask is None else src_mask[:, None, :]  # (B, 1, S)
        return tfm_ref.scaled_dot_product_attention(x @ w_q, memory @ w_k, memory @ w_v, mask, return_weights=True)

    report = chapter.CROSS_ATTENTION.run(cross_attention, hidden=True, seed=0)
    assert report.passed, report.message


def test_the_given_chapter_3_masks_may_be_used_and_a_look_ahead_built_with_them_is_named():
    def cross_attention(x, memory, w_q, w_k, w_v, src_mask=None):
        n_src = memory.shape[1]
        real = tfm_ref.padding_mask([n_src] * x.shape[0], n_src) if src_mask is None else src_mask
        return tfm_ref.scaled_dot_product_attention(x @ w_q, memory @ w_k, memory @ w_v, real[:, None, :],
                                                    return_weights=True)

    assert chapter.CROSS_ATTENTION.run(cross_attention, hidden=True, seed=0).passed

    def with_look_ahead(x, memory, w_q, w_k, w_v, src_mask=None):
        look_ahead = tfm_ref.causal_mask(x.shape[1])  # (T, T), where the scores are (B, T, S)
        mask = look_ahead if src_mask is None else src_mask[:, None, :] & look_ahead
        return tfm_ref.scaled_dot_product_attention(x @ w_q, memory @ w_k, memory @ w_v, mask, return_weights=True)

    report = chapter.CROSS_ATTENTION.run(with_look_ahead, hidden=True, seed=0)
    assert not report.delegated and report.mistake == "causal mask on cross-attention, T × T"


def test_multi_head_cross_attention_built_with_biases_whatever_it_is_asked_fails_the_hidden_checks():
    class WithBiases(tfm_ref.MultiHeadAttention):
        def __init__(self, d_model, n_heads, n_kv_heads=None, bias=True, dropout=0.0):
            super().__init__(d_model, n_heads, n_kv_heads, True, dropout)

    assert chapter.CROSS_MULTIHEAD.run(WithBiases, seed=0).passed
    report = chapter.CROSS_MULTIHEAD.run(WithBiases, hidden=True, seed=0)
    assert not report.passed and "built with bias=False" in report.message


def _masks_cross_also_causal(src_lengths, src_len, tgt_len):
    batch = len(src_lengths)
    pad = tfm_ref.padding_mask(src_lengths, src_len)[:, None, None, :]
    self_mask = tfm_ref.causal_mask(tgt_len).expand(batch, 1, tgt_len, tgt_len)
    return self_mask, pad & tfm_ref.causal_mask(tgt_len, src_len)


def _masks_roles_swapped(src_lengths, src_len, tgt_len):
    batch = len(src_lengths)
    self_mask = tfm_ref.padding_mask(src_lengths, tgt_len)[:, None, None, :].expand(batch, 1, tgt_len, tgt_len)
    return self_mask, tfm_ref.causal_mask(tgt_len, src_len).expand(batch, 1, tgt_len, src_len)


def test_a_look_ahead_on_the_cross_mask_fails_the_visible_check_on_every_seed():
    """With short sources alone the look-ahead often blocked only padding (18 % of draws passed): seeds 10, 15, 22
    and 28 did."""
    assert_named(chapter.ENCODER_DECODER_MASKS, _masks_cross_also_causal,
                 "causal mask on cross-attention, aligned to the end", (*range(30), 46, 53, 59, 86))


def test_self_and_cross_masks_with_their_roles_swapped_are_named_where_both_differ():
    """Shrunk to T = 1 the self masks agree, and the failure read "the cross_mask differs" with no hint."""
    for seed in range(10):
        report = chapter.ENCODER_DECODER_MASKS.run(_masks_roles_swapped, seed=seed)
        assert report.mistake == "roles swapped: padding on self_mask, look-ahead on cross_mask", report.message
        assert "the self_mask differs" in report.message and "the cross_mask differs too" in report.message
        assert "tgt_len = 1\n" not in report.message


def _cross_attention(values_with=lambda w_k, w_v: w_v):
    def cross_attention(x, memory, w_q, w_k, w_v, src_mask=None):
        mask = None if src_mask is None else src_mask[:, None, :]  # (B, 1, S)
        return tfm_ref.scaled_dot_product_attention(x @ w_q, memory @ w_k, memory @ values_with(w_k, w_v), mask,
                                                    return_weights=True)
    return cross_attention


def _cross_layer(values_from_context=True):
    class MultiHeadAttention(StudentAttentionLayer):
        def forward(self, x, context=None, mask=None):
            source = x if context is None else context
            q = tfm_ref.split_heads(self.q_proj(x), self.n_heads)  # (B, H, T, Dh)
            k = tfm_ref.split_heads(self.k_proj(source), self.n_kv_heads)  # (B, G, S, Dh)
            v = tfm_ref.split_heads(self.v_proj(source if values_from_context else x), self.n_kv_heads)
            n_rep = self.n_heads // self.n_kv_heads
            k, v = tfm_ref.repeat_kv(k, n_rep), tfm_ref.repeat_kv(v, n_rep)  # (B, H, S, Dh)
            out = tfm_ref.scaled_dot_product_attention(q, k, v, mask)
            return self.out_proj(tfm_ref.merge_heads(out))  # (B, T, D)
    return MultiHeadAttention


def _masks(pad_self=False):
    def encoder_decoder_masks(src_lengths, src_len, tgt_len):
        batch = len(src_lengths)
        self_mask = tfm_ref.causal_mask(tgt_len).expand(batch, 1, tgt_len, tgt_len)
        if pad_self:  # the source's lengths, over the target positions
            self_mask = self_mask & tfm_ref.padding_mask(src_lengths, tgt_len)[:, None, None, :]
        cross_mask = tfm_ref.padding_mask(src_lengths, src_len)[:, None, None, :].expand(batch, 1, tgt_len, src_len)
        return self_mask, cross_mask
    return encoder_decoder_masks


def test_values_projected_or_taken_wrong_and_source_padding_on_the_self_mask_are_named_in_english_and_chinese():
    """A student audit found these failing with only a shape, a raw ValueError or "the self_mask differs"."""
    for exercise, right, wrong, mistake in (
            (chapter.CROSS_ATTENTION, _cross_attention(), _cross_attention(lambda w_k, w_v: w_k),
             "values projected with w_k"),
            (chapter.CROSS_MULTIHEAD, _cross_layer(), _cross_layer(values_from_context=False),
             "values taken from x, keys from the context"),
            (chapter.ENCODER_DECODER_MASKS, _masks(), _masks(pad_self=True),
             "source padding applied to the self-attention too")):
        assert exercise.run(right, hidden=True, seed=0).passed, exercise.key
        assert_named_in_both_languages(exercise, wrong, mistake, range(3))
