"""The exercise specs, one module per assignment: ``autograde/exercises/<assignment id>.py``.

Each module defines ``EXERCISES``, a tuple of `autograde.spec.Exercise`. Adding a chapter
is adding its module here and its notebook source in ``solutions/<assignment id>/``;
``tests/test_exercises.py`` proves its checks; nothing else is registered by hand.
"""
from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

__all__ = ["chapter_ids", "load_all", "exercises_of"]


def chapter_ids() -> list[str]:
    """The assignment ids that have exercise specs, sorted (``ch01_attention`` …)."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name.startswith("ch"))


def load_all() -> list[ModuleType]:
    """Import every chapter's specs (the grader does so before any student code runs)."""
    return [importlib.import_module(f"{__name__}.{name}") for name in chapter_ids()]


def exercises_of(assignment: str) -> tuple:
    """The ``EXERCISES`` of ``autograde/exercises/<assignment>.py``."""
    return importlib.import_module(f"{__name__}.{assignment}").EXERCISES

