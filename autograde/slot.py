"""One grading slot: a trusted process with a sandbox of its own, grading one notebook at a time.

``python -m autograde.slot`` (started by `autograde.pool` or a Dask worker, `autograde.cluster`) reads its
configuration as the first JSON line on stdin and answers ``{"ready": true}`` (or ``{"error": ...}``); then each line
is a submission, answered with its row. Cells run in the sandbox, checks here (`autograde.session`), then nbgrader's
part: the executed notebook, the gradebook and the feedback page (`autograde.autograded`, `autograde.feedback`).
"""
from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import signal
import sys
import traceback
import types
from pathlib import Path

import nbformat
import torch

from intake.collection import exportable_id
from notebook_sandbox.container import Limits, Sandbox, SandboxError
from notebook_sandbox.isolation import die_with_parent

from . import sandbox_tree
from .audit import audit
from .autograded import Recorder, stage
from .course import nbgrader_config
from .exercises import chapter_ids, exercises_of
from .feedback import write_feedback
from .messages import notebook_language, speaking
from .notebook import GradedCell, load_notebook, max_score, merge
from .release import assignment_notebooks
from .session import run_notebook

__all__ = ["SlotGrader", "graded_row", "unscored_row", "main"]


@functools.cache
def python_helpers(assignment: str) -> frozenset[str]:
    """The names of ``assignment``'s forbidden PyTorch helpers that are Python functions, which no torch mode sees
    run (`notebook_sandbox.delegation`): the static audit flags them by name."""
    return frozenset(item.__name__ for exercise in exercises_of(assignment) for item in exercise.forbidden
                     if isinstance(item, types.FunctionType) and item.__module__.startswith("torch")
                     and "handle_torch_function" not in item.__code__.co_names)  # F.softmax and its like: seen


class SlotGrader:
    """Grades submissions in ``sandbox``, recording each through ``recorder``; see the module docstring."""

    def __init__(self, sandbox: Sandbox, limits: Limits, root: Path, staging: Path, recorder: Recorder,
                 seed: int | None = None):
        self.sandbox, self.limits, self.root, self.staging, self.recorder = sandbox, limits, root, staging, recorder
        self.seed = seed  # the checks' inputs, one for the class (`autograde.session.run_notebook`)
        self._assets: dict[str, tuple[nbformat.NotebookNode, nbformat.NotebookNode]] = {}

    def assets(self, assignment: str) -> tuple[nbformat.NotebookNode, nbformat.NotebookNode]:
        if assignment not in self._assets:
            self._assets[assignment] = assignment_notebooks(assignment, self.root)
        return self._assets[assignment]

    def grade(self, task: dict) -> dict:
        """The row of one submission, whatever it holds; a sandbox that breaks is restarted
        and the submission graded again, once."""
        errors = []
        for _ in range(2):
            try:
                return self._grade(task)
            except SandboxError as error:
                flag, problem = "sandbox-failed", f"the sandbox failed: {error}"
                errors.append(f"{flag}: {error}")
                self.sandbox.close()
                self.sandbox = Sandbox(self.limits, self.sandbox.tree, self.sandbox.name).start()
            except Exception:  # a grader bug costs this row only; its traceback goes to grader-errors.log
                flag, problem = "grader-error", "the grader failed on this notebook"
                errors.append(f"{flag}: {traceback.format_exc()}")
                break
        row = self.unscored(task, flag, f"{problem}; your instructor will look at it.")
        return {**row, "errors": [*errors, *row["errors"]]}

    def unscored(self, task: dict, flag: str, problem: str) -> dict:
        return unscored_row(task, merge(*self.assets(task["assignment"]), None), flag, problem, self.staging,
                            self.recorder)

    def _grade(self, task: dict) -> dict:
        flags = list(task["flags"])
        student, problem = load_notebook(Path(task["path"])) if task["path"] else (None, None)
        if problem:
            flags.append("corrupted-notebook")
        cells = merge(*self.assets(task["assignment"]), student)
        flags += audit([c.source for c in cells if c.kind == "student"], python_helpers(task["assignment"]))
        # the checks' messages and the feedback page speak the submitted notebook's language (`autograde.messages`)
        with speaking(notebook_language(student)):
            run = run_notebook(self.sandbox, task["assignment"], cells, self.limits, self.seed)
            if problem:
                run.results = [{**r, "error": r.get("error") or problem} for r in run.results]
            return graded_row(task, cells, run.results, flags + sorted(run.flags), self.staging, self.recorder,
                              run.checks)


def graded_row(task: dict, cells: list[GradedCell], results: list[dict], flags: list[str], staging: Path,
               recorder: Recorder, checks: list[dict] = ()) -> dict:
    """The row of one graded notebook, after nbgrader's part (`autograde.autograded`, `autograde.feedback`);
    ``checks``: what each check found (`autograde.session.NotebookResult`)."""
    scores = {c.grade_id: (c.points if r["status"] == "ok" else 0.0)
              for c, r in zip(cells, results) if c.kind == "test"}
    student, assignment = task["student_id"], task["assignment"]
    staged = stage(staging, student, assignment, cells, results, task.get("timestamp"), task.get("secret"))
    score, penalty, flags, errors = sum(scores.values()), 0.0, set(flags), []
    try:
        entry = recorder.record(student, assignment, flags, task.get("path"))  # None for an id `exportable_id` refuses
    finally:  # the staging folder holds one submission at a time: nbgrader finds no one else's there
        shutil.rmtree(staged, ignore_errors=True)
        with contextlib.suppress(OSError):
            staged.parent.rmdir()  # the student's folder, once it holds no other assignment
    if entry is None:
        flags.add("gradebook-error" if exportable_id(student) else "unexportable-student-id")
    else:
        score, scores = entry.final_score, entry.cell_scores(scores)  # nbgrader's, with the scores given by hand
        penalty = entry.taken_off
        if entry.seconds_late > 0:
            flags.add("late")
        try:
            write_feedback(recorder.out, student, assignment, recorder.db_url)
        except Exception:  # the row stands without its page; its traceback goes to grader-errors.log
            flags.add("feedback-error")
            errors.append(f"feedback-error: {traceback.format_exc()}")
    code = {c.grade_id: c.source for c in cells if c.kind == "student" and c.grade_id}
    return {"student_id": student, "assignment": assignment, "notebook": assignment, "score": score,
            "max_score": max_score(cells), "late_penalty": penalty, "flags": sorted(flags), "cell_scores": scores,
            "code": code, "checks": list(checks), "errors": errors}


def unscored_row(task: dict, cells: list[GradedCell], flag: str, problem: str, staging: Path, recorder: Recorder) -> dict:
    """A row of zero for a submission the grader could not score, with a notebook that says why."""
    results = [{"status": "error", "stdout": "", "error": problem} if c.kind == "test" else
               {"status": "skipped", "stdout": "", "error": ""} for c in cells]
    return graded_row(task, cells, results, [*task["flags"], flag], staging, recorder)


def _warm_up(seed: int | None, assignments: list[str]) -> None:
    """Run every check of the ``assignments`` being graded once with its reference and the class's seed, while the
    sandbox starts: the inputs and the references' outcomes the class's checks use are then computed
    (`attempts._remembered`), and the first notebook is not slower than the rest."""
    torch.set_num_threads(1)  # one core per slot: the checks' tensors are tiny
    for assignment in assignments:
        for exercise in exercises_of(assignment):
            exercise.run(exercise.reference, hidden=True, seed=0 if seed is None else seed)


def main() -> None:
    # killed with the thread that started it (a pool's, a Dask worker's): a slot whose worker was lost must not go
    # on grading a notebook that Dask has meanwhile given to another worker
    die_with_parent(signal.SIGKILL)
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    sys.stdout = sys.stderr  # whatever else prints must not mix with the rows
    config = json.loads(sys.stdin.readline())
    limits = Limits(**config["limits"])
    sandbox = Sandbox(limits, sandbox_tree.staged(), config["name"])
    try:
        sandbox.launch()
        _warm_up(config.get("seed"), config.get("assignments", chapter_ids()))
        sandbox.wait_ready()
    except SandboxError as error:
        sandbox.close()
        print(json.dumps({"error": str(error)}), file=replies, flush=True)
        sys.exit(1)
    print(json.dumps({"ready": True}), file=replies, flush=True)
    # a staging folder of its own: nbgrader globs the staged notebooks' paths unescaped, and a student id such as
    # "*" must not match a notebook another slot has staged at the same moment
    root, staging, out = Path(config["root"]), Path(config["staging"]) / config["name"], Path(config["out"])
    recorder = Recorder(staging, out, nbgrader_config(config["db_url"], root))
    grader = SlotGrader(sandbox, limits, root, staging, recorder, config.get("seed"))
    try:
        for line in sys.stdin:
            print(json.dumps(grader.grade(json.loads(line))), file=replies, flush=True)
    finally:
        grader.sandbox.close()


if __name__ == "__main__":
    main()
