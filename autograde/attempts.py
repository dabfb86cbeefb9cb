"""One attempt of a check: a case's inputs at some sizes, the reference's outcome and the candidate's (or a
mistake's), compared; a `Failure` is one that differs. Grading uses one seed per class, so inputs, reference
and mistakes' outcomes are computed once and remembered here.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from notebook_sandbox.building import module_parameters
from notebook_sandbox.evaluation import CheckFailed, Outcome, evaluate
from notebook_sandbox.inputs import Call

from .adapters import Dims
from .candidates import Candidate, LocalCandidate
from .comparison import Tolerance, compare
from .messages import _

if TYPE_CHECKING:
    from .spec import Case, Exercise, Mistake

__all__ = ["Failure", "attempt", "passed", "outcome_of", "tolerance", "gradient_names", "reference_of"]


@dataclass
class Failure:
    """An input on which the candidate's outcome differs from the reference's, and what is known of why."""

    problem: str
    dims: Dims
    call: Call
    weights: dict[str, torch.Tensor] | None
    expected: Outcome
    got: Outcome
    gradient: int | None = None  # which gradient differs, when the output matches
    mistake: Mistake | None = None  # the catalogued mistake whose outcome is the student's
    stub: bool = False  # the student's function is the released stub (raises NotImplementedError)
    setup: bool = False  # the student's object could not be built or differentiated: no outputs to show
    random: bool = False  # the student's output changes with the call's random seed, the reference's does not
    shrunk: bool = False  # found on a smaller input than the case's own: the numbers are that input's


def tolerance(exercise: Exercise, case: Case) -> Tolerance:
    """The case's (rtol, atol), else the exercise's."""
    return (exercise.rtol, exercise.atol) if case.tolerance is None else case.tolerance


def gradient_names(exercise: Exercise, call: Call, weights: dict[str, torch.Tensor] | None) -> list[str]:
    """What each compared gradient is with respect to: the floating inputs by name, then the module's parameters
    (sorted by name, as `building.module_parameters` gives them)."""
    inputs = [name for name, value in call.named(exercise.arg_names)
              if isinstance(value, torch.Tensor) and value.is_floating_point()]
    return [f"`{n}`" for n in inputs] + [_("the parameter `{name}`").format(name=n) for n in sorted(weights or {})
                                          if weights[n].is_floating_point()]


def reference_of(exercise: Exercise, dims: Dims, dtype: torch.dtype, seed: int) -> Any:
    """The reference function, or its module built (and initialised) under ``seed``."""
    with torch.random.fork_rng(devices=[]):
        torch.default_generator.manual_seed(seed)
        return exercise.adapter.reference(exercise.reference, dims, dtype)


_REMEMBERED: dict[tuple, tuple] = {}


def _remembered(what: object, exercise: Exercise, case: Case, dims: Dims, seed: int, compute: Callable[[], Any]) -> Any:
    """``compute()`` for (what, exercise, case, sizes, seed), computed once."""
    key = (id(what), id(exercise), id(case), tuple(sorted(dims.items())), seed)
    if key not in _REMEMBERED:
        if len(_REMEMBERED) > 4096:
            _REMEMBERED.clear()
        _REMEMBERED[key] = (compute(), what, exercise, case)  # those kept alive: their ids stay theirs
    return _REMEMBERED[key][0]


def _expected(exercise: Exercise, case: Case, dims: Dims, seed: int) -> tuple[Call, Any, Outcome]:
    """The inputs of ``case`` at ``dims`` under ``seed``, the reference's weights, and its outcome on them (computed
    once for a class)."""
    def compute() -> tuple[Call, Any, Outcome]:
        call = (case.inputs or exercise.inputs)(torch.Generator().manual_seed(seed), dims, case.dtype)
        reference = reference_of(exercise, dims, case.dtype, seed)
        weights = exercise.adapter.weights(reference)
        expected = evaluate(lambda: reference, call, grad=case.grad, seed=seed, parameters=module_parameters)
        if expected.error is not None:
            raise RuntimeError(f"the reference failed on case {case.label!r}: {expected.trace}")
        return call, weights, expected
    return _remembered(_expected, exercise, case, dims, seed, compute)


def attempt(exercise: Exercise, case: Case, candidate: Candidate, dims: Dims, seed: int) -> Failure | None:
    """The candidate on ``case`` at ``dims`` under ``seed``: None if it gives the reference's outcome."""
    call, weights, expected = _expected(exercise, case, dims, seed)
    try:
        got = candidate.evaluate(exercise, case, call, dims, seed, weights)
        _refuse_changed_inputs(exercise, call, got)
    except CheckFailed as error:  # the student's object could not be built, or has no gradient path
        return Failure(str(error), dict(dims), call, weights, expected, Outcome(error_type=CheckFailed.__name__),
                       setup=True)
    problem, gradient = compare(expected, got, tolerance(exercise, case), gradient_names(exercise, call, weights),
                                exercise.output_names)
    if problem is None:
        return None
    return Failure(problem, dict(dims), call, weights, expected, got, gradient,
                   stub=got.error_type == NotImplementedError.__name__)


def passed(exercise: Exercise, case: Case, dims: Dims, seed: int) -> Failure:
    """``case`` at ``dims`` under ``seed`` as an attempt that gave the reference's outcome (a candidate that passes
    there): a mistake that gives another is not the candidate's."""
    call, weights, expected = _expected(exercise, case, dims, seed)
    return Failure("", dict(dims), call, weights, expected, expected)


def _refuse_changed_inputs(exercise: Exercise, call: Call, outcome: Outcome) -> None:
    """A right output from code that also spoils its caller's tensors is no pass."""
    if outcome.changed:
        named = call.named(exercise.arg_names)
        changed = _(" and ").join(f"`{named[i][0]}`" for i in outcome.changed)
        raise CheckFailed(_("your code changed its input {names} in place; the caller still needs it as it was. "
                            "Compute into a new tensor (e.g. torch.cat, .clone(), or an out-of-place operation) "
                            "instead of writing into the argument.").format(names=changed))


def outcome_of(mistake: Mistake, exercise: Exercise, case: Case, failure: Failure, seed: int) -> Outcome | None:
    """What the catalogued ``mistake`` gives on ``failure``'s input; None if it cannot be built there."""
    def outcome() -> Outcome | None:
        try:
            return LocalCandidate(mistake.impl).evaluate(exercise, case, failure.call, failure.dims, seed,
                                                         failure.weights)
        except CheckFailed:
            return None
    return _remembered(mistake, exercise, case, failure.dims, seed, outcome)
