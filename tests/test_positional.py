import math

import pytest
import torch

from tfm_ref import (
    LearnedPositionalEncoding,
    RotaryEmbedding,
    SinusoidalPositionalEncoding,
    apply_rope,
    sinusoidal_positional_encoding,
)


def test_sinusoidal_table_follows_the_paper_formula_entry_by_entry():
    d = 6
    pe = sinusoidal_positional_encoding(5, d, dtype=torch.float64)
    for p in range(5):
        for i in range(d // 2):
            angle = p / 10000 ** (2 * i / d)
            assert pe[p, 2 * i].item() == pytest.approx(math.sin(angle))
            assert pe[p, 2 * i + 1].item() == pytest.approx(math.cos(angle))


def test_pe_of_pos_plus_k_is_a_fixed_rotation_of_pe_of_pos():
    d, k = 16, 5
    pe = sinusoidal_positional_encoding(64, d, dtype=torch.float64)
    rotation = torch.zeros(d, d, dtype=torch.float64)
    for i in range(d // 2):
        w = 1 / 10000 ** (2 * i / d)
        c, s = math.cos(k * w), math.sin(k * w)
        # [sin(a+b), cos(a+b)] = [[c, s], [-s, c]] @ [sin a, cos a]
        rotation[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = torch.tensor([[c, s], [-s, c]])
    torch.testing.assert_close(pe[k:] , pe[:-k] @ rotation.T)


def test_pe_dot_product_depends_only_on_the_offset():
    pe = sinusoidal_positional_encoding(100, 32, dtype=torch.float64)
    for offset in (1, 7, 20):
        dots = (pe[:-offset] * pe[offset:]).sum(-1)
        torch.testing.assert_close(dots, torch.full_like(dots, dots[0].item()))


def test_rope_makes_query_key_products_depend_only_on_the_offset():
    rope = RotaryEmbedding(8)
    q, k = torch.randn(1, 1, 1, 8).expand(1, 1, 20, 8), torch.randn(1, 1, 1, 8).expand(1, 1, 20, 8)
    scores = rope(q) @ rope(k).transpose(-2, -1)  # (1, 1, 20, 20)
    for offset in (0, 3, 11):
        diagonal = torch.diagonal(scores[0, 0], offset=offset)
        torch.testing.assert_close(diagonal, torch.full_like(diagonal, diagonal[0].item()), atol=1e-4, rtol=1e-4)


def test_rope_preserves_norms_and_offset_continues_positions():
    rope = RotaryEmbedding(8)
    x = torch.randn(2, 3, 10, 8)
    rotated = rope(x)
    torch.testing.assert_close(rotated.norm(dim=-1), x.norm(dim=-1))
    torch.testing.assert_close(rope(x[:, :, 4:], offset=4), rotated[:, :, 4:])
    torch.testing.assert_close(apply_rope(x, torch.zeros(10)), x)


def test_added_encodings_add_the_right_rows():
    sin = SinusoidalPositionalEncoding(8, 20)
    x = torch.zeros(2, 5, 8)
    torch.testing.assert_close(sin(x, offset=3), sinusoidal_positional_encoding(20, 8)[3:8].expand(2, 5, 8))
    learned = LearnedPositionalEncoding(8, 20)
    torch.testing.assert_close(learned(x), learned.weight[:5].expand(2, 5, 8))


@pytest.mark.parametrize("call, words", [
    (lambda: sinusoidal_positional_encoding(10, 7), "even d_model"),
    (lambda: sinusoidal_positional_encoding(0, 8), "n_positions"),
    (lambda: RotaryEmbedding(7), "even head width"),
    (lambda: SinusoidalPositionalEncoding(8, 4)(torch.zeros(1, 5, 8)), "longer than max_len=4"),
])
def test_bad_positional_arguments_raise_a_named_error(call, words):
    with pytest.raises(ValueError, match=words):
        call()
