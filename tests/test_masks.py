import pytest
import torch

from tfm_ref import causal_mask, key_mask, padding_mask


def test_causal_mask_lets_each_query_see_itself_and_the_past_only():
    mask = causal_mask(5)
    for i in range(5):
        for j in range(5):
            assert mask[i, j].item() == (j <= i)


def test_causal_mask_with_more_keys_is_aligned_to_the_end():
    # the 3 queries are the last 3 of 7 positions: query 0 is position 4
    mask = causal_mask(3, 7)
    assert torch.equal(mask, causal_mask(7)[-3:])


def test_causal_mask_for_one_new_token_sees_every_cached_key():
    assert causal_mask(1, 9).all()


def test_padding_mask_marks_real_tokens_true():
    mask = padding_mask(torch.tensor([3, 1, 0]), 4)
    assert mask.dtype == torch.bool
    assert mask.sum(dim=1).tolist() == [3, 1, 0]
    assert torch.equal(mask[0], torch.tensor([True, True, True, False]))


def test_key_mask_broadcasts_over_heads_and_queries():
    assert key_mask(padding_mask([2, 3], 3)).shape == (2, 1, 1, 3)


@pytest.mark.parametrize("call, words", [
    (lambda: causal_mask(0), "positive"),
    (lambda: causal_mask(4, 2), "n_k >= n_q"),
    (lambda: padding_mask([5], 3), "max_len"),
    (lambda: padding_mask([[1]], 3), "1-D"),
    (lambda: key_mask(torch.ones(2, 3, 4, dtype=torch.bool)), "(B, S)"),
])
def test_bad_mask_arguments_raise_a_named_error(call, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
        call()
