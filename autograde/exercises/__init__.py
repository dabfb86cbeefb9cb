"""The exercise specs, one module per assignment: ``autograde/exercises/<assignment id>.py``.

Each module defines ``EXERCISES``, a tuple of `autograde.checking.Exercise`. Adding a chapter
is adding its module here and its notebook source in ``solutions/<assignment id>/``;
``tests/test_exercises.py`` proves its checks; nothing else is registered by hand.
"""
from __future__ import annotations

import importlib
import inspect
import pkgutil
from types import ModuleType

__all__ = ["chapter_ids", "load_all", "catalogued"]


def chapter_ids() -> list[str]:
    """The assignment ids that have exercise specs, sorted (``ch01_attention`` …)."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name.startswith("ch"))


def load_all() -> list[ModuleType]:
    """Import every chapter's specs (the grader does so before any student code runs)."""
    return [importlib.import_module(f"{__name__}.{name}") for name in chapter_ids()]


def catalogued() -> tuple[object, ...]:
    """Every chapter's catalogued mistakes (their functions, and their classes with the grader's classes they build
    on), which a student's code may not run (`autograde.integrity.forbid_everywhere`): many are right
    implementations but for one keyword (`_online_variant()` with its defaults is a right online softmax)."""
    found: dict[int, object] = {}
    for chapter in load_all():
        for exercise in chapter.EXERCISES:
            for mistake in exercise.mistakes:
                # a decorated function's own code (torch.no_grad's wrapper is PyTorch's, and every student's)
                impl = mistake.impl if isinstance(mistake.impl, type) else inspect.unwrap(mistake.impl)
                for item in impl.__mro__ if isinstance(impl, type) else (impl,):
                    if str(getattr(item, "__module__", "")).startswith(__name__):
                        found[id(item)] = item
    return tuple(found.values())
