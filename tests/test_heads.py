import pytest
import torch

from tfm_ref import merge_heads, repeat_kv, split_heads


def test_split_heads_gives_each_head_a_contiguous_slice_of_features():
    x = torch.randn(2, 5, 12)
    heads = split_heads(x, 3)
    assert heads.shape == (2, 3, 5, 4)
    for h in range(3):
        assert torch.equal(heads[:, h], x[..., 4 * h : 4 * (h + 1)])


def test_merge_heads_inverts_split_heads():
    x = torch.randn(2, 5, 12)
    assert torch.equal(merge_heads(split_heads(x, 4)), x)


def test_repeat_kv_equals_repeat_interleave():
    x = torch.randn(2, 3, 5, 4)
    assert torch.equal(repeat_kv(x, 4), x.repeat_interleave(4, dim=1))
    assert repeat_kv(x, 1) is x


@pytest.mark.parametrize("call, words", [
    (lambda: split_heads(torch.randn(2, 5, 10), 3), "not divisible by n_heads"),
    (lambda: split_heads(torch.randn(5, 10), 2), r"\(B, T, H·Dh\)"),
    (lambda: merge_heads(torch.randn(5, 10, 2)), r"\(B, H, T, Dh\)"),
    (lambda: repeat_kv(torch.randn(1, 2, 3, 4), 0), "positive"),
])
def test_bad_head_arguments_raise_a_named_error(call, words):
    with pytest.raises(ValueError, match=words):
        call()
