"""Running one implementation on one input: its output and gradients, or what it raised.

The grader runs the reference and the catalogued mistakes with this code, and the sandboxed
runner (`autograde.runner`) runs the student's code with the very same code, so both sides
build, call and differentiate in the same way. Gradients are those of ``sum(out · r)`` for a
random upstream ``r`` drawn from the case's seed, with respect to the floating inputs and the
module's parameters (sorted by name).
"""
from __future__ import annotations

import contextlib
import sys
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from .inputs import Call
from .integrity import type_name

__all__ = ["CheckFailed", "Outcome", "evaluate", "flatten", "describe_error", "plain_error"]

# Captured at import, before any student code runs in this process. Only the CPU generator is
# seeded: torch.manual_seed also queues seeds for every accelerator, recording a stack each time.
_fork_rng, _manual_seed, _grad = torch.random.fork_rng, torch.default_generator.manual_seed, torch.autograd.grad


class CheckFailed(AssertionError):
    """A check failed; the message names the likely mistake and shows the smallest failing input."""

    def __str__(self) -> str:  # nbgrader shows str(); keep it the whole diagnosis
        return self.args[0] if self.args else ""


@dataclass
class Outcome:
    """What one implementation gave on one input: output and gradients, or the exception."""

    output: Any = None
    grads: list[torch.Tensor | None] = field(default_factory=list)
    error: str | None = None  # "ValueError: the message"
    error_type: str | None = None
    trace: str = ""  # the traceback frames of the student's own code
    changed: list[int] = field(default_factory=list)  # the arguments the call changed in place (`Call.changed_from`)
    sealed: Any = None  # what ``seal`` made of it under the guard (the runner: its bytes, which nothing can change)
    # what the student's code touched (its inputs, its object, its output; a raised exception, whose frames hold them),
    # kept alive with the outcome: the runner drops it once the reply is sent, so no finalizer of theirs runs before
    held: list = field(default_factory=list, repr=False, compare=False)


def evaluate(build: Callable[[], Any], call: Call, *, grad: bool, seed: int,
             parameters: Callable[[Any], list[torch.Tensor]] = lambda built: [],
             guard: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext,
             seal: Callable[[Outcome], Any] | None = None) -> Outcome:
    """Build the object under test and call it on a copy of ``call`` (each under a fixed RNG seed), and,
    with ``grad``, backpropagate a seeded random upstream gradient. ``guard`` is entered around
    the build, the call, the backward with the outcome made of it and ``seal``ed (its ``sealed``), and the
    reading of an exception (the integrity guard, for a student's code). The runner seals the outcome into
    bytes: after the guard, code the student left behind (a finalizer as the inputs are freed, a torch mode, a
    kernel registered with torch.library) runs unwatched, and the tensors it could reach are read no more.

    Raises:
        CheckFailed: the output does not depend on the inputs through autograd (with ``grad``).
    """
    try:
        with guard():  # copying runs PyTorch's kernels, which a cell may have replaced (torch.library)
            inputs = call.clone(requires_grad=grad)
        with _fork_rng(devices=[]):
            _manual_seed(seed)
            with guard():
                built = build()
            _manual_seed(seed + 2)  # the call draws the same random numbers on both sides (dropout)
            with guard():
                output = built(*inputs.args, **inputs.kwargs)
        with guard():  # a backward of the student's own (an autograd.Function) is their code too
            grads = _gradients(output, inputs, parameters(built), seed) if grad else []
            outcome = Outcome(output=_detach(output), grads=grads, changed=inputs.changed_from(call))
            if seal is not None:
                outcome.sealed = seal(outcome)
        outcome.held = [inputs, built, output]
        return outcome
    except CheckFailed:
        raise
    except BaseException as error:  # the student's code may raise anything (SystemExit too); reported, not fatal
        outcome = _failure(error, guard)
        outcome.held = [error]
        return outcome


def _failure(error: BaseException, guard: Callable[[], contextlib.AbstractContextManager]) -> Outcome:
    """The outcome of code that raised ``error``. Its message and traceback are read under the guard: the
    exception's ``__str__`` is the student's code, and so is what a notebook's traceback consults. The outcome is
    made afterwards, so that nothing run here can reach it."""
    try:
        with guard():
            text, trace = describe_error(error), _student_traceback(error)
    except BaseException as refused:  # what the message's code did was refused, or raised: that is the outcome
        error, text, trace = refused, plain_error(refused), ""
    return Outcome(error=text, error_type=type_name(type(error)), trace=trace)


def _gradients(output: Any, inputs: Call, parameters: list[torch.Tensor], seed: int) -> list[torch.Tensor | None]:
    """The gradients of the floating inputs, then of ``parameters`` (None for one that is not trainable)."""
    floating = [t for t in inputs.tensors() if t.requires_grad]
    trainable = [t for t in parameters if t.requires_grad]
    outs = [o for o in flatten(output) if isinstance(o, torch.Tensor) and o.requires_grad]
    if not outs:
        raise CheckFailed("the output does not depend on the inputs through autograd "
                          "(was it computed with .detach(), .item(), numpy or torch.no_grad?)")
    gen = torch.Generator().manual_seed(seed + 1)
    upstream = [torch.randn(o.shape, generator=gen).to(o.dtype) for o in outs]
    grads = iter(_grad(outs, floating + trainable, upstream, allow_unused=True) if floating + trainable else ())
    found = [next(grads) for _ in floating] + [next(grads) if t.requires_grad else None for t in parameters]
    return [None if g is None else g.detach() for g in found]


def flatten(value: Any) -> list[Any]:
    if isinstance(value, (tuple, list)):
        return [x for v in value for x in flatten(v)]
    return [value]


def _detach(value: Any) -> Any:
    """``value`` with its tensors detached. Only exact tensors, tuples and lists are touched: a subclass's own
    code (``__torch_function__``, ``__new__``) would run here, after the guard; the wire refuses it later."""
    kind = type(value)
    if kind is torch.Tensor or kind is torch.nn.Parameter:
        return value.detach()
    if kind is tuple or kind is list:
        return kind(_detach(v) for v in value)
    return value


def describe_error(error: BaseException) -> str:
    """``"TypeName: message"``, even when the exception's own ``__str__`` fails."""
    try:
        text = str(error)
    except Exception:  # a student's exception class may break its own __str__
        text = "(the exception's message could not be shown)"
    return f"{type_name(type(error))}: {text}"


def plain_error(error: BaseException) -> str:
    """``"TypeName: message"`` where the message is plain strings, read without running any code of the exception's
    (a student's ``__str__`` runs only under the guard); otherwise the type's name alone."""
    args = error.args if type(error.args) is tuple else ()
    if args and all(type(a) is str for a in args):
        return f"{type_name(type(error))}: {args[0] if len(args) == 1 else args}"
    return type_name(type(error))


def _student_traceback(error: BaseException) -> str:
    """The traceback frames outside the grader and torch: the student's own lines, a notebook cell's
    named as Jupyter names it (``Cell In[5]``) rather than by the kernel's temporary file."""
    frames = [traceback.FrameSummary(_cell_name(f.filename), f.lineno, f.name, line=f.line)
              for f in _frames(error) if "/autograde/" not in f.filename and "/torch/" not in f.filename]
    lines = traceback.format_list(frames) + [describe_error(error) + "\n"]
    return "".join(lines).rstrip()


def _cell_name(filename: str) -> str:
    """``Cell In[5]`` for the file IPython compiled input 5 as (``/tmp/ipykernel_…/….py``), else ``filename``."""
    ipython = sys.modules.get("IPython")  # only where a notebook runs: never imported here for this
    shell = ipython.get_ipython() if ipython is not None else None
    try:
        label = shell.compile.format_code_name(filename) if shell is not None else None
    except Exception:  # another IPython's compiler, without this method
        label = None
    return " ".join(label) if label else filename


def _frames(error: BaseException) -> Iterator[traceback.FrameSummary]:
    try:
        yield from traceback.extract_tb(error.__traceback__)
    except Exception:  # a frame whose source line cannot be read
        return
