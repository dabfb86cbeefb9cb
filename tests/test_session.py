"""The grader's side of a notebook's run (autograde/session.py): what it keeps of the runner's replies."""
import math

import pytest
import torch

from autograde.spec import get_exercise
from notebook_sandbox.evaluation import CheckFailed
from notebook_sandbox.inputs import Call
from notebook_sandbox.container import Limits
from autograde.session import RemoteCandidate


class _PrintingRunner:
    """A runner whose every reply carries 100 000 printed characters (a check makes dozens of requests)."""

    assignment, unlocked = "ch01_attention", False

    def request(self, request, blobs, deadline):
        return {"failed": "a check failure", "stdout": "x" * 100_000}, []


def test_a_checks_printed_output_is_kept_only_up_to_the_cells_limit_as_the_replies_come():
    limits, printed = Limits(output_chars=1000), []
    exercise = get_exercise("ch01_attention.softmax")
    candidate = RemoteCandidate(_PrintingRunner(), exercise, "softmax", math.inf, printed, limits)
    for _ in range(5):
        with pytest.raises(CheckFailed):
            candidate.evaluate(exercise, exercise.visible[0], Call(torch.zeros(2)), {}, 0, None)
    assert sum(map(len, printed)) == limits.output_chars + 1  # one more than kept: the cell is marked truncated


def test_a_cell_runs_as_in_jupyter_without_the_runners_own_future_imports():
    """runner.py's `from __future__ import annotations` would make every annotation of the student's a string."""
    from notebook_sandbox.runner import _execute

    namespace: dict = {}
    reply, _ = _execute({"source": "def f(x: int) -> int:\n    return x\nkind = f.__annotations__['x']", "index": 0,
                         "output_chars": 1000}, [], namespace)
    assert reply["status"] == "ok" and namespace["kind"] is int
