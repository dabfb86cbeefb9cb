"""The proof that the checks work (``tests/test_exercises.py`` runs it for every chapter).

Each check must pass the reference (visible and hidden cases) and fail every catalogued
mistake, naming that mistake and giving its hint.
"""
from __future__ import annotations

from types import ModuleType


from autograde.spec import Exercise, Mistake

__all__ = ["exercise_params", "mistake_params", "assert_passes", "assert_fails_with_hint", "assert_named",
           "assert_named_in_both_languages"]

SEEDS = (0, 1, 2)
"""Every proof runs on these seeds, so a mistake caught only by luck is noticed."""


def exercise_params(chapters: list[ModuleType]) -> list:
    import pytest

    return [pytest.param(e, id=f"{_short(c)}-{e.key}") for c in chapters for e in c.EXERCISES]


def mistake_params(chapters: list[ModuleType]) -> list:
    import pytest

    return [pytest.param(e, m, id=f"{_short(c)}-{e.key}-{m.name}") for c in chapters for e in c.EXERCISES for m in e.mistakes]


def _short(chapter: ModuleType) -> str:
    return chapter.__name__.rsplit(".", 1)[-1].split("_")[0]  # "ch01"


def assert_named(exercise: Exercise, student, mistake: str, seeds, *, hidden: bool = False) -> None:
    """The check fails a student's own ``student``, naming ``mistake``, on every one of ``seeds``."""
    for seed in seeds:
        report = exercise.run(student, hidden=hidden, seed=seed)
        assert report.mistake == mistake, (seed, report.message)


def assert_named_in_both_languages(exercise: Exercise, student, mistake: str, seeds, *, hidden: bool = False) -> None:
    """The check fails ``student`` naming ``mistake`` with its hint on every one of ``seeds``, in English and in
    Chinese (where the message shows the translated name and hint, and the report keeps the English name)."""
    from autograde.messages import _, speaking

    catalogued = next(m for m in exercise.mistakes if m.name == mistake)
    for seed in seeds:
        english = exercise.run(student, hidden=hidden, seed=seed)
        assert english.mistake == mistake and catalogued.hint in english.message, (seed, english.message)
        with speaking("zh_CN"):
            chinese = exercise.run(student, hidden=hidden, seed=seed)
            name, hint = _(mistake), _(catalogued.hint)
        assert name != mistake and hint != catalogued.hint, f"{mistake!r} has no Chinese translation"
        assert chinese.mistake == mistake and name in chinese.message and hint in chinese.message, (
            seed, chinese.message)


def assert_passes(exercise: Exercise) -> None:
    for seed in SEEDS:
        report = exercise.run(exercise.reference, hidden=True, seed=seed)
        assert report.passed, f"the reference fails its own check (seed {seed}):\n{report.message}"


def assert_fails_with_hint(exercise: Exercise, mistake: Mistake) -> None:
    for seed in SEEDS:
        report = exercise.run(mistake.impl, hidden=True, seed=seed)
        assert not report.passed, f"the check passes the mistake {mistake.name!r} (seed {seed})"
        assert report.mistake == mistake.name, (
            f"the check fails {mistake.name!r} but names {report.mistake!r} (seed {seed}):\n{report.message}")
        assert mistake.hint in report.message


