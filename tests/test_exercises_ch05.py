"""Chapter 5 checks beyond tests/test_exercises.py: RoPE on any leading axes, and failures at offset 0 shrink."""
import torch

import tfm_ref
from autograde.exercises import ch05_positional as chapter


def _rope_for_four_axes_only(x, positions, base=10000.0):
    batch, heads, length, head_dim = x.shape  # the exercise promises (…, T, Dh)
    return tfm_ref.apply_rope(x.reshape(batch * heads, length, head_dim), positions, base).view(x.shape)


def test_a_rope_that_needs_four_axes_fails_on_one_head_of_one_sequence():
    report = chapter.ROPE.run(_rope_for_four_axes_only, hidden=True, guarded=False, seed=0)
    assert not report.passed
    assert "x (T, Dh) with no batch or head axes" in report.message and "not enough values to unpack" in report.message


def _positions_assumed_contiguous(x, positions, base=10000.0):
    return tfm_ref.apply_rope(x, positions[0] + torch.arange(x.shape[-2]), base)


def test_a_failure_on_scattered_positions_from_0_is_shown_on_a_small_input():
    report = chapter.ROPE.run(_positions_assumed_contiguous, hidden=True, guarded=False, seed=0)
    assert "check 'scattered positions' failed" in report.message
    assert "too large to print" not in report.message
