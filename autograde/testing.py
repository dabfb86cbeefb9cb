"""The proof that a chapter's checks work, shared by every ``tests/test_exercises_chNN.py``.

Each check must pass the reference (visible and hidden cases) and fail every catalogued
mistake, naming that mistake and giving its hint::

    from autograde.exercises import ch01_attention as chapter
    from autograde.testing import assert_fails_with_hint, assert_passes, exercise_params, mistake_params

    @pytest.mark.parametrize("exercise", exercise_params(chapter))
    def test_reference_passes_every_check(exercise):
        assert_passes(exercise)

    @pytest.mark.parametrize(("exercise", "mistake"), mistake_params(chapter))
    def test_each_mistake_fails_with_its_hint(exercise, mistake):
        assert_fails_with_hint(exercise, mistake)
"""
from __future__ import annotations

from types import ModuleType

from .checking import Exercise, Mistake

__all__ = ["exercise_params", "mistake_params", "assert_passes", "assert_fails_with_hint"]

SEEDS = (0, 1, 2)
"""Every proof runs on these seeds, so a mistake caught only by luck is noticed."""


def exercise_params(chapter: ModuleType) -> list:
    import pytest

    return [pytest.param(e, id=e.key) for e in chapter.EXERCISES]


def mistake_params(chapter: ModuleType) -> list:
    import pytest

    return [pytest.param(e, m, id=f"{e.key}-{m.name}") for e in chapter.EXERCISES for m in e.mistakes]


def assert_passes(exercise: Exercise) -> None:
    for seed in SEEDS:
        report = exercise.run(exercise.reference, hidden=True, guarded=False, seed=seed)
        assert report.passed, f"the reference fails its own check (seed {seed}):\n{report.message}"


def assert_fails_with_hint(exercise: Exercise, mistake: Mistake) -> None:
    for seed in SEEDS:
        report = exercise.run(mistake.impl, hidden=True, guarded=False, seed=seed)
        assert not report.passed, f"the check passes the mistake {mistake.name!r} (seed {seed})"
        assert report.mistake == mistake.name, (
            f"the check fails {mistake.name!r} but names {report.mistake!r} (seed {seed}):\n{report.message}")
        assert mistake.hint in report.message
