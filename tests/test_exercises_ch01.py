"""Chapter 1 checks: each passes tfm_ref and fails every catalogued mistake with its hint."""
import pytest

from autograde.exercises import ch01_attention as chapter
from autograde.testing import assert_fails_with_hint, assert_passes, exercise_params, mistake_params


@pytest.mark.parametrize("exercise", exercise_params(chapter))
def test_reference_passes_every_check(exercise):
    assert_passes(exercise)


@pytest.mark.parametrize(("exercise", "mistake"), mistake_params(chapter))
def test_each_mistake_fails_with_its_hint(exercise, mistake):
    assert_fails_with_hint(exercise, mistake)


def test_chapter_has_at_least_three_exercises():
    assert len(chapter.EXERCISES) >= 3
