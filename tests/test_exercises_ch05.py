"""Chapter 5 checks beyond tests/test_exercises.py: RoPE on any leading axes, failures at offset 0 shrink, and a
base written in as 10000 is named on the visible cases."""
import torch
from exercise_proofs import assert_named, assert_named_in_both_languages

import tfm_ref
from autograde.exercises import ch05_positional as chapter


def _rope_for_four_axes_only(x, positions, base=10000.0):
    batch, heads, length, head_dim = x.shape  # the exercise promises (…, T, Dh)
    return tfm_ref.apply_rope(x.reshape(batch * heads, length, head_dim), positions, base).view(x.shape)


def test_a_rope_that_needs_four_axes_fails_on_one_head_of_one_sequence():
    report = chapter.ROPE.run(_rope_for_four_axes_only, hidden=True, seed=0)
    assert not report.passed
    assert "x (T, Dh) with no batch or head axes" in report.message and "not enough values to unpack" in report.message


def _positions_assumed_contiguous(x, positions, base=10000.0):
    return tfm_ref.apply_rope(x, positions[0] + torch.arange(x.shape[-2]), base)


def test_a_failure_on_scattered_positions_from_0_is_shown_on_a_small_input():
    report = chapter.ROPE.run(_positions_assumed_contiguous, hidden=True, seed=0)
    assert "check 'scattered positions' failed" in report.message
    assert "too large to print" not in report.message


def _rope_base_written_in(x, positions, base=10000.0):
    head_dim = x.shape[-1]
    inv_freq = 10000.0 ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)  # base ignored
    angle = positions.float()[:, None] * inv_freq[None, :]
    angle = torch.cat([angle, angle], dim=-1)
    x1, x2 = x.chunk(2, dim=-1)
    rotated = torch.cat([-x2, x1], dim=-1)
    return (x.float() * angle.cos() + rotated.float() * angle.sin()).to(x.dtype)


def test_a_rope_that_ignores_base_is_named_on_the_visible_cases():
    assert_named(chapter.ROPE, _rope_base_written_in, "base argument ignored (always 10000)", range(5))


def _learned(rows_of=lambda x: x.shape[-2]):
    class LearnedPositionalEncoding(torch.nn.Module):
        def __init__(self, d_model, max_len):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.randn(max_len, d_model) * 0.02)

        def forward(self, x, offset=0):
            n = rows_of(x)
            rows = self.weight[offset:offset + n]  # (T, D) when n is the number of positions
            return x + (rows if n == x.shape[-2] else rows[:, None, :])
    return LearnedPositionalEncoding


def test_rows_taken_by_the_batch_size_are_named_in_english_and_chinese():
    """A student audit found this failing with only "the output differs"."""
    assert chapter.LEARNED.run(_learned(), hidden=True, seed=0).passed
    assert_named_in_both_languages(chapter.LEARNED, _learned(rows_of=lambda x: x.shape[0]),
                                   "one row per sequence: rows counted along the batch axis", range(3))
