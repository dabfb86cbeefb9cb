"""Chapter 3 checks: each passes tfm_ref and fails every catalogued mistake with its hint.

Also: the references written in the exercise module are off limits, and a mask built another way passes.
"""
import pytest
import torch

from autograde.exercises import ch03_masking as chapter
from autograde.testing import assert_fails_with_hint, assert_passes, exercise_params, mistake_params


@pytest.mark.parametrize("exercise", exercise_params(chapter))
def test_reference_passes_every_check(exercise):
    assert_passes(exercise)


@pytest.mark.parametrize(("exercise", "mistake"), mistake_params(chapter))
def test_each_mistake_fails_with_its_hint(exercise, mistake):
    assert_fails_with_hint(exercise, mistake)


def test_chapter_has_at_least_four_exercises():
    assert len(chapter.EXERCISES) >= 4


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
