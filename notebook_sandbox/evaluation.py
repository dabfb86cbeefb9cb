"""Running one implementation on one input: its output and gradients, or what it raised.

The grader (reference, catalogued mistakes) and the sandboxed runner (the student's code) use this same code,
so both sides build, call and differentiate alike. Gradients are of ``sum(out · r)`` for a random ``r`` drawn
from the case's seed, with respect to the floating inputs and the module's parameters (sorted by name).
"""
from __future__ import annotations

import contextlib
import sys
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from .delegation import Watch
from .inputs import Call

__all__ = ["CheckFailed", "Outcome", "evaluate", "flatten", "describe_error", "student_traceback"]


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
    delegated: list[str] = field(default_factory=list)  # the watched operators that ran (`notebook_sandbox.delegation`)


def evaluate(build: Callable[[], Any], call: Call, *, grad: bool, seed: int,
             parameters: Callable[[Any], list[torch.Tensor]], watch: tuple[str, ...] = (),
             allowed: tuple[tuple[str, str], ...] = ()) -> Outcome:
    """Build the object and call it on a copy of ``call`` under fixed seeds; with ``grad``, backpropagate a seeded
    random upstream gradient. The ``watch`` operators run outside ``allowed`` helpers go in ``delegated``. Raises
    `CheckFailed` (with ``grad``) if the output does not depend on the inputs through autograd."""
    watching = Watch(watch, allowed)
    try:
        inputs = call.clone(requires_grad=grad)
        with torch.random.fork_rng(devices=[]):
            # only the CPU generator: torch.manual_seed also queues seeds for every accelerator
            torch.default_generator.manual_seed(seed)
            with watching if watch else contextlib.nullcontext():
                built = build()
                torch.default_generator.manual_seed(seed + 2)  # the call draws the same random numbers on both sides
                output = built(*inputs.args, **inputs.kwargs)
                grads = _gradients(output, inputs, parameters(built), seed) if grad else []
        return Outcome(output=_detach(output), grads=grads, changed=inputs.changed_from(call),
                       delegated=watching.seen)
    except CheckFailed:
        raise
    except BaseException as error:  # the student's code may raise anything (SystemExit too); reported, not fatal
        return Outcome(error=describe_error(error), error_type=type(error).__name__,
                       trace=student_traceback(error), delegated=watching.seen)


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
    grads = iter(torch.autograd.grad(outs, floating + trainable, upstream, allow_unused=True) if floating + trainable else ())
    found = [next(grads) for _ in floating] + [next(grads) if t.requires_grad else None for t in parameters]
    return [None if g is None else g.detach() for g in found]


def flatten(value: Any) -> list[Any]:
    if isinstance(value, (tuple, list)):
        return [x for v in value for x in flatten(v)]
    return [value]


def _detach(value: Any) -> Any:
    """``value`` with its tensors detached (exact tensors, tuples and lists: the wire refuses anything else)."""
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
    return f"{type(error).__name__}: {text}"


_NOT_THE_STUDENTS = ("/autograde/", "/notebook_sandbox/", "/torch/")


def student_traceback(error: BaseException) -> str:
    """The traceback frames outside the grader and torch: the student's own lines, a notebook cell's
    named as Jupyter names it (``Cell In[5]``) rather than by the kernel's temporary file."""
    frames = [traceback.FrameSummary(_cell_name(f.filename), f.lineno, f.name, line=f.line)
              for f in _frames(error) if not any(folder in f.filename for folder in _NOT_THE_STUDENTS)]
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

