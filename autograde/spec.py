"""What an exercise is: its reference, input maker, shrink ladder, cases and catalogue of `Mistake`s.

An `Exercise` runs its cases on a candidate (`Exercise.run`, a `Report`; `autograde.diagnosis` shrinks and names a
failure, `autograde.verdict` says it). Chapters declare theirs in ``autograde/exercises/chNN_slug.py``; writing
them: ``autograde/README.md``. The proofs that each check passes tfm_ref and names every mistake:
``tests/test_exercises.py``.
"""
from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from notebook_sandbox.delegation import forbidden_ops, named
from notebook_sandbox.evaluation import CheckFailed
from notebook_sandbox.inputs import Call, randn, random_dims

from .adapters import Dims, FunctionAdapter, ModuleAdapter
from .candidates import Candidate, LocalCandidate, one_thread
from .comparison import Tolerance
from .diagnosis import failing_uses, run_case
from .exercises import exercises_of
from .verdict import Report, delegation_note, failure_message, passed_line

__all__ = ["Call", "Case", "Mistake", "Exercise", "ModuleAdapter", "FunctionAdapter", "Report", "get_exercise",
           "randn", "random_dims"]


@dataclass(frozen=True)
class Mistake:
    """A common mistake: its name, a broken implementation that makes it, the hint, and (optionally) the fix,
    shown only when the same mistake fails again (or folded on the feedback page)."""

    name: str
    impl: Callable
    hint: str
    fix: str = ""


@dataclass(frozen=True)
class Case:
    """One test case of an exercise (autograde/README.md, "The spec"). ``dims``: sizes, a function drawing them,
    or None (the largest shape); ``inputs``: an input maker of its own; ``tolerance``: (rtol, atol) where the dtype
    needs it."""

    label: str
    dims: Dims | Callable[[torch.Generator], Dims] | None = None
    dtype: torch.dtype = torch.float32
    grad: bool = False
    inputs: Callable[[torch.Generator, Dims, torch.dtype], Call] | None = None
    tolerance: Tolerance | None = None


@dataclass(frozen=True)
class Exercise:
    """A graded exercise: reference, input maker, shrink ladder, cases and mistakes (autograde/README.md, "The spec").

    ``uses``: earlier exercises whose function the solution calls (a failure of one is named in this one's
    message); ``offsets``: keys of ``shapes`` that place the input rather than size it; ``input_note``: how the
    shown input reaches the function through a wrapper (train_step); ``withheld``: tfm_ref objects besides the
    reference that compute the exercise whole."""

    name: str
    reference: Callable
    inputs: Callable[[torch.Generator, Dims, torch.dtype], Call]
    shapes: Sequence[Dims]
    visible: Sequence[Case]
    hidden: Sequence[Case] = ()
    mistakes: Sequence[Mistake] = ()
    forbidden: Sequence[object] = ()
    allowed: Sequence[Callable] = ()
    arg_names: Sequence[str] = ()
    adapter: Any = field(default_factory=FunctionAdapter)
    atol: float | None = None
    rtol: float | None = None
    key: str = ""
    uses: Sequence[Exercise] = ()
    output_names: Sequence[str] = ()
    offsets: Sequence[str] = ()
    input_note: str = ""
    withheld: Sequence[object] = ()
    forbidden_ops: tuple[str, ...] = field(init=False, repr=False, compare=False)  # set in __post_init__
    allowed_names: tuple[tuple[str, str], ...] = field(init=False, repr=False, compare=False)  # set in __post_init__

    def __post_init__(self) -> None:
        if not self.key:
            object.__setattr__(self, "key", self.name)
        for name in ("shapes", "visible", "hidden", "mistakes", "forbidden", "allowed", "uses", "withheld"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        if not self.shapes or not self.visible:
            raise ValueError(f"exercise {self.name!r} needs at least one shape and one visible case")
        object.__setattr__(self, "forbidden_ops", forbidden_ops(self.forbidden))
        object.__setattr__(self, "allowed_names", named(self.allowed))

    @property
    def ladder_keys(self) -> set[str]:
        """The keys of ``shapes``: the sizes (and offsets) an input is shrunk along; a case's other keys are flags."""
        return {k for shape in self.shapes for k in shape}

    def run(self, candidate: Callable | Candidate, hidden: bool = False, *, seed: int | None = None,
            reveal_fix: bool = True) -> Report:
        """Run the visible (or visible + hidden) cases on the student's function or class, or a `Candidate`; never
        raises for a wrong answer. ``reveal_fix=False`` keeps a recognised mistake's fix out of the message."""
        if not isinstance(candidate, Candidate):
            candidate = LocalCandidate(candidate)
        seed = random.SystemRandom().randrange(2**31) if seed is None else seed
        cases = [*self.visible, *self.hidden] if hidden else list(self.visible)
        started = time.perf_counter()
        with one_thread():
            for index, case in enumerate(cases):
                failure = run_case(self, case, candidate, seed + 7919 * index)
                if failure is not None:
                    uses = [] if failure.stub else failing_uses(self.uses, candidate, seed)
                    message = failure_message(failure, self, case, seed, hidden, reveal_fix, uses)
                    mistake = failure.mistake.name if failure.mistake else None
                    return Report(self.name, False, mistake, message, len(cases),
                                  delegated=tuple(candidate.delegated))
        return Report(self.name, True, None, "", len(cases), time.perf_counter() - started,
                      delegated=tuple(candidate.delegated))

    def check(self, candidate: Callable, hidden: bool = False) -> Report:
        """`run`, raising `CheckFailed` on failure (the fix shown the second time a mistake fails in this process);
        prints a line on success."""
        report = self.run(candidate, hidden, reveal_fix=False)
        if not report.passed and report.mistake and (self.key, report.mistake) in _FAILED_BEFORE:
            report = self.run(candidate, hidden, reveal_fix=True)
        if not report.passed:
            if report.mistake:
                _FAILED_BEFORE.add((self.key, report.mistake))
            raise CheckFailed(report.message)
        print(passed_line(report, hidden))
        if report.delegated:
            print(delegation_note(report))
        return report


_FAILED_BEFORE: set[tuple[str, str]] = set()
"""(exercise key, mistake) pairs that already failed in this process: their fix is shown next time."""


def get_exercise(key: str) -> Exercise:
    """``"ch01_attention.softmax"`` → the `Exercise` of key ``softmax`` in ``exercises/ch01_attention.py``."""
    chapter, _, name = key.rpartition(".")
    if not chapter:
        raise ValueError(f"an exercise key is 'chapter.name' (e.g. 'ch01_attention.softmax'), got {key!r}")
    exercises = exercises_of(chapter)
    for exercise in exercises:
        if exercise.key == name:
            return exercise
    raise ValueError(f"{chapter} has no exercise {name!r}; it has {[e.key for e in exercises]}")
