"""The check framework: compare a student's implementation with `tfm_ref`, and name the mistake.

One `Exercise` per graded function or module. It knows how to make random inputs of given
sizes, which reference to compare with, and a catalogue of `Mistake`s — broken versions,
one per common error, each with the hint that names it. A check runs the student's code on
fresh random inputs for each `Case`; when the output differs from the reference it

1. shrinks: re-runs the same case on the exercise's `shapes` ladder (smallest first) and
   shows the smallest input where the outputs differ, with both outputs;
2. diagnoses: runs each catalogued mistake on that input; if the student's output matches
   one, the failure names it and gives its hint (otherwise: shape, dtype, NaN or exception
   hints, or the largest difference).

Where the student's code runs is the `Candidate`'s business: in this process
(`LocalCandidate`: a student's own kernel, pytest), or in a sandbox that receives the inputs
and returns plain data (`autograde.session.RemoteCandidate`, when grading). The reference,
the comparison, the diagnosis and the verdict always run here.

The same catalogue proves the checks in pytest: each check passes `tfm_ref` and fails every
mistake with that mistake's hint (`tests/test_exercises.py`).

In a notebook (the test cells of ``solutions/chNN_slug/chNN_slug.md``)::

    from autograde import check
    check("ch01_attention.softmax", softmax)                # visible: a few seconds at most
    ### BEGIN HIDDEN TESTS
    check("ch01_attention.softmax", softmax, hidden=True)   # random shapes, dtypes, edge cases, gradients
    ### END HIDDEN TESTS

``check`` raises `CheckFailed` (an ``AssertionError``, so nbgrader scores the cell 0) with a
message that names the likely mistake; on success it prints one line. In pytest use
``Exercise.run(candidate, hidden=True, guarded=False)``, which returns a `Report` (see
`autograde.testing`). Writing a chapter's exercises: see ``autograde/README.md``.
"""
from __future__ import annotations

import importlib
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from .adapters import Dims, FunctionAdapter, ModuleAdapter
from .comparison import Tolerance, compare, same
from .display import indent, show
from .evaluation import CheckFailed, Outcome, evaluate
from .inputs import Call, randn, random_dims
from .integrity import Forbid, ForbiddenCall, Snapshot

__all__ = [
    "Call", "Case", "Mistake", "Exercise", "ModuleAdapter", "FunctionAdapter", "CheckFailed", "Report",
    "ForbiddenCall", "Candidate", "LocalCandidate", "check", "get_exercise", "passed_line", "randn", "random_dims",
    "SNAPSHOT",
]

# Captured at import, before any student code can run in this process (CPU generator only, as in
# `autograde.evaluation`).
_fork_rng, _manual_seed = torch.random.fork_rng, torch.default_generator.manual_seed


# --------------------------------------------------------------------------- specs

@dataclass(frozen=True)
class Mistake:
    """A common mistake: its name, a broken implementation that makes it, and the hint to give."""

    name: str
    impl: Callable
    hint: str


@dataclass(frozen=True)
class Case:
    """One test case of an exercise.

    Args:
        label: what it tests, shown on failure ("fully masked rows").
        dims: sizes (a dict) or a function drawing them from the generator; None = the
            exercise's largest shape.
        dtype: floating dtype of the inputs.
        grad: also compare the gradients of the floating inputs (and of module parameters).
        inputs: a different input maker ``(gen, dims, dtype) -> Call`` for this case.
    """

    label: str
    dims: Dims | Callable[[torch.Generator], Dims] | None = None
    dtype: torch.dtype = torch.float32
    grad: bool = False
    inputs: Callable[[torch.Generator, Dims, torch.dtype], Call] | None = None


@dataclass(frozen=True)
class Exercise:
    """A graded exercise: reference, input maker, shrink ladder, cases and mistake catalogue.

    Args:
        name: the tfm_ref name the student implements (shown in messages).
        reference: the tfm_ref function or class.
        inputs: ``(gen, dims, dtype) -> Call``.
        shapes: sizes from smallest to largest; failures are shrunk along this ladder.
        visible, hidden: the cases of ``check(...)`` and ``check(..., hidden=True)``.
        mistakes: the catalogue of broken implementations with their hints.
        forbidden: library functions/classes that would do the exercise (tfm_ref always is).
        allowed: tfm_ref functions the student may call (helpers from earlier exercises).
        arg_names: names shown for positional arguments in failure messages.
        adapter: `FunctionAdapter()` (default) or a `ModuleAdapter`.
        atol, rtol: override the dtype's tolerance.
        key: the id in ``check("chapter.key", ...)`` when two exercises build the same
            function (e.g. attention, then attention with a mask); defaults to ``name``.
    """

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

    def __post_init__(self) -> None:
        if not self.key:
            object.__setattr__(self, "key", self.name)
        if not self.shapes or not self.visible:
            raise ValueError(f"exercise {self.name!r} needs at least one shape and one visible case")

    @property
    def tolerance(self) -> Tolerance:
        return (self.rtol, self.atol)

    def run(self, candidate: Callable | Candidate, hidden: bool = False, *, guarded: bool = True,
            seed: int | None = None) -> Report:
        """Run the visible (or visible + hidden) cases; never raises for a wrong answer.

        ``candidate`` is the student's function or class (run here, under the integrity guard
        unless ``guarded=False``: pytest runs the reference and the mistakes as candidates), or
        a `Candidate` that runs it elsewhere.
        """
        if not isinstance(candidate, Candidate):
            candidate = LocalCandidate(candidate, guarded)
        seed = random.SystemRandom().randrange(2**31) if seed is None else seed
        cases = [*self.visible, *self.hidden] if hidden else list(self.visible)
        started = time.perf_counter()
        for index, case in enumerate(cases):
            try:
                failure = _run_case(self, case, candidate, seed + 7919 * index)
            except CheckFailed as error:  # raised while building or differentiating the student's object
                return Report(self.name, False, None, f"✗ {self.name}: {error}", len(cases))
            if failure is not None:
                return Report(self.name, False, failure.mistake, failure.message(self, case, seed, hidden), len(cases),
                              forbidden_call=failure.got.error_type == ForbiddenCall.__name__)
        return Report(self.name, True, None, "", len(cases), time.perf_counter() - started)

    def check(self, candidate: Callable, hidden: bool = False) -> Report:
        """`run`, raising `CheckFailed` with the diagnosis on failure; prints a line on success."""
        report = self.run(candidate, hidden)
        if not report.passed:
            raise CheckFailed(report.message)
        print(passed_line(report, hidden))
        return report


@dataclass(frozen=True)
class Report:
    """The outcome of a check. ``mistake`` is the catalogued mistake recognised, if any;
    ``forbidden_call`` says the student's code called something off limits."""

    exercise: str
    passed: bool
    mistake: str | None
    message: str
    n_cases: int
    seconds: float = 0.0
    forbidden_call: bool = False


def passed_line(report: Report, hidden: bool) -> str:
    kind = "visible and hidden" if hidden else "visible"
    plural = "s" if report.n_cases != 1 else ""
    return f"✓ {report.exercise}: {report.n_cases} {kind} check{plural} passed ({report.seconds:.2f} s)"


# --------------------------------------------------------------------------- where the student's code runs

class Candidate:
    """The student's implementation, wherever it runs: `evaluate` gives its `Outcome` on one input."""

    def evaluate(self, exercise: Exercise, case: Case, call: Call, dims: Dims, seed: int,
                 weights: dict[str, torch.Tensor] | None) -> Outcome:
        raise NotImplementedError


class LocalCandidate(Candidate):
    """The student's function or class in this process, called under the integrity guard
    (unless ``guarded`` is False)."""

    def __init__(self, impl: Callable, guarded: bool = True):
        self.impl, self.guarded = impl, guarded

    def evaluate(self, exercise: Exercise, case: Case, call: Call, dims: Dims, seed: int,
                 weights: dict[str, torch.Tensor] | None) -> Outcome:
        adapter = exercise.adapter
        guard = (lambda: Forbid(exercise.forbidden, allowed=exercise.allowed)) if self.guarded else None
        return evaluate(lambda: adapter.candidate(self.impl, dims, weights, case.dtype), call, grad=case.grad,
                        seed=seed, parameters=adapter.parameters, **({"guard": guard} if guard else {}))


# --------------------------------------------------------------------------- a case, shrunk and diagnosed

@dataclass
class _Failure:
    problem: str
    dims: Dims
    call: Call
    weights: dict[str, torch.Tensor] | None
    expected: Outcome
    got: Outcome
    mistake: str | None = None
    hint: str | None = None

    def message(self, exercise: Exercise, case: Case, seed: int, hidden: bool) -> str:
        kind = "hidden check" if hidden and case in exercise.hidden else "check"
        lines = [f"✗ {exercise.name}: {kind} '{case.label}' failed — {self.problem.rstrip('.')}."]
        if self.hint:
            lines.append(f"Likely mistake — {self.mistake}: {self.hint}")
        if self.got.trace:
            lines += ["", "Your code raised:", indent(self.got.trace)]
        sizes = ", ".join(f"{k}={v}" for k, v in self.dims.items())
        lines += ["", f"Smallest failing input ({sizes}; {case.dtype}{'; with gradients' if case.grad else ''}):",
                  indent(self.call.describe(exercise.arg_names))]
        if self.got.error is None:
            lines += ["expected:", indent(show(self.expected.output)), "got:", indent(show(self.got.output))]
        lines.append(f"(random seed {seed})")
        return "\n".join(lines)


def _attempt(exercise: Exercise, case: Case, candidate: Candidate, dims: Dims, seed: int) -> _Failure | None:
    gen = torch.Generator().manual_seed(seed)
    call = (case.inputs or exercise.inputs)(gen, dims, case.dtype)
    adapter = exercise.adapter
    with _fork_rng(devices=[]):
        _manual_seed(seed)
        reference = adapter.reference(exercise.reference, dims, case.dtype)
    weights = adapter.weights(reference)
    expected = evaluate(lambda: reference, call, grad=case.grad, seed=seed, parameters=adapter.parameters)
    if expected.error is not None:
        raise RuntimeError(f"the reference failed on case {case.label!r}: {expected.trace}")
    got = candidate.evaluate(exercise, case, call, dims, seed, weights)
    problem = compare(expected, got, exercise.tolerance)
    return None if problem is None else _Failure(problem, dict(dims), call, weights, expected, got)


def _run_case(exercise: Exercise, case: Case, candidate: Candidate, seed: int) -> _Failure | None:
    gen = torch.Generator().manual_seed(seed)
    if callable(case.dims):
        dims = case.dims(gen)
    else:
        dims = case.dims or exercise.shapes[-1]
    failure = _attempt(exercise, case, candidate, dims, seed)
    if failure is None:
        return None
    if failure.got.error_type == ForbiddenCall.__name__:
        return failure
    # Diagnose on the input that failed, then show the smallest input that still fails.
    failure.mistake, failure.hint = _diagnose(exercise, case, failure, seed)
    for smaller in exercise.shapes:
        if _size(smaller) >= _size(dims):
            break
        shrunk = _attempt(exercise, case, candidate, smaller, seed)
        if shrunk is not None:
            shrunk.mistake, shrunk.hint = failure.mistake, failure.hint
            if failure.hint is None:
                shrunk.mistake, shrunk.hint = _diagnose(exercise, case, shrunk, seed)
            return shrunk
    return failure


def _size(dims: Dims) -> int:
    return math.prod(dims.values()) if dims else 0


def _diagnose(exercise: Exercise, case: Case, failure: _Failure, seed: int) -> tuple[str | None, str | None]:
    if failure.got.error is not None:
        return None, None  # a mistake is recognised by its output; an exception has none
    for mistake in exercise.mistakes:
        broken = LocalCandidate(mistake.impl, guarded=False).evaluate(
            exercise, case, failure.call, failure.dims, seed, failure.weights)
        # A mistake that is right on this input explains nothing.
        if same(broken, failure.got, exercise.tolerance) and not same(broken, failure.expected, exercise.tolerance):
            return mistake.name, mistake.hint
    return None, None


# --------------------------------------------------------------------------- registry and entry point

SNAPSHOT = Snapshot()
"""The protected namespaces as they were when the checks were first loaded in this process."""


def get_exercise(key: str) -> Exercise:
    """``"ch01_attention.softmax"`` → the `Exercise` with key ``softmax`` in
    ``autograde/exercises/ch01_attention.py`` (its ``EXERCISES`` tuple)."""
    chapter, _, name = key.rpartition(".")
    if not chapter:
        raise ValueError(f"an exercise key is 'chapter.name' (e.g. 'ch01_attention.softmax'), got {key!r}")
    module = importlib.import_module(f"autograde.exercises.{chapter}")
    for exercise in module.EXERCISES:
        if exercise.key == name:
            return exercise
    raise ValueError(f"{chapter} has no exercise {name!r}; it has {[e.key for e in module.EXERCISES]}")


def protect() -> None:
    """Record the protected namespaces the first time (loading every chapter's checks first),
    put them back every later time: undoes a student cell's patching of torch, numpy, tfm_ref
    or autograde before a check runs in the same process."""
    if SNAPSHOT.taken:
        SNAPSHOT.restore()
        return
    from .exercises import load_all

    load_all()
    SNAPSHOT.take()


def check(key: str, candidate: Callable, hidden: bool = False) -> None:
    """Check a student's implementation against tfm_ref (the function test cells call).

    Args:
        key: ``"chapter.name"``, e.g. ``"ch01_attention.softmax"``.
        candidate: the student's function or class.
        hidden: also run the hidden cases (random sizes, dtypes, edge cases, gradients).
    Prints one line when every case passes (returns nothing, so a notebook shows no value).
    Raises:
        CheckFailed: with the likely mistake and the smallest failing input.
    """
    protect()
    exercise = get_exercise(key)
    if not callable(candidate):
        raise CheckFailed(f"✗ {exercise.name}: expected a function or class, got {type(candidate).__name__}")
    exercise.check(candidate, hidden)
