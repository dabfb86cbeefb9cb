"""Grading one notebook, the trusted side: its cells run in a sandboxed runner, its checks run here.

A test cell is never sent: its `check` calls are read (`autograde.testcells`) and each runs here with a
`RemoteCandidate`, whose every evaluation is a request to the runner, decoded strictly (`notebook_sandbox.wire`). A reply
that is late, missing, malformed, unsolicited or oversized costs its cell: the notebook runs again in a fresh runner
without it (at most ``MAX_RESTARTS`` times), as it does, at no cost, once a runner holds the code of a check's model
(autograde/README.md, "How a class is graded").
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from notebook_sandbox import wire
from notebook_sandbox.channel import BadMessage, ChannelClosed, ChannelError, ChannelTimeout
from notebook_sandbox.check_models import RandomTransformer
from notebook_sandbox.container import Limits, Runner, Sandbox
from notebook_sandbox.evaluation import CheckFailed, Outcome
from notebook_sandbox.inputs import Call

from . import sandbox_tree
from .candidates import Candidate
from .messages import _
from .notebook import GradedCell
from .spec import Case, Exercise, get_exercise
from .testcells import parse_test_cell
from .verdict import delegation_note, passed_line

__all__ = ["RemoteCandidate", "NotebookResult", "run_notebook"]

MAX_RESTARTS = 6
RUNNABLE = ("student", "test", "locked")  # markdown and widget cells are not executed


class RemoteCandidate(Candidate):
    """The student's ``name`` in the runner: each evaluation is one request, and the reply is
    decoded strictly; what the student's code printed is collected in ``stdout``."""

    def __init__(self, runner: Runner, exercise: Exercise, name: str, deadline: float, stdout: list[str],
                 limits: Limits):
        super().__init__()
        self.runner, self.exercise, self.name, self.deadline, self.stdout = runner, exercise, name, deadline, stdout
        self.limits = limits
        if runner.unlocked and exercise.key in sandbox_tree.answered_by_models(runner.assignment):
            raise _HoldsTheAnswer()

    def evaluate(self, exercise: Exercise, case: Case, call: Call, dims, seed: int,
                 weights: dict[str, torch.Tensor] | None) -> Outcome:
        if not self.runner.unlocked and any(isinstance(value, RandomTransformer) for _, value in call.named()):
            self._unlock()
        blobs: list[bytes] = []
        request = {"op": "evaluate", "name": self.name, "plan": exercise.adapter.plan(dims), "seed": seed,
                   "grad": case.grad, "watch": list(exercise.forbidden_ops),
                   "allowed": [list(n) for n in exercise.allowed_names], "output_chars": self.limits.output_chars + 1,
                   "dtype": str(case.dtype).removeprefix("torch."),
                   "call": wire.encode({"args": list(call.args), "kwargs": call.kwargs}, blobs, path="the inputs",
                                       modules=True),
                   "weights": wire.encode(weights, blobs)}
        reply, reply_blobs = self.runner.request(request, blobs, self.deadline)
        # kept up to the cell's limit (and one more, which marks it truncated) as each reply comes: a check makes
        # dozens of requests, each up to the channel's 32 MiB
        room = self.limits.output_chars + 1 - sum(map(len, self.stdout))
        self.stdout.append(_text(reply, "stdout")[:max(room, 0)])
        chars = self.limits.message_chars
        if "failed" in reply:
            raise CheckFailed(_text(reply, "failed")[:chars])
        outcome = _outcome(reply.get("outcome"), reply_blobs, chars, len(call.named()), exercise.forbidden_ops)
        self.delegated.update(dict.fromkeys(outcome.delegated))
        return outcome

    def _unlock(self) -> None:
        sources = sandbox_tree.model_sources(self.runner.assignment)
        reply, _blobs = self.runner.request({"op": "unlock", "sources": [list(s) for s in sources]}, [], self.deadline)
        if reply.get("status") != "ok":
            raise CheckFailed(_("the check's model could not be built in your notebook's sandbox: {error}").format(
                error=_text(reply, "error")))
        self.runner.unlocked = True

    def sibling(self, exercise: Exercise) -> Candidate | None:
        if self.runner.unlocked and exercise.key in sandbox_tree.answered_by_models(self.runner.assignment):
            return None  # its answer is in this runner now: not checked here again
        return RemoteCandidate(self.runner, exercise, exercise.name, self.deadline, self.stdout, self.limits)


class _HoldsTheAnswer(Exception):
    """The runner holds the answer of the exercise about to be checked: go on in a fresh one."""


def _text(reply: dict, key: str) -> str:
    value = reply.get(key, "")
    if type(value) is not str:
        raise BadMessage(f"a reply whose {key!r} is not text")
    return value


_OUTCOME_KEYS = {"output", "grads", "error", "error_type", "trace", "changed", "delegated"}


def _outcome(tree: object, blobs: list[bytes], chars: int, n_arguments: int, watched: tuple[str, ...]) -> Outcome:
    if type(tree) is not dict or set(tree) != _OUTCOME_KEYS:
        raise BadMessage("a malformed evaluation reply")
    try:
        output = wire.decode(tree["output"], blobs)
        grads = wire.decode(tree["grads"], blobs)
    except wire.WireError as error:
        raise BadMessage(f"a reply that is not plain data ({error})") from None
    if type(grads) is not list or any(g is not None and type(g) is not torch.Tensor for g in grads):
        raise BadMessage("gradients that are not a list of tensors")
    texts = [tree["error"], tree["error_type"], tree["trace"]]
    if any(t is not None and type(t) is not str for t in texts) or type(tree["trace"]) is not str:
        raise BadMessage("an error report that is not text")
    changed, delegated = tree["changed"], tree["delegated"]
    if type(changed) is not list or any(type(i) is not int or not 0 <= i < n_arguments for i in changed) \
            or type(delegated) is not list or any(type(op) is not str or op not in watched for op in delegated):
        raise BadMessage("a malformed evaluation reply")
    return Outcome(output, grads, *(None if t is None else t[:chars] for t in texts), changed=changed,
                   delegated=delegated)


@dataclass
class NotebookResult:
    """Per runnable-or-not cell: ``{"status", "stdout", "error"}``; what to flag; and per check made, what it found
    (``{"cell", "exercise", "hidden", "passed", "mistake", "delegated", "stopped"}``: the class report reads them;
    `_failed_by_a_stop` says which are ``stopped``)."""

    results: list[dict]
    flags: set[str] = field(default_factory=set)
    checks: list[dict] = field(default_factory=list)


def run_notebook(sandbox: Sandbox, assignment: str, cells: list[GradedCell], limits: Limits,
                 seed: int | None = None) -> NotebookResult:
    """Run ``cells`` (see the module docstring); every cell gets a result. ``seed``: the checks' random inputs (one
    for a whole class: every student gets the same inputs, and the grader computes each reference once)."""
    done = NotebookResult([{"status": "skipped", "stdout": "", "error": _("not run")} for _cell in cells])
    deadline = time.monotonic() + limits.notebook_timeout
    skip: set[int] = set()
    checked: set[int] = set()  # test cells with a verdict, kept across restarts
    fresh_starts = 0
    while fresh_starts <= len(cells) and len(skip) <= MAX_RESTARTS:
        kills_before = sandbox.oom_kills()
        runner = sandbox.spawn(assignment)
        culprit, problem, holds_answer = None, None, False
        for index, cell in enumerate(cells):
            if cell.kind not in RUNNABLE or index in skip or index in checked:
                continue
            cell_deadline = min(time.monotonic() + limits.cell_timeout, deadline)
            checks_before = len(done.checks)
            try:
                done.results[index] = _run_cell(runner, index, cell, cell_deadline, limits, done, seed)
            except ChannelError as error:
                culprit, problem = index, error
                _unfinished_checks_failed(cell, done, len(done.checks) - checks_before)
                break
            except _HoldsTheAnswer:
                holds_answer = True
                del done.checks[checks_before:]  # the cell runs again
                break
            if cell.kind == "test":
                checked.add(index)
        if culprit is None and not holds_answer and runner.channel.pending():
            done.flags.add("bad-reply")  # something wrote to the channel after the last reply
        status = sandbox.end(runner)
        if holds_answer:
            fresh_starts += 1
            continue
        if culprit is None:
            break
        oom = sandbox.oom_kills() > kills_before
        done.results[culprit] = _failure(problem, status, oom, limits)
        done.flags.add({ChannelTimeout: "timeout", ChannelClosed: "crashed"}.get(type(problem), "bad-reply"))
        if oom:
            done.flags.add("memory-limit")
        skip.add(culprit)
        if time.monotonic() >= deadline:
            break
    _failed_by_a_stop(cells, skip, done.checks)
    _cap_output(done.results, limits, done.flags)
    return done


def _failed_by_a_stop(cells: list[GradedCell], stopped: set[int], checks: list[dict]) -> None:
    """Mark ``stopped`` the failed checks a cell that stopped explains: those cut short in a test cell that stopped
    (`_unfinished_checks_failed`), and those after a student's or setup cell that stopped, which the notebook went on
    without. After a test cell that stopped, the runner that went on had every cell: those verdicts stand."""
    dropped = [i for i in stopped if cells[i].kind != "test"]
    after = {cell.grade_id for cell in cells[min(dropped) + 1:]} if dropped else set()
    for check in checks:
        check["stopped"] = check["stopped"] or (not check["passed"] and check["cell"] in after)


def _unfinished_checks_failed(cell: GradedCell, done: NotebookResult, finished: int) -> None:
    """The checks of a test cell that hung or crashed, past the ``finished`` ones, recorded as failed with no mistake
    named (checks.csv, and the class report, count them)."""
    if cell.kind == "test":
        for check in parse_test_cell(cell.source)[finished:]:
            done.checks.append({"cell": cell.grade_id, "exercise": check.key, "hidden": check.hidden, "passed": False,
                                "mistake": None, "delegated": [], "stopped": True})


def _run_cell(runner: Runner, index: int, cell: GradedCell, deadline: float, limits: Limits,
              done: NotebookResult, seed: int | None) -> dict:
    if cell.kind != "test":
        reply = runner.execute(index, cell.source, deadline, limits.output_chars + 1)
        return {"status": reply["status"], "stdout": _capped(reply["stdout"], limits, done.flags),
                "error": reply["error"][:limits.message_chars]}
    lines: list[str] = []
    for check in parse_test_cell(cell.source):
        printed: list[str] = []
        exercise = get_exercise(check.key)
        report = exercise.run(RemoteCandidate(runner, exercise, check.name, deadline, printed, limits), check.hidden,
                              seed=seed)
        lines += [p for p in printed if p]
        done.checks.append({"cell": cell.grade_id, "exercise": check.key, "hidden": check.hidden,
                            "passed": report.passed, "mistake": report.mistake, "delegated": list(report.delegated),
                            "stopped": False})
        if report.delegated:
            done.flags.add("forbidden-call")
            lines.append(delegation_note(report) + "\n")
        if not report.passed:
            return {"status": "error", "stdout": _capped("".join(lines), limits, done.flags),
                    "error": _capped_message(report.message, limits)}
        lines.append(passed_line(report, check.hidden) + "\n")
    return {"status": "ok", "stdout": _capped("".join(lines), limits, done.flags), "error": ""}


def _capped(text: str, limits: Limits, flags: set[str]) -> str:
    if len(text) <= limits.output_chars:
        return text
    flags.add("output-truncated")
    return text[:limits.output_chars] + "\n" + _("[output truncated]")


def _capped_message(text: str, limits: Limits) -> str:
    """A check's failure message, which shows the student's output, cut at ``message_chars``."""
    return text if len(text) <= limits.message_chars else text[:limits.message_chars] + "\n" + _("[message truncated]")


def _failure(problem: ChannelError, status: str, oom: bool, limits: Limits) -> dict:
    if isinstance(problem, ChannelTimeout):
        message = _("this cell ran longer than {seconds:g} s (an infinite loop?) and was stopped").format(
            seconds=limits.cell_timeout)
        return {"status": "timeout", "stdout": "", "error": message}
    if isinstance(problem, ChannelClosed):
        cause = (_("it used more than the {mb} MB of memory allowed").format(mb=limits.memory_mb) if oom else
                 _("os._exit, a crash, or more memory than allowed"))
        return {"status": "crashed", "stdout": "",
                "error": _("the Python process died while running this cell ({status}): {cause}").format(
                    status=status, cause=cause)}
    return {"status": "bad-reply", "stdout": "",
            "error": _("the grader stopped this cell: the process running it sent {problem}").format(problem=problem)}


def _cap_output(results: list[dict], limits: Limits, flags: set[str]) -> None:
    """The notebook's printed output, cut where it passes ``notebook_output_chars`` in all."""
    room = limits.notebook_output_chars
    for result in results:
        kept = result["stdout"][:max(room, 0)]
        if len(kept) < len(result["stdout"]):
            flags.add("output-truncated")
            result["stdout"] = kept + "\n" + _("[output truncated]")
        room -= len(kept)
