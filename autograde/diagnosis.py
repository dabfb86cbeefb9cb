"""A failing case, shrunk and diagnosed: the smallest input that fails in the same way, and the catalogued
mistake whose outcome there is the student's (otherwise: shape, dtype, NaN or exception hints)."""
from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import torch

from notebook_sandbox.building import module_parameters
from notebook_sandbox.evaluation import CheckFailed, Outcome, evaluate, flatten

from .adapters import Dims
from .attempts import Failure, attempt, outcome_of, passed, reference_of, tolerance
from .candidates import Candidate
from .comparison import same

if TYPE_CHECKING:
    from .spec import Case, Exercise, Mistake
    from .verdict import Report

__all__ = ["run_case", "failing_uses", "EXTRAS_SECONDS"]

EXTRAS_SECONDS = 6.0
"""How long a failing case may spend on what only makes its message better (the randomness test, a smaller
input): a training check retrains for each, which beside other work took minutes. Naming the mistake is never cut
short, so the name does not depend on the machine's speed."""


def run_case(exercise: Exercise, case: Case, candidate: Candidate, seed: int) -> Failure | None:
    """The candidate on ``case``: None if it passes, else its failure, diagnosed and (time allowing) shrunk."""
    deadline = time.monotonic() + EXTRAS_SECONDS
    dims = _dims(exercise, case, seed)
    failure = attempt(exercise, case, candidate, dims, seed)
    if failure is None or failure.stub:
        return failure
    # Diagnose on the input that failed, then show the smallest input that still fails in the same way (an
    # exception stays that exception), with the case's flags (keys the ladder lacks: pre=1) kept. A module that
    # cannot be built is shown at the smallest size where it still cannot be.
    if not failure.setup:
        _diagnose(exercise, case, failure, seed, candidate=candidate)
        if failure.mistake is None and failure.got.error is None and time.monotonic() < deadline:
            failure.random = _random_where_the_reference_is_not(exercise, case, candidate, failure, seed)
    ladder = exercise.ladder_keys
    flags = {k: v for k, v in dims.items() if k not in ladder}
    sizes = ladder - set(exercise.offsets)
    kind = _failure_kind(failure.expected, failure.got)
    for smaller in exercise.shapes:
        if _size(smaller, sizes) >= _size(dims, sizes) or time.monotonic() > deadline:
            break
        shrunk = attempt(exercise, case, candidate, {**smaller, **flags}, seed)
        if shrunk is not None and shrunk.setup == failure.setup and _failure_kind(shrunk.expected, shrunk.got) == kind:
            if failure.mistake is not None:
                if not _explains(exercise, case, failure.mistake, shrunk, seed):
                    continue  # shown beside an input its mistake does not explain, the hint would read false
                shrunk.mistake = failure.mistake
            elif not failure.setup:
                _diagnose(exercise, case, shrunk, seed, first=failure)
            shrunk.random, shrunk.shrunk = failure.random, True
            return shrunk
    return failure


def failing_uses(uses: Sequence[Exercise], candidate: Candidate, seed: int) -> list[tuple[Report, bool | None]]:
    """The earlier exercises ``uses`` whose student version fails its visible check, each with whether it is named."""
    failing = []
    for used in uses:
        sibling = candidate.sibling(used)
        if sibling is not None:
            report = used.run(sibling, seed=seed)
            if not report.passed:
                failing.append((report, candidate.names(used.name)))
    return failing


def _dims(exercise: Exercise, case: Case, seed: int) -> Dims:
    """The sizes ``case`` is checked at under ``seed``."""
    return case.dims(torch.Generator().manual_seed(seed)) if callable(case.dims) else case.dims or exercise.shapes[-1]


def _size(dims: Dims, sizes: set[str]) -> int:
    """The product of the sizes (``sizes``: their keys) in ``dims``: how large an input is."""
    return math.prod(dims[k] for k in sizes if k in dims) if dims else 0


def _explains(exercise: Exercise, case: Case, mistake: Mistake, failure: Failure, seed: int) -> bool:
    """Does the catalogued ``mistake`` give the student's outcome on ``failure``'s input too?"""
    outcome = outcome_of(mistake, exercise, case, failure, seed)
    return outcome is not None and same(outcome, failure.got, tolerance(exercise, case))


def _random_where_the_reference_is_not(exercise: Exercise, case: Case, candidate: Candidate, failure: Failure,
                                       seed: int) -> bool:
    """Does the student's output change with the call's random numbers where the reference's does not (dropout)?"""
    other = seed + 1
    reference = reference_of(exercise, failure.dims, case.dtype, seed)
    expected = evaluate(lambda: reference, failure.call, grad=False, seed=other, parameters=module_parameters)
    if not same(expected, failure.expected, tolerance(exercise, case)):
        return False
    try:
        again = candidate.evaluate(exercise, replace(case, grad=False), failure.call, failure.dims, other,
                                   failure.weights)
    except CheckFailed:
        return False
    return again.error is None and not same(again, failure.got, tolerance(exercise, case))


def _diagnose(exercise: Exercise, case: Case, failure: Failure, seed: int, first: Failure | None = None,
              candidate: Candidate | None = None) -> None:
    """Name the catalogued mistake whose outcome on the failing input is the student's; several are told apart
    on other inputs, else the first listed wins. ``first`` (a larger input that failed first with no mistake
    named): there a mistake is named only if ``first``'s failure says more than values (`_failure_kind`) and
    the mistake fails it in the same kind, since unrelated mistakes often agree on a tiny input."""
    kind = None if first is None else _failure_kind(first.expected, first.got)
    if first is not None and kind is None:  # wrong values alone on the first input: nothing to name here
        return
    found = []
    for mistake in exercise.mistakes:
        broken = outcome_of(mistake, exercise, case, failure, seed)
        # A mistake that is right on this input explains nothing.
        if broken is None or not same(broken, failure.got, tolerance(exercise, case)) \
                or same(broken, failure.expected, tolerance(exercise, case)):
            continue
        if first is not None:
            there = outcome_of(mistake, exercise, case, first, seed)
            if there is None or _failure_kind(first.expected, there) != kind:
                continue
        found.append(mistake)
    if len(found) > 1 and failure.got.error is None and candidate is not None:
        found = _told_apart(exercise, case, candidate, failure, found, seed)
    # An exception that several mistakes raise alike (the check's own "use the cache" error, say) names none of them.
    if len(found) == 1 or (found and failure.got.error is None):
        failure.mistake = found[0]


def _told_apart(exercise: Exercise, case: Case, candidate: Candidate, failure: Failure, tied: list[Mistake],
                seed: int, tries: int = 3) -> list[Mistake]:
    """The ``tied`` mistakes that also give the student's outcome on other inputs: of the same case and sizes,
    then of the exercise's other cases, where the student's code may pass (two mistakes can agree on every input
    of one case: a sequence that ends at once decodes alike whichever token is fed)."""
    others = [(case, failure.dims, other) for other in range(seed + 1, seed + 1 + tries)]
    others += [(c, _dims(exercise, c, seed), seed) for c in (*exercise.visible, *exercise.hidden) if c is not case]
    for where, dims, other in others:
        again = attempt(exercise, where, candidate, dims, other) or passed(exercise, where, dims, other)
        if again.setup or again.got.error is not None:
            continue
        tied = [m for m in tied if _explains(exercise, where, m, again, other)] or tied
        if len(tied) == 1:
            break
    return tied


def _failure_kind(expected: Outcome, got: Outcome) -> str | None:
    """What ``got``'s failure is where that says more than values: its exception, "shape" or "non-finite" (NaN or
    inf where ``expected`` is finite); None for wrong finite values."""
    if got.error is not None:
        return got.error_type
    pairs = list(zip(flatten(expected.output), flatten(got.output)))
    if any(isinstance(e, torch.Tensor) and isinstance(g, torch.Tensor) and e.shape != g.shape for e, g in pairs):
        return "shape"
    for e, g in pairs:  # the shapes agree here
        if isinstance(e, torch.Tensor) and isinstance(g, torch.Tensor) and e.device == g.device and not e.is_meta \
                and e.is_floating_point() and g.is_floating_point() and bool((e.isfinite() & ~g.isfinite()).any()):
            return "non-finite"
    return None
