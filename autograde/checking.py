"""``check(key, candidate)``: what a notebook's test cell calls, in the student's own kernel::

    check("ch01_attention.softmax", softmax)                # visible: a few seconds at most
    check("ch01_attention.softmax", softmax, hidden=True)   # random shapes, dtypes, edge cases, gradients

It raises `CheckFailed` (an ``AssertionError``: nbgrader scores the cell 0) naming the likely mistake, or
prints one line. When a class is graded, test cells never run: the grader reads their calls (`autograde.testcells`).
"""
from __future__ import annotations

import functools
import sys
import types
from collections.abc import Callable

from notebook_sandbox.evaluation import CheckFailed

from .code_names import functions_of, named_objects
from .messages import _
from .spec import Exercise, get_exercise

__all__ = ["check", "CheckFailed"]


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
    """Check a student's function or class against tfm_ref (what test cells call); ``hidden`` adds the hidden cases.
    Prints one line on success; raises `CheckFailed` naming the likely mistake and the smallest failing input."""
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
