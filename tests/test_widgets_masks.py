"""tfm_widgets/masks.py: the mask builder combines padding and look-ahead masks correctly."""
from __future__ import annotations

import pytest
import torch

from tfm_ref import causal_mask, padding_mask
from tfm_widgets.masks import build_mask, mask_builder, masked_attention, parse_lengths


def test_build_mask_is_padding_and_causal_combined():
    mask = build_mask([2, 3], max_len=3, causal=True)
    expected = padding_mask([2, 3], 3)[:, None, :] & causal_mask(3)
    assert torch.equal(mask, expected)


def test_masking_padded_queries_gives_fully_masked_rows_with_zero_weights():
    mask = build_mask([2], max_len=4, causal=False, pad_queries=True)
    weights = masked_attention(mask)["weights"]
    assert not mask[0, 3].any()
    assert torch.equal(weights[0, 3], torch.zeros(4))
    assert not torch.isnan(weights).any()


def test_blocked_scores_are_minus_infinity_and_weights_there_are_zero():
    mask = build_mask([3], max_len=3, causal=True)
    result = masked_attention(mask)
    assert torch.isinf(result["scores"][~mask]).all()
    assert (result["weights"][~mask] == 0).all()


def test_a_student_function_is_the_one_called():
    calls = []

    def student(q, k, v, mask, return_weights=False):
        calls.append(mask.shape)
        weights = torch.softmax((q @ k.transpose(-2, -1)).masked_fill(~mask, float("-inf")), dim=-1)
        return weights @ v, weights

    mask_builder(fn=student)
    assert calls


def test_parse_lengths_reads_commas_or_spaces_and_rejects_the_rest():
    assert parse_lengths("3, 5") == parse_lengths("3 5") == [3, 5]
    with pytest.raises(ValueError, match="whole numbers"):
        parse_lengths("3, five")
    with pytest.raises(ValueError, match="at least one"):
        parse_lengths(" , ")
