"""Chapter 8 checks: each passes tfm_ref and fails every catalogued mistake with its hint."""
import pytest

from autograde.exercises import ch08_encoder_decoder as chapter
from autograde.exercises._modules import one_thread
from autograde.testing import assert_fails_with_hint, assert_passes, exercise_params, mistake_params


@pytest.fixture(autouse=True)
def _one_thread():
    with one_thread():
        yield


@pytest.mark.parametrize("exercise", exercise_params(chapter))
def test_reference_passes_every_check(exercise):
    assert_passes(exercise)


@pytest.mark.parametrize(("exercise", "mistake"), mistake_params(chapter))
def test_each_mistake_fails_with_its_hint(exercise, mistake):
    assert_fails_with_hint(exercise, mistake)


def test_chapter_has_at_least_four_exercises():
    assert len(chapter.EXERCISES) >= 4
