"""Chapter 3 checks beyond tests/test_exercises.py: the references written in the exercise module are off limits, and a mask built another way passes.
"""
import pytest
import torch

from autograde.exercises import ch03_masking as chapter


@pytest.mark.parametrize("exercise", [chapter.ATTENTION_MASK, chapter.SHIFT_RIGHT], ids=lambda e: e.key)
def test_the_references_written_here_are_off_limits(exercise):
    report = exercise.run(exercise.reference, hidden=True, seed=0)
    assert not report.passed
    assert "ForbiddenCall" in report.message


def test_a_causal_mask_from_position_comparisons_passes_under_the_guard():
    def causal_mask(n_q, n_k=None, device=None):
        n_k = n_q if n_k is None else n_k
        return torch.arange(n_q)[:, None] + (n_k - n_q) >= torch.arange(n_k)[None, :]  # (n_q, n_k)

    report = chapter.CAUSAL_MASK.run(causal_mask, hidden=True, seed=0)
    assert report.passed, report.message
