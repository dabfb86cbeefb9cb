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
`autograde.testing`).

Writing a chapter's exercises (``autograde/exercises/chNN_slug.py``, found by its name)::

    def make_inputs(gen, dims, dtype):                      # gen: torch.Generator, seeded per case
        return Call(randn(gen, dims["B"], dims["T"], dims["D"], dtype=dtype), dim=-1)

    SOFTMAX = Exercise(
        name="softmax",                                     # the tfm_ref name the student defines
        reference=tfm_ref.softmax,
        inputs=make_inputs,
        shapes=[dict(B=1, T=1, D=2), dict(B=1, T=2, D=3), dict(B=2, T=3, D=5)],  # shrink ladder
        visible=[Case("random logits")],                    # dims default to the last shape
        hidden=[Case("random sizes", dims=random_dims(B=(1, 4), T=(1, 9), D=(1, 17))),
                Case("float64", dtype=torch.float64),
                Case("huge logits", inputs=lambda g, d, t: make_inputs(g, d, t).scaled(1e4)),
                Case("gradients", grad=True)],
        mistakes=[Mistake("no max subtraction", broken_softmax, "exp overflows for large logits: ...")],
        forbidden=[torch.softmax, torch.Tensor.softmax, F.softmax],   # tfm_ref is always forbidden
    )
    EXERCISES = (SOFTMAX, ...)

For a module (class) exercise give ``adapter=ModuleAdapter(lambda dims: dict(d_model=dims["D"], ...))``:
the reference module is built from a seeded RNG and its weights are loaded into the student's
module, so parameter names must be the tfm_ref ones (``q_proj`` …).

Inputs are a `Call` (positional and keyword arguments). Outputs may be tensors, tuples/lists
of tensors, or Python numbers; tensors are compared with ``allclose`` at a tolerance set by
dtype (override with ``atol``/``rtol``), booleans and integers exactly.
"""
from __future__ import annotations

import dataclasses
import importlib
import math
import random
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from .integrity import Forbid, ForbiddenCall, Snapshot

__all__ = [
    "Call", "Case", "Mistake", "Exercise", "ModuleAdapter", "CheckFailed", "Report", "ForbiddenCall",
    "check", "get_exercise", "randn", "random_dims", "SNAPSHOT",
]

Dims = Mapping[str, int]

# Captured at import, before any student code runs: rebinding torch.allclose later changes nothing.
_allclose, _isclose, _equal, _isfinite = torch.allclose, torch.isclose, torch.equal, torch.isfinite
_as_tensor, _fork_rng, _manual_seed = torch.as_tensor, torch.random.fork_rng, torch.manual_seed

_TOLERANCE = {  # (rtol, atol) by dtype; tfm_ref computes softmax in float32 even for float64 inputs
    torch.float64: (1e-5, 1e-6),
    torch.float32: (1e-4, 1e-5),
    torch.float16: (1e-2, 1e-3),
    torch.bfloat16: (2e-2, 1e-2),
}


# --------------------------------------------------------------------------- inputs

@dataclass(frozen=True)
class Call:
    """The arguments of one call: ``Call(x, dim=-1)`` means ``fn(x, dim=-1)``."""

    args: tuple
    kwargs: dict

    def __init__(self, *args: Any, **kwargs: Any):
        object.__setattr__(self, "args", args)
        object.__setattr__(self, "kwargs", kwargs)

    def map_tensors(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> Call:
        """A new call with ``fn`` applied to every floating-point tensor argument."""
        def apply(value: Any) -> Any:
            return fn(value) if isinstance(value, torch.Tensor) and value.is_floating_point() else value
        return Call(*map(apply, self.args), **{k: apply(v) for k, v in self.kwargs.items()})

    def scaled(self, factor: float) -> Call:
        """Every floating-point tensor argument times ``factor`` (e.g. huge logits)."""
        return self.map_tensors(lambda t: t * factor)

    def clone(self, requires_grad: bool = False) -> Call:
        """Fresh copies, so that in-place changes by one implementation do not reach another."""
        def copy(value: Any) -> Any:
            if isinstance(value, torch.Tensor):
                value = value.detach().clone()
                if requires_grad and value.is_floating_point():
                    value.requires_grad_(True)
            return value
        return Call(*map(copy, self.args), **{k: copy(v) for k, v in self.kwargs.items()})

    def tensors(self) -> list[torch.Tensor]:
        return [v for v in (*self.args, *self.kwargs.values()) if isinstance(v, torch.Tensor)]

    def describe(self, names: Sequence[str] = ()) -> str:
        lines = []
        for i, value in enumerate(self.args):
            lines.append(f"{names[i] if i < len(names) else f'arg{i}'} = {_show(value)}")
        lines += [f"{k} = {_show(v)}" for k, v in self.kwargs.items()]
        return "\n".join(lines)


def randn(gen: torch.Generator, *shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Standard normal tensor drawn from ``gen`` (float32 draws, cast, so dtypes agree in value)."""
    return torch.randn(*shape, generator=gen).to(dtype)


def random_dims(**ranges: tuple[int, int]) -> Callable[[torch.Generator], dict[str, int]]:
    """Random sizes for a hidden case: ``random_dims(B=(1, 4), T=(1, 9))``, bounds inclusive."""
    def draw(gen: torch.Generator) -> dict[str, int]:
        return {k: int(torch.randint(lo, hi + 1, (1,), generator=gen)) for k, (lo, hi) in ranges.items()}
    return draw


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


class FunctionAdapter:
    """The student's object is the function itself."""

    def reference(self, reference: Callable, dims: Dims, dtype: torch.dtype) -> Callable:
        return reference

    def candidate(self, candidate: Callable, dims: Dims, reference: Callable, dtype: torch.dtype) -> Callable:
        return candidate

    def parameters(self, built: Callable) -> list[torch.Tensor]:
        return []


@dataclass(frozen=True)
class ModuleAdapter:
    """The student's object is an ``nn.Module`` class built with ``kwargs(dims)``.

    The reference is built from a seeded RNG; its weights are loaded into the candidate, so
    both compute with the same parameters. The candidate is built under the integrity guard.
    """

    kwargs: Callable[[Dims], dict]

    def reference(self, reference: type, dims: Dims, dtype: torch.dtype) -> torch.nn.Module:
        return reference(**self.kwargs(dims)).to(dtype).eval()  # parameters in the case's dtype

    def candidate(self, candidate: type, dims: Dims, reference: torch.nn.Module, dtype: torch.dtype) -> torch.nn.Module:
        module = candidate(**self.kwargs(dims))
        if not isinstance(module, torch.nn.Module):
            raise TypeError(f"{candidate!r} should build an nn.Module, got {type(module).__name__}")
        expected, got = set(reference.state_dict()), set(module.state_dict())
        if expected != got:
            raise CheckFailed(
                "your module's parameters are not named as in tfm_ref, so the reference weights "
                f"cannot be loaded into it.\n  missing: {sorted(expected - got)}\n  unexpected: {sorted(got - expected)}"
            )
        module.to(dtype).load_state_dict(reference.state_dict())
        return module.eval()

    def parameters(self, built: torch.nn.Module) -> list[torch.Tensor]:
        return [p for _, p in sorted(built.named_parameters())]


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

    def run(self, candidate: Callable, hidden: bool = False, *, guarded: bool = True,
            seed: int | None = None) -> Report:
        """Run the visible (or visible + hidden) cases; never raises for a wrong answer.

        ``guarded=False`` lets the candidate call tfm_ref (pytest runs the reference and the
        catalogued mistakes as candidates).
        """
        seed = random.SystemRandom().randrange(2**31) if seed is None else seed
        cases = [*self.visible, *self.hidden] if hidden else list(self.visible)
        started = time.perf_counter()
        for index, case in enumerate(cases):
            failure = _run_case(self, case, candidate, seed + 7919 * index, guarded)
            if failure is not None:
                return Report(self.name, False, failure.mistake, failure.message(self, case, seed, hidden), len(cases))
        return Report(self.name, True, None, "", len(cases), time.perf_counter() - started)

    def check(self, candidate: Callable, hidden: bool = False) -> Report:
        """`run`, raising `CheckFailed` with the diagnosis on failure; prints a line on success."""
        report = self.run(candidate, hidden)
        if not report.passed:
            raise CheckFailed(report.message)
        kind = "visible and hidden" if hidden else "visible"
        plural = "s" if report.n_cases != 1 else ""
        print(f"✓ {self.name}: {report.n_cases} {kind} check{plural} passed ({report.seconds:.2f} s)")
        return report


@dataclass(frozen=True)
class Report:
    """The outcome of a check. ``mistake`` is the catalogued mistake recognised, if any."""

    exercise: str
    passed: bool
    mistake: str | None
    message: str
    n_cases: int
    seconds: float = 0.0


class CheckFailed(AssertionError):
    """A check failed; the message names the likely mistake and shows the smallest failing input."""

    def __str__(self) -> str:  # nbgrader shows str(); keep it the whole diagnosis
        return self.args[0] if self.args else ""


# --------------------------------------------------------------------------- running

@dataclass
class _Result:
    """What one implementation gave on one input: output and gradients, or the exception."""

    output: Any = None
    grads: list[torch.Tensor | None] = dataclasses.field(default_factory=list)
    error: BaseException | None = None
    trace: str = ""


def _evaluate(exercise: Exercise, impl: Callable, role: str, call: Call, dims: Dims, case: Case,
              seed: int, guarded: bool) -> _Result:
    """Build (for modules) and call ``impl`` on a copy of ``call``; with ``grad``, backpropagate
    a seeded random upstream gradient. ``role`` is reference / candidate / mistake."""
    adapter = exercise.adapter
    inputs = call.clone(requires_grad=case.grad)
    result = _Result()
    try:
        with _fork_rng(devices=[]):
            _manual_seed(seed)
            reference = adapter.reference(exercise.reference, dims, case.dtype)
            if role == "reference":
                built = reference
            elif guarded:
                with Forbid(exercise.forbidden, allowed=exercise.allowed):
                    built = adapter.candidate(impl, dims, reference, case.dtype)
            else:
                built = adapter.candidate(impl, dims, reference, case.dtype)
        if guarded and role == "candidate":
            with Forbid(exercise.forbidden, allowed=exercise.allowed):
                output = built(*inputs.args, **inputs.kwargs)
        else:
            output = built(*inputs.args, **inputs.kwargs)
        result.output = _detach(output)
        if case.grad:
            leaves = [t for t in inputs.tensors() if t.requires_grad] + adapter.parameters(built)
            outs = [o for o in _flatten(output) if isinstance(o, torch.Tensor) and o.requires_grad]
            if not outs:
                raise CheckFailed("the output does not depend on the inputs through autograd "
                                  "(was it computed with .detach(), .item(), numpy or torch.no_grad?)")
            gen = torch.Generator().manual_seed(seed + 1)
            upstream = [torch.randn(o.shape, generator=gen).to(o.dtype) for o in outs]
            grads = torch.autograd.grad(outs, leaves, upstream, allow_unused=True)
            result.grads = [None if g is None else g.detach() for g in grads]
    except CheckFailed:
        raise
    except Exception as error:  # the student's code may raise anything; it is reported, not fatal
        result.error = error
        result.trace = _student_traceback(error)
    return result


def _flatten(value: Any) -> list[Any]:
    if isinstance(value, (tuple, list)):
        return [x for v in value for x in _flatten(v)]
    return [value]


def _detach(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach()
    if isinstance(value, (tuple, list)):
        return type(value)(_detach(v) for v in value)
    return value


def _student_traceback(error: BaseException) -> str:
    """The traceback frames outside the grader and torch: the student's own lines."""
    frames = [f for f in traceback.extract_tb(error.__traceback__)
              if "/autograde/" not in f.filename and "/torch/" not in f.filename]
    lines = traceback.format_list(frames) + traceback.format_exception_only(type(error), error)
    return "".join(lines).rstrip()


# --------------------------------------------------------------------------- comparing

def _tolerance(exercise: Exercise, dtype: torch.dtype) -> tuple[float, float]:
    rtol, atol = _TOLERANCE.get(dtype, (1e-4, 1e-5))
    return (exercise.rtol if exercise.rtol is not None else rtol, exercise.atol if exercise.atol is not None else atol)


def _difference(exercise: Exercise, expected: Any, got: Any, what: str = "output") -> str | None:
    """None when ``got`` matches ``expected``; otherwise what differs, in words."""
    if isinstance(expected, torch.Tensor):
        if not isinstance(got, torch.Tensor):
            return f"the {what} should be a tensor, got {type(got).__name__}"
        if tuple(got.shape) != tuple(expected.shape):
            return f"the {what} has shape {tuple(got.shape)}, expected {tuple(expected.shape)}"
        if got.dtype != expected.dtype:
            return (f"the {what} has dtype {got.dtype}, expected {expected.dtype} "
                    "(keep the dtype of the inputs; do not hard-code float32)")
        if expected.dtype == torch.bool or not expected.is_floating_point():
            return None if _equal(got, expected) else f"the {what} differs (exact comparison)"
        rtol, atol = _tolerance(exercise, expected.dtype)
        if _allclose(got.double(), expected.double(), rtol=rtol, atol=atol, equal_nan=False):
            return None
        if not bool(_isfinite(got).all()) and bool(_isfinite(expected).all()):
            return (f"the {what} contains NaN or inf where the reference is finite "
                    "(overflow in exp? a row with every key masked?)")
        diff = (got.double() - expected.double()).abs().nan_to_num(math.inf)
        where = tuple(int(i) for i in torch.unravel_index(diff.argmax(), diff.shape)) if diff.dim() else ()
        return f"the {what} differs: largest difference {float(diff.max()):.3g} at index {where}"
    if isinstance(expected, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(got) != len(expected):
            return f"the {what} should be a {type(expected).__name__} of {len(expected)} items, got {_brief(got)}"
        for i, (e, g) in enumerate(zip(expected, got)):
            problem = _difference(exercise, e, g, f"{what}[{i}]")
            if problem:
                return problem
        return None
    if isinstance(expected, float) and isinstance(got, (int, float)):
        return None if math.isclose(got, expected, rel_tol=1e-6, abs_tol=1e-9) else f"the {what} is {got}, expected {expected}"
    return None if got == expected else f"the {what} is {_brief(got)}, expected {_brief(expected)}"


def _compare(exercise: Exercise, expected: _Result, got: _Result) -> str | None:
    if got.error is not None:
        return f"your code raised {type(got.error).__name__}: {got.error}"
    problem = _difference(exercise, expected.output, got.output)
    if problem is None and expected.grads:
        for i, (e, g) in enumerate(zip(expected.grads, got.grads)):
            if e is None and g is None:
                continue
            if g is None:
                return f"gradient {i} is missing (the output does not depend on that input)"
            problem = _difference(exercise, torch.zeros_like(g) if e is None else e, g, f"gradient of input {i}")
            if problem:
                return problem + " (the forward output matches: look for a non-differentiable step or a detach)"
    return problem


def _same(exercise: Exercise, a: _Result, b: _Result) -> bool:
    """Does the student's result match a mistake's (NaN equal to NaN)?"""
    if a.error is not None or b.error is not None:
        return False
    outputs = [(a.output, b.output)] + list(zip(a.grads, b.grads))
    for x, y in outputs:
        xs, ys = _flatten(x), _flatten(y)
        if len(xs) != len(ys):
            return False
        for u, v in zip(xs, ys):
            if isinstance(u, torch.Tensor) and isinstance(v, torch.Tensor):
                if u.shape != v.shape or u.dtype != v.dtype:
                    return False
                if u.is_floating_point():
                    rtol, atol = _tolerance(exercise, u.dtype)
                    if not _allclose(u.double(), v.double(), rtol=rtol, atol=atol, equal_nan=True):
                        return False
                elif not _equal(u, v):
                    return False
            elif type(u) is not type(v) or u != v:
                return False
    return True


# --------------------------------------------------------------------------- a case, shrunk and diagnosed

@dataclass
class _Failure:
    problem: str
    dims: Dims
    call: Call
    expected: _Result
    got: _Result
    mistake: str | None = None
    hint: str | None = None

    def message(self, exercise: Exercise, case: Case, seed: int, hidden: bool) -> str:
        kind = "hidden check" if hidden and case in exercise.hidden else "check"
        lines = [f"✗ {exercise.name}: {kind} '{case.label}' failed — {self.problem.rstrip('.')}."]
        if self.hint:
            lines.append(f"Likely mistake — {self.mistake}: {self.hint}")
        if self.got.trace:
            lines += ["", "Your code raised:", _indent(self.got.trace)]
        sizes = ", ".join(f"{k}={v}" for k, v in self.dims.items())
        lines += ["", f"Smallest failing input ({sizes}; {case.dtype}{'; with gradients' if case.grad else ''}):",
                  _indent(self.call.describe(exercise.arg_names))]
        if self.got.error is None:
            lines += ["expected:", _indent(_show(self.expected.output)), "got:", _indent(_show(self.got.output))]
        lines.append(f"(random seed {seed})")
        return "\n".join(lines)


def _attempt(exercise: Exercise, case: Case, candidate: Callable, dims: Dims, seed: int,
             guarded: bool) -> _Failure | None:
    gen = torch.Generator().manual_seed(seed)
    call = (case.inputs or exercise.inputs)(gen, dims, case.dtype)
    expected = _evaluate(exercise, exercise.reference, "reference", call, dims, case, seed, False)
    if expected.error is not None:
        raise RuntimeError(f"the reference failed on case {case.label!r}: {expected.trace}")
    got = _evaluate(exercise, candidate, "candidate", call, dims, case, seed, guarded)
    problem = _compare(exercise, expected, got)
    return None if problem is None else _Failure(problem, dict(dims), call, expected, got)


def _run_case(exercise: Exercise, case: Case, candidate: Callable, seed: int, guarded: bool) -> _Failure | None:
    gen = torch.Generator().manual_seed(seed)
    if callable(case.dims):
        dims = case.dims(gen)
    else:
        dims = case.dims or exercise.shapes[-1]
    failure = _attempt(exercise, case, candidate, dims, seed, guarded)
    if failure is None:
        return None
    if isinstance(failure.got.error, ForbiddenCall):
        return failure
    # Diagnose on the input that failed, then show the smallest input that still fails.
    failure.mistake, failure.hint = _diagnose(exercise, case, failure, seed)
    for smaller in exercise.shapes:
        if _size(smaller) >= _size(dims):
            break
        shrunk = _attempt(exercise, case, candidate, smaller, seed, guarded)
        if shrunk is not None:
            shrunk.mistake, shrunk.hint = failure.mistake, failure.hint
            if failure.hint is None:
                shrunk.mistake, shrunk.hint = _diagnose(exercise, case, shrunk, seed)
            return shrunk
    return failure


def _size(dims: Dims) -> int:
    return math.prod(dims.values()) if dims else 0


def _diagnose(exercise: Exercise, case: Case, failure: _Failure, seed: int) -> tuple[str | None, str | None]:
    for mistake in exercise.mistakes:
        broken = _evaluate(exercise, mistake.impl, "mistake", failure.call, failure.dims, case, seed, False)
        # A mistake that is right on this input explains nothing.
        if _same(exercise, broken, failure.got) and not _same(exercise, broken, failure.expected):
            return mistake.name, mistake.hint
    return None, None


# --------------------------------------------------------------------------- display

def _show(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        if value.numel() > 64:
            return f"tensor of shape {tuple(value.shape)}, dtype {value.dtype} (too large to print)"
        with _printoptions():
            return repr(value)
    if isinstance(value, (tuple, list)):
        return "(\n" + ",\n".join(_indent(_show(v)) for v in value) + "\n)"
    return repr(value)


def _printoptions():
    return torch._tensor_str.printoptions(precision=4, sci_mode=False, linewidth=100)


def _brief(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"tensor of shape {tuple(value.shape)}"
    text = repr(value)
    return text if len(text) < 80 else text[:77] + "..."


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())


# --------------------------------------------------------------------------- registry and entry point

SNAPSHOT = Snapshot()
"""The protected namespaces as they were when the grader was imported (before student code)."""


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
    SNAPSHOT.restore()  # undo any patching of torch, numpy, tfm_ref or autograde by a student cell
    exercise = get_exercise(key)
    if not callable(candidate):
        raise CheckFailed(f"✗ {exercise.name}: expected a function or class, got {type(candidate).__name__}")
    exercise.check(candidate, hidden)
