"""Where the student's code runs: a `Candidate` gives its `Outcome` on one input, in this process
(`LocalCandidate`: a kernel, pytest, the catalogued mistakes) or in the sandbox (`session.RemoteCandidate`).
"""
from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import torch

from notebook_sandbox import wire
from notebook_sandbox.building import build, module_parameters
from notebook_sandbox.evaluation import CheckFailed, Outcome, evaluate
from notebook_sandbox.inputs import Call

from .adapters import Dims
from .code_names import code_of
from .messages import _

if TYPE_CHECKING:
    from .spec import Case, Exercise

__all__ = ["Candidate", "LocalCandidate", "one_thread"]


class Candidate:
    """The student's implementation, wherever it runs; ``delegated`` gathers the forbidden operators it ran."""

    def __init__(self) -> None:
        self.delegated: dict[str, None] = {}

    def evaluate(self, exercise: Exercise, case: Case, call: Call, dims: Dims, seed: int,
                 weights: dict[str, torch.Tensor] | None) -> Outcome:
        raise NotImplementedError

    def sibling(self, exercise: Exercise) -> Candidate | None:
        """The student's implementation of another exercise of the same notebook."""
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
        """True where the code names ``name``; None otherwise (it may still reach it under another name)."""
        return True if any(name in code.co_names for code in code_of(self.impl)) else None

    def evaluate(self, exercise: Exercise, case: Case, call: Call, dims: Dims, seed: int,
                 weights: dict[str, torch.Tensor] | None) -> Outcome:
        plan = exercise.adapter.plan(dims)
        outcome = evaluate(lambda: build(plan, self.impl, weights, case.dtype), call, grad=case.grad, seed=seed,
                           parameters=module_parameters, watch=exercise.forbidden_ops,
                           allowed=exercise.allowed_names)
        self.delegated.update(dict.fromkeys(outcome.delegated))
        try:  # what a graded run could not send back (a NumPy number, a Tensor subclass) fails in a notebook alike
            wire.encode(outcome.output, [], path=_("your output"))
        except wire.WireError as error:
            raise CheckFailed(str(error)) from None
        return outcome


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """PyTorch on one thread while a check runs: tiny tensors, and a thread pool beside other work waits at every
    operation (a failing training check: 19.9 s with two threads, 2.8 s with one)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
