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
``Exercise.run(candidate, hidden=True)``, which returns a `Report` (see
`tests/exercise_proofs.py`). Writing a chapter's exercises: see ``autograde/README.md``.
"""
from __future__ import annotations

import contextlib
import functools
import math
import random
import sys
import time
import types
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from . import wire
from .adapters import AS_BUILT, TRAINING, Dims, FunctionAdapter, ModuleAdapter
from .building import build, module_parameters
from .comparison import Tolerance, compare, error_hint, same
from .delegation import forbidden_ops, named
from .display import indent, show, show_named
from .evaluation import CheckFailed, Outcome, evaluate, flatten
from .exercises import exercises_of
from .inputs import Call, randn, random_dims
from .messages import N_, _

__all__ = [
    "Call", "Case", "Mistake", "Exercise", "ModuleAdapter", "FunctionAdapter", "CheckFailed", "Report",
    "Candidate", "LocalCandidate", "check", "get_exercise", "one_thread", "passed_line", "randn", "random_dims",
]

FIX_PREFIX = N_("How to fix it: ")
"""Starts the line of a failure message that holds a recognised mistake's fix (`Mistake.fix`), in English: the
message's own language has ``_(FIX_PREFIX)`` (`autograde.messages`)."""
MISTAKE_PREFIX = N_("Likely mistake — ")
"""Starts the line of a failure message that names a recognised mistake and its hint (in English; see above)."""



# --------------------------------------------------------------------------- specs

@dataclass(frozen=True)
class Mistake:
    """A common mistake: its name, a broken implementation that makes it, the hint that says what
    is wrong and why, and (optionally) how to fix it in code, which a student sees only when the
    same mistake fails again (or behind a toggle on the feedback page)."""

    name: str
    impl: Callable
    hint: str
    fix: str = ""


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
        tolerance: (rtol, atol) for this case instead of the exercise's, where the dtype itself
            cannot tell the right answers apart any closer (a large mean in float32).
    """

    label: str
    dims: Dims | Callable[[torch.Generator], Dims] | None = None
    dtype: torch.dtype = torch.float32
    grad: bool = False
    inputs: Callable[[torch.Generator, Dims, torch.dtype], Call] | None = None
    tolerance: Tolerance | None = None


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
        forbidden: PyTorch functions/classes that would do the exercise: their operators are watched
            (a flag, `autograde.delegation`); tfm_ref's reference is withheld while grading.
        allowed: tfm_ref functions the student may call (helpers from earlier exercises).
        arg_names: names shown for positional arguments in failure messages.
        adapter: `FunctionAdapter()` (default) or a `ModuleAdapter`.
        atol, rtol: override the dtype's tolerance.
        key: the id in ``check("chapter.key", ...)`` when two exercises build the same
            function (e.g. attention, then attention with a mask); defaults to ``name``.
        uses: earlier exercises of the chapter whose function the student's solution calls;
            when this check fails and one of those fails its own check, the message says so.
        output_names: what each item of a tuple output is, in messages (``("output", "weights")``).
        offsets: keys of ``shapes`` that place the input rather than size it (``O``, the positions
            already decoded): shrinking sets them too, but an offset of 0 is not a small input.
        input_note: how the shown input reaches the student's function, where the check calls it
            through a wrapper (train_step, once per stacked batch).
        withheld: tfm_ref objects that compute the exercise whole besides its reference (a training loop for
            a training step): the sandbox lacks them while grading (`autograde.sandbox_tree`).
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
    def tolerance(self) -> Tolerance:
        return (self.rtol, self.atol)

    @property
    def ladder_keys(self) -> set[str]:
        """The keys of ``shapes``: the sizes (and offsets) an input is shrunk along; a case's other keys are flags."""
        return {k for shape in self.shapes for k in shape}

    def run(self, candidate: Callable | Candidate, hidden: bool = False, *, seed: int | None = None,
            reveal_fix: bool = True) -> Report:
        """Run the visible (or visible + hidden) cases; never raises for a wrong answer.

        ``candidate`` is the student's function or class (run here), or a `Candidate` that runs it
        elsewhere. ``reveal_fix=False`` keeps a recognised mistake's fix out of the message (a
        student's first failure in their own kernel).
        """
        if not isinstance(candidate, Candidate):
            candidate = LocalCandidate(candidate)
        seed = random.SystemRandom().randrange(2**31) if seed is None else seed
        with one_thread():
            return self._run(candidate, hidden, seed, reveal_fix)

    def _run(self, candidate: Candidate, hidden: bool, seed: int, reveal_fix: bool) -> Report:
        cases = [*self.visible, *self.hidden] if hidden else list(self.visible)
        started = time.perf_counter()
        for index, case in enumerate(cases):
            failure = _run_case(self, case, candidate, seed + 7919 * index)
            if failure is not None:
                failing_uses = [] if failure.stub else _failing_uses(self.uses, candidate, seed)
                message = failure.message(self, case, seed, hidden, reveal_fix, failing_uses)
                return Report(self.name, False, failure.mistake, message, len(cases),
                              delegated=tuple(candidate.delegated), fix_shown=bool(reveal_fix and failure.fix))
        return Report(self.name, True, None, "", len(cases), time.perf_counter() - started,
                      delegated=tuple(candidate.delegated))

    def check(self, candidate: Callable, hidden: bool = False) -> Report:
        """`run`, raising `CheckFailed` with the diagnosis on failure; prints a line on success.

        A recognised mistake's fix is shown the second time the same mistake fails in this process.
        """
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


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """PyTorch on one thread while a check runs: its tensors are tiny, and on a machine doing other work a pool of
    threads waits at every operation for the one the system has put aside (a failing training check took 19.9 s
    beside other work with two threads, 2.8 s with one)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@dataclass(frozen=True)
class Report:
    """The outcome of a check. ``mistake`` is the catalogued mistake recognised, if any;
    ``delegated``: the exercise's forbidden PyTorch operators that ran in the student's code (a flag)."""

    exercise: str
    passed: bool
    mistake: str | None
    message: str
    n_cases: int
    seconds: float = 0.0
    delegated: tuple[str, ...] = ()
    fix_shown: bool = False


_FAILED_BEFORE: set[tuple[str, str]] = set()
"""(exercise key, mistake) pairs that already failed in this process: their fix is shown next time."""


def delegation_note(report: Report) -> str:
    """What a check says when the student's code ran an operator that does the exercise (it still counts)."""
    return _("⚠ {exercise}: your code ran PyTorch's {operators}, which does this exercise for you. It passes, but "
             "grading flags it for your instructor to read: write the computation yourself.").format(
        exercise=report.exercise, operators=", ".join(report.delegated))


def passed_line(report: Report, hidden: bool) -> str:
    if hidden:
        line = (_("✓ {exercise}: {n} visible and hidden check passed ({seconds:.2f} s)") if report.n_cases == 1 else
                _("✓ {exercise}: {n} visible and hidden checks passed ({seconds:.2f} s)"))
    else:
        line = (_("✓ {exercise}: {n} visible check passed ({seconds:.2f} s)") if report.n_cases == 1 else
                _("✓ {exercise}: {n} visible checks passed ({seconds:.2f} s)"))
    return line.format(exercise=report.exercise, n=report.n_cases, seconds=report.seconds)


# --------------------------------------------------------------------------- where the student's code runs

class Candidate:
    """The student's implementation, wherever it runs: `evaluate` gives its `Outcome` on one input;
    `sibling` is the student's implementation of another exercise of the same notebook. ``delegated``
    gathers the forbidden operators its evaluations ran (`autograde.delegation`)."""

    def __init__(self) -> None:
        self.delegated: dict[str, None] = {}

    def evaluate(self, exercise: Exercise, case: Case, call: Call, dims: Dims, seed: int,
                 weights: dict[str, torch.Tensor] | None) -> Outcome:
        raise NotImplementedError

    def sibling(self, exercise: Exercise) -> Candidate | None:
        return None

    def names(self, name: str) -> bool | None:
        """Does the implementation's code name ``name`` (call it, most likely)? None: it cannot be told here."""
        return None


class LocalCandidate(Candidate):
    """The student's function or class (or a mistake, or a reference) in this process."""

    def __init__(self, impl: Callable):
        super().__init__()
        self.impl = impl

    def sibling(self, exercise: Exercise) -> Candidate | None:
        namespace = getattr(self.impl, "__globals__", None)
        if namespace is None:  # a class: the namespace of the module (the notebook) it was defined in
            namespace = vars(sys.modules.get(getattr(self.impl, "__module__", ""), sys))
        other = namespace.get(exercise.name)
        return LocalCandidate(other) if callable(other) and other is not self.impl else None

    def names(self, name: str) -> bool | None:
        """True where the code of the function, or of a method of the class and its own bases, names ``name``;
        None otherwise: the code may still reach it under another name."""
        named = any(name in code.co_names for code in code_of(self.impl))
        return True if named else None

    def evaluate(self, exercise: Exercise, case: Case, call: Call, dims: Dims, seed: int,
                 weights: dict[str, torch.Tensor] | None) -> Outcome:
        plan = exercise.adapter.plan(dims)
        outcome = evaluate(lambda: build(plan, self.impl, weights, case.dtype), call, grad=case.grad, seed=seed,
                           parameters=module_parameters, watch=exercise.forbidden_ops,
                           allowed=exercise.allowed_names)
        self.delegated.update(dict.fromkeys(outcome.delegated))
        try:  # what a graded run could not send back (a NumPy number, a Tensor subclass) fails in a notebook alike
            wire.encode(outcome.output, [], path="your output")
        except wire.WireError as error:
            raise CheckFailed(str(error)) from None
        return outcome


def functions_of(impl: object) -> list[types.FunctionType]:
    """A function itself, or the methods of a class and of its own bases (not PyTorch's or the builtins')."""
    if type(impl) is types.FunctionType:
        return [impl]
    if isinstance(impl, type):
        return [f for klass in impl.__mro__ if not klass.__module__.startswith(("torch", "builtins"))
                for f in vars(klass).values() if type(f) is types.FunctionType]
    return []


def code_of(impl: object) -> list[types.CodeType]:
    """The code objects (nested ones too) of a function, or of the methods of a class and its own bases."""
    found, todo = [], [f.__code__ for f in functions_of(impl)]
    while todo:
        code = todo.pop()
        found.append(code)
        todo += [c for c in code.co_consts if isinstance(c, types.CodeType)]
    return found


def named_objects(function: types.FunctionType) -> list[object]:
    """What a function's code reaches by name: the globals it names (a module's attributes it names too:
    ``tfm_ref.softmax``) and the values its closures hold."""
    found = [cell.cell_contents for cell in function.__closure__ or () if _filled(cell)]
    names = {n for code in code_of(function) for n in code.co_names}
    for name in names:
        value = function.__globals__.get(name)
        found += [getattr(value, n, None) for n in names] if isinstance(value, types.ModuleType) else [value]
    return found


def _filled(cell: types.CellType) -> bool:
    try:
        cell.cell_contents
    except ValueError:  # a closure variable not assigned yet
        return False
    return True


def _refuse_changed_inputs(exercise: Exercise, call: Call, outcome: Outcome) -> None:
    """A right output from code that also spoils its caller's tensors is no pass."""
    if outcome.changed:
        named = call.named(exercise.arg_names)
        changed = _(" and ").join(f"`{named[i][0]}`" for i in outcome.changed)
        raise CheckFailed(_("your code changed its input {names} in place; the caller still needs it as it was. "
                            "Compute into a new tensor (e.g. torch.cat, .clone(), or an out-of-place operation) "
                            "instead of writing into the argument.").format(names=changed))


# --------------------------------------------------------------------------- a case, shrunk and diagnosed

@dataclass
class _Failure:
    problem: str
    dims: Dims
    call: Call
    weights: dict[str, torch.Tensor] | None
    expected: Outcome
    got: Outcome
    gradient: int | None = None  # which gradient differs, when the output matches
    mistake: str | None = None
    hint: str | None = None
    fix: str = ""
    stub: bool = False  # the student's function is the released stub (raises NotImplementedError)
    setup: bool = False  # the student's object could not be built or differentiated: no outputs to show
    random: bool = False  # the student's output changes with the call's random seed, the reference's does not
    shrunk: bool = False  # found on a smaller input than the case's own: the numbers are that input's

    def message(self, exercise: Exercise, case: Case, seed: int, hidden: bool, reveal_fix: bool,
                failing_uses: list[tuple[Report, bool | None]]) -> str:
        """The failure in words, in the language in use (`autograde.messages`)."""
        if self.stub:
            return _("✗ {exercise}: not written yet — it raises NotImplementedError. Delete the line "
                     "`raise NotImplementedError()` and write your code in its place.").format(exercise=exercise.name)
        # what a common exception most often means, where no catalogued mistake says what it means here
        problem = self.problem.rstrip(".") + (error_hint(self.got.error) if self.got.error and not self.hint else "")
        # the case's label names its own input; the values quoted are the smaller one's, shown below
        where = _("on a smaller input (below), ") if self.shrunk else ""
        if hidden and case in exercise.hidden:
            verdict = _("✗ {exercise}: hidden check '{case}' failed — {where}{problem}.")
        else:
            verdict = _("✗ {exercise}: check '{case}' failed — {where}{problem}.")
        lines = [verdict.format(exercise=exercise.name, case=_(case.label), where=where, problem=problem)]
        for report, calls in failing_uses:
            first, *rest = report.message.splitlines()
            named = [line for line in rest if line.startswith(_(MISTAKE_PREFIX))]  # its diagnosis, if it has one
            lines += [(_("Your `{exercise}` from an earlier exercise fails its own check, and this exercise calls it: "
                         "fix it first.") if calls else
                       _("Your `{exercise}` from an earlier exercise fails its own check; if this exercise calls it, "
                         "fix that first.")).format(exercise=report.exercise), indent("\n".join([first, *named]))]
        if self.hint:
            lines.append(_(MISTAKE_PREFIX) + _("{mistake}: {hint}").format(mistake=_(self.mistake), hint=_(self.hint)))
            if self.fix and reveal_fix:
                lines.append(_(FIX_PREFIX) + _(self.fix))  # folded behind a toggle on the feedback page
            elif self.fix:
                # the fix is kept per kernel: a run of nbgrader validate, a new process each time, never shows it
                lines.append(_("(Try again in the notebook; if the same mistake fails again there, the check shows "
                               "how to fix it.)"))
        if self.random and self.dims.get(AS_BUILT):  # the module's own initial values, not its weights loaded
            lines.append(_("Your module, built twice, gives two different outputs on this same input, and the "
                           "reference's does not: its initial values are drawn at random. A new module starts "
                           "where the reference starts (a LayerNorm at γ = 1 and β = 0, say): torch.ones and "
                           "torch.zeros, not torch.rand or torch.randn."))
        elif self.random:
            lines.append(_("Your output changes from one call to the next on this same input, and the reference's "
                           "does not: something random is still on. Dropout, say: the check builds modules in eval "
                           "mode, where `nn.Dropout` does nothing, but `F.dropout(x, p)` drops unless given "
                           "`training=self.training`."))
        if self.dims.get(TRAINING) and self.hint is None and self.got.error is None:
            lines.append(_("This case runs in training mode and compares the outputs exactly: both sides draw the "
                           "same random numbers, so it expects `nn.Dropout` (or `F.dropout(x, p, "
                           "training=self.training)`) with the rate it is given, at the places the notebook gives, in "
                           "the same order. Dropout at another place, with another rate, missing, or written by hand "
                           "with torch.rand draws other numbers."))
        if self.got.trace:
            lines += ["", _("Your code raised:"), indent(self.got.trace)]
        built = exercise.adapter.describe(exercise.name, self.dims) if hasattr(exercise.adapter, "describe") else None
        # every size of the input: the ladder's, and those written in capitals that it lacks (H, the heads, where the
        # ladder has none); not the flags, written in lowercase (pre=1), which the case's label names
        sizes = ", ".join(f"{k}={v}" for k, v in self.dims.items() if k in exercise.ladder_keys or k[:1].isupper())
        floating = any(t.is_floating_point() for t in self.call.tensors()) or self.weights
        details = "; ".join([sizes] + ([str(case.dtype)] if floating else [])
                            + ([_("with gradients")] if case.grad else []))
        lines += ["", _("Smallest failing input ({details}):").format(details=details)]
        if built:
            lines.append(indent(_("built as {module}").format(module=built)))
        if exercise.input_note:
            lines.append(indent(_("({note})").format(note=_(exercise.input_note))))
        lines.append(indent(self.call.describe(exercise.arg_names)))
        if self.gradient is not None:
            name = gradient_names(exercise, self.call, self.weights)[self.gradient]
            expected = self.expected.grads[self.gradient]
            lines += [_("expected gradient of {name}:").format(name=name), indent(show(expected)),
                      _("your gradient of {name}:").format(name=name), indent(show(self.got.grads[self.gradient]))]
        elif self.got.error is None and not self.setup:
            names = [_(n) for n in exercise.output_names]
            lines += [_("expected:"), indent(show_named(self.expected.output, names)),
                      _("got:"), indent(show_named(self.got.output, names))]
        lines.append(_("(random seed {seed})").format(seed=seed))
        return "\n".join(lines)


def _tolerance(exercise: Exercise, case: Case) -> Tolerance:
    return exercise.tolerance if case.tolerance is None else case.tolerance


def gradient_names(exercise: Exercise, call: Call, weights: dict[str, torch.Tensor] | None) -> list[str]:
    """What each compared gradient is with respect to: the floating inputs by name, then the
    module's parameters (sorted by name, as `ModuleAdapter.parameters` gives them)."""
    inputs = [name for name, value in call.named(exercise.arg_names)
              if isinstance(value, torch.Tensor) and value.is_floating_point()]
    return [f"`{n}`" for n in inputs] + [_("the parameter `{name}`").format(name=n) for n in sorted(weights or {})
                                          if (weights[n].is_floating_point())]


def _reference(exercise: Exercise, dims: Dims, dtype: torch.dtype, seed: int) -> Any:
    """The reference function, or its module built (and initialised) under ``seed``."""
    with torch.random.fork_rng(devices=[]):
        torch.default_generator.manual_seed(seed)
        return exercise.adapter.reference(exercise.reference, dims, dtype)


_REMEMBERED: dict[tuple, tuple] = {}
"""What the trusted side computed for (what, exercise, case, sizes, seed): grading a class runs every check with one
seed (`autograde.session`), so the inputs, the reference's outcome and each mistake's are computed once per class."""


def _remembered(what: object, exercise: Exercise, case: Case, dims: Dims, seed: int, compute: Callable[[], Any]) -> Any:
    key = (id(what), id(exercise), id(case), tuple(sorted(dims.items())), seed)
    if key not in _REMEMBERED:
        if len(_REMEMBERED) > 4096:
            _REMEMBERED.clear()
        _REMEMBERED[key] = (compute(), what, exercise, case)  # those kept alive: their ids stay theirs
    return _REMEMBERED[key][0]


def _expected(exercise: Exercise, case: Case, dims: Dims, seed: int) -> tuple[Call, Any, Outcome]:
    """The inputs of ``case`` at ``dims`` under ``seed``, the reference's weights, and its outcome on them."""
    gen = torch.Generator().manual_seed(seed)
    call = (case.inputs or exercise.inputs)(gen, dims, case.dtype)
    reference = _reference(exercise, dims, case.dtype, seed)
    weights = exercise.adapter.weights(reference)
    expected = evaluate(lambda: reference, call, grad=case.grad, seed=seed, parameters=module_parameters)
    if expected.error is not None:
        raise RuntimeError(f"the reference failed on case {case.label!r}: {expected.trace}")
    return call, weights, expected


def _attempt(exercise: Exercise, case: Case, candidate: Candidate, dims: Dims, seed: int) -> _Failure | None:
    call, weights, expected = _remembered(_expected, exercise, case, dims, seed,
                                          lambda: _expected(exercise, case, dims, seed))
    try:
        got = candidate.evaluate(exercise, case, call, dims, seed, weights)
        _refuse_changed_inputs(exercise, call, got)
    except CheckFailed as error:  # the student's object could not be built, or has no gradient path
        return _Failure(str(error), dict(dims), call, weights, expected, Outcome(error_type=CheckFailed.__name__),
                        setup=True)
    problem, gradient = compare(expected, got, _tolerance(exercise, case), gradient_names(exercise, call, weights),
                                exercise.output_names)
    if problem is None:
        return None
    return _Failure(problem, dict(dims), call, weights, expected, got, gradient,
                    stub=got.error_type == NotImplementedError.__name__)


def _run_case(exercise: Exercise, case: Case, candidate: Candidate, seed: int) -> _Failure | None:
    gen = torch.Generator().manual_seed(seed)
    if callable(case.dims):
        dims = case.dims(gen)
    else:
        dims = case.dims or exercise.shapes[-1]
    failure = _attempt(exercise, case, candidate, dims, seed)
    if failure is None:
        return None
    if failure.stub:
        return failure
    # Diagnose on the input that failed, then show the smallest input that still fails in the same way
    # (an exception stays that exception: a mask that does not broadcast is no clue once a smaller input
    # lets it broadcast), with the case's flags (keys the ladder lacks: pre=1 for Pre-Norm, say) kept. A
    # module that cannot be built is shown at the smallest size where it still cannot be.
    if not failure.setup:
        _diagnose(exercise, case, failure, seed, candidate=candidate)
        if failure.hint is None and failure.got.error is None:
            failure.random = _random_where_the_reference_is_not(exercise, case, candidate, failure, seed)
    ladder = exercise.ladder_keys
    flags = {k: v for k, v in dims.items() if k not in ladder}
    sizes = ladder - set(exercise.offsets)
    kind = _failure_kind(failure.expected, failure.got)
    for smaller in exercise.shapes:
        if _size(smaller, sizes) >= _size(dims, sizes):
            break
        shrunk = _attempt(exercise, case, candidate, {**smaller, **flags}, seed)
        if shrunk is not None and shrunk.setup == failure.setup and _failure_kind(shrunk.expected, shrunk.got) == kind:
            if failure.hint is not None:
                if not _explains(exercise, case, failure.mistake, shrunk, seed):
                    continue  # shown beside an input its mistake does not explain, the hint would read false
                shrunk.mistake, shrunk.hint, shrunk.fix = failure.mistake, failure.hint, failure.fix
            elif not failure.setup:
                _diagnose(exercise, case, shrunk, seed, first=failure)
            shrunk.random, shrunk.shrunk = failure.random, True
            return shrunk
    return failure


def _explains(exercise: Exercise, case: Case, name: str, failure: _Failure, seed: int) -> bool:
    """Does the catalogued mistake ``name`` give the student's outcome on ``failure``'s input too?"""
    mistake = next(m for m in exercise.mistakes if m.name == name)
    outcome = _outcome_of(mistake, exercise, case, failure, seed)
    return outcome is not None and same(outcome, failure.got, _tolerance(exercise, case))


def _random_where_the_reference_is_not(exercise: Exercise, case: Case, candidate: Candidate, failure: _Failure,
                                       seed: int) -> bool:
    """Does the student's output on ``failure``'s input change when the call draws other random numbers,
    where the reference's does not (dropout left on, say)?"""
    other = seed + 1
    reference = _reference(exercise, failure.dims, case.dtype, seed)
    expected = evaluate(lambda: reference, failure.call, grad=False, seed=other, parameters=module_parameters)
    if not same(expected, failure.expected, _tolerance(exercise, case)):
        return False
    try:
        again = candidate.evaluate(exercise, replace(case, grad=False), failure.call, failure.dims, other,
                                   failure.weights)
    except CheckFailed:
        return False
    return again.error is None and not same(again, failure.got, _tolerance(exercise, case))


def _failing_uses(uses: Sequence[Exercise], candidate: Candidate, seed: int) -> list[tuple[Report, bool | None]]:
    """Those of the earlier exercises ``uses`` whose student version fails its own visible check, each with
    whether the student's code names it (`Candidate.names`)."""
    failing = []
    for used in uses:
        sibling = candidate.sibling(used)
        if sibling is not None:
            report = used.run(sibling, seed=seed)
            if not report.passed:
                failing.append((report, candidate.names(used.name)))
    return failing


def _size(dims: Dims, sizes: set[str]) -> int:
    """The product of the sizes (``sizes``: their keys) in ``dims``: how large an input is."""
    return math.prod(dims[k] for k in sizes if k in dims) if dims else 0


def _diagnose(exercise: Exercise, case: Case, failure: _Failure, seed: int, first: _Failure | None = None,
              candidate: Candidate | None = None) -> None:
    """Name the catalogued mistake whose output (or exception) on the failing input is the student's.

    Where several give the student's values there, the ``candidate`` is run on other inputs of the
    case to tell them apart (`_told_apart`); failing that, the first in the catalogue is named.

    ``first``: the larger input that failed first, where no mistake gave the student's output. On a
    tiny input unrelated mistakes often give the same values, so a mistake is named here only where
    the student's failure on ``first`` is of a kind that says more than values (`_failure_kind`: an
    exception, or NaN and inf) and the mistake fails ``first`` in the same kind: NaN where a large
    input puts them in other places than the mistake does, say.
    """
    kind = None if first is None else _failure_kind(first.expected, first.got)
    if first is not None and kind is None:  # wrong values alone on the first input: nothing to name here
        return
    found = []
    for mistake in exercise.mistakes:
        broken = _outcome_of(mistake, exercise, case, failure, seed)
        # A mistake that is right on this input explains nothing.
        if broken is None or not same(broken, failure.got, _tolerance(exercise, case)) \
                or same(broken, failure.expected, _tolerance(exercise, case)):
            continue
        if first is not None:
            there = _outcome_of(mistake, exercise, case, first, seed)
            if there is None or _failure_kind(first.expected, there) != kind:
                continue
        found.append(mistake)
    if len(found) > 1 and failure.got.error is None and candidate is not None:
        found = _told_apart(exercise, case, candidate, failure, found, seed)
    # An exception that several mistakes raise alike (the check's own "use the cache" error, say) names none of them.
    if len(found) == 1 or (found and failure.got.error is None):
        mistake = found[0]
        failure.mistake, failure.hint, failure.fix = mistake.name, mistake.hint, mistake.fix


def _told_apart(exercise: Exercise, case: Case, candidate: Candidate, failure: _Failure, tied: list[Mistake],
                seed: int, tries: int = 3) -> list[Mistake]:
    """Those of the ``tied`` mistakes (each gives the student's values on ``failure``'s input) that
    also give them on other inputs of the same case and sizes: an untrained model that repeats its
    token makes "the first position's argmax" and "the newest token alone" decode alike, say."""
    for other in range(seed + 1, seed + 1 + tries):
        again = _attempt(exercise, case, candidate, failure.dims, other)
        if again is None or again.setup or again.got.error is not None:
            continue
        still = [m for m in tied if (outcome := _outcome_of(m, exercise, case, again, other)) is not None
                 and same(outcome, again.got, _tolerance(exercise, case))]
        tied = still or tied
        if len(tied) == 1:
            break
    return tied


def _outcome_of(mistake: Mistake, exercise: Exercise, case: Case, failure: _Failure, seed: int) -> Outcome | None:
    """What the catalogued ``mistake`` gives on ``failure``'s input (that of ``case`` at its sizes under ``seed``);
    None if it cannot be built there."""
    def outcome() -> Outcome | None:
        try:
            return LocalCandidate(mistake.impl).evaluate(exercise, case, failure.call, failure.dims, seed,
                                                         failure.weights)
        except CheckFailed:
            return None
    return _remembered(mistake, exercise, case, failure.dims, seed, outcome)


def _failure_kind(expected: Outcome, got: Outcome) -> str | None:
    """The kind of ``got``'s failure where its kind says more than its values: the exception it raised,
    "shape" (an output of another shape: a smaller input where the shapes happen to agree would hide it),
    or "non-finite" (NaN or inf where ``expected`` is finite); None for wrong finite values."""
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


# --------------------------------------------------------------------------- registry and entry point

def get_exercise(key: str) -> Exercise:
    """``"ch01_attention.softmax"`` → the `Exercise` with key ``softmax`` in
    ``autograde/exercises/ch01_attention.py`` (its ``EXERCISES`` tuple)."""
    chapter, _, name = key.rpartition(".")
    if not chapter:
        raise ValueError(f"an exercise key is 'chapter.name' (e.g. 'ch01_attention.softmax'), got {key!r}")
    exercises = exercises_of(chapter)
    for exercise in exercises:
        if exercise.key == name:
            return exercise
    raise ValueError(f"{chapter} has no exercise {name!r}; it has {[e.key for e in exercises]}")


def _show_failures_plainly() -> None:
    """In IPython (a notebook, `nbgrader validate`), a failed check shows its message alone, not
    a traceback through the grader's own frames."""
    shell = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
    if shell is not None and CheckFailed not in shell.custom_exceptions:
        def show(self, etype, value, tb, tb_offset=None):
            lines = [f"{etype.__name__}: {line}" if i == 0 else line for i, line in enumerate(str(value).splitlines())]
            self._showtraceback(etype, value, lines)  # the error output nbgrader scores and shows
            return lines

        shell.set_custom_exc((CheckFailed,), show)


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
    _show_failures_plainly()
    exercise = get_exercise(key)
    if not callable(candidate):
        raise CheckFailed(_("✗ {exercise}: expected a function or class, got {type}").format(
            exercise=exercise.name, type=type(candidate).__name__))
    _refuse_what_grading_lacks(key.rpartition(".")[0], exercise, candidate)
    exercise.check(candidate, hidden)


def _refuse_what_grading_lacks(assignment: str, exercise: Exercise, candidate: Callable) -> None:
    """Code that uses tfm_ref's withheld answer, or the grader's own code, would pass here and fail when graded,
    where neither is in the sandbox (`autograde.sandbox_tree`): say so now, in the student's own kernel."""
    from .sandbox_tree import origin, withheld

    held = withheld(assignment)
    for used in _objects_used(candidate):
        where = origin(used)
        if where in held:
            raise CheckFailed(_("✗ {exercise}: your code uses tfm_ref's `{name}`, which is what this exercise asks "
                                "you to write (or computes it whole). When {assignment} is graded, tfm_ref has no such "
                                "function: write the computation yourself.").format(
                exercise=exercise.name, name=where[1], assignment=assignment))
        if str(getattr(used, "__module__", "")).startswith("autograde"):
            raise CheckFailed(_("✗ {exercise}: your code uses the grader's own `{name}`, which is not there when your "
                                "notebook is graded: write the computation yourself.").format(
                exercise=exercise.name, name=used.__name__))


def _objects_used(candidate: Callable) -> list[object]:
    """The candidate, what it wraps (a ``functools.partial``), and what its code reaches by name (`named_objects`)."""
    found, impl = [candidate], candidate
    while isinstance(impl, functools.partial):
        impl = impl.func
        found.append(impl)
    found += [value for function in functions_of(impl) for value in named_objects(function)]
    return [f for f in found if f is not None and not isinstance(f, types.ModuleType)]
