"""One grading slot: a trusted process with a sandbox of its own, grading one notebook at a time.

``python -m autograde.slot`` is started by `autograde.pool`. The first line on its stdin is
its configuration (``{"name", "root", "out", "limits"}``); it answers ``{"ready": true}`` once
its sandbox is up (or ``{"error": "..."}``), then reads one task per line (a submission) and
answers each with one row, as JSON lines, after writing the notebook as it ran to
``out/<student>/<assignment>/`` (`autograde.autograded`). It never runs a student's code itself:
the notebook's cells run in the sandbox, its checks here (`autograde.session`).

A grading slot is warm: torch, tfm_ref and every check are loaded once, and the sandbox's
pristine process forks a fresh runner per notebook in milliseconds.
"""
from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path

import nbformat

from .audit import audit
from .autograded import write_executed
from .course import released_notebook
from .notebook import GradedCell, load_notebook, max_score, merge
from .release import source_notebook
from .sandbox import Limits, Sandbox, SandboxError
from .session import run_notebook

__all__ = ["SlotGrader", "graded_row", "unscored_row", "main"]


class SlotGrader:
    """Grades submissions in ``sandbox``, writing the executed notebooks under ``out``; see the module docstring."""

    def __init__(self, sandbox: Sandbox, limits: Limits, root: Path, out: Path):
        self.sandbox, self.limits, self.root, self.out = sandbox, limits, root, out
        self._assets: dict[str, tuple[nbformat.NotebookNode, nbformat.NotebookNode]] = {}

    def assets(self, assignment: str) -> tuple[nbformat.NotebookNode, nbformat.NotebookNode]:
        if assignment not in self._assets:
            self._assets[assignment] = (nbformat.read(source_notebook(assignment, self.root / "solutions"), 4),
                                        nbformat.read(released_notebook(assignment, self.root), 4))
        return self._assets[assignment]

    def grade(self, task: dict) -> dict:
        """The row of one submission, whatever it holds; a sandbox that breaks is restarted
        and the submission graded again, once."""
        for _ in range(2):
            try:
                return self._grade(task)
            except SandboxError as error:
                flag, problem = "sandbox-failed", f"the sandbox failed: {error}"
                self.sandbox.close()
                self.sandbox = Sandbox(self.limits, self.sandbox.name).start()
            except Exception:  # a grader bug costs this row only; the traceback goes to the log
                traceback.print_exc()
                flag, problem = "grader-error", "the grader failed on this notebook"
                break
        return self.unscored(task, flag, f"{problem}; your instructor will look at it.")

    def unscored(self, task: dict, flag: str, problem: str) -> dict:
        return unscored_row(task, merge(*self.assets(task["assignment"]), None), flag, problem, self.out)

    def _grade(self, task: dict) -> dict:
        flags = list(task["flags"])
        student, problem = load_notebook(Path(task["path"])) if task["path"] else (None, None)
        if problem:
            flags.append("corrupted-notebook")
        cells = merge(*self.assets(task["assignment"]), student)
        flags += audit([c.source for c in cells if c.kind == "student"])
        run = run_notebook(self.sandbox, cells, self.limits)
        if problem:
            run.results = [{**r, "error": r.get("error") or problem} for r in run.results]
        return graded_row(task, cells, run.results, flags + sorted(run.flags), self.out)


def graded_row(task: dict, cells: list[GradedCell], results: list[dict], flags: list[str], out: Path) -> dict:
    """The row of one graded notebook; the notebook as it ran goes to ``out`` (`autograde.autograded`)."""
    scores = {c.grade_id: (c.points if r["status"] == "ok" else 0.0)
              for c, r in zip(cells, results) if c.kind == "test"}
    student, assignment = task["student_id"], task["assignment"]
    write_executed(out, student, assignment, cells, results)
    code = {c.grade_id: c.source for c in cells if c.kind == "student" and c.grade_id}
    return {"student_id": student, "assignment": assignment, "notebook": assignment, "score": sum(scores.values()),
            "max_score": max_score(cells), "flags": sorted(set(flags)), "cell_scores": scores, "code": code}


def unscored_row(task: dict, cells: list[GradedCell], flag: str, problem: str, out: Path) -> dict:
    """A row of zero for a submission the grader could not score, with a notebook that says why."""
    results = [{"status": "error", "stdout": "", "error": problem} if c.kind == "test" else
               {"status": "skipped", "stdout": "", "error": ""} for c in cells]
    return graded_row(task, cells, results, [*task["flags"], flag], out)


def _warm_up() -> None:
    """Run every check once with its reference, so the first notebook is not slower than the rest."""
    import torch

    torch.set_num_threads(1)  # one core per slot: the checks' tensors are tiny
    from .exercises import load_all

    for chapter in load_all():
        for exercise in chapter.EXERCISES:
            exercise.run(exercise.reference, hidden=True, guarded=False, seed=0)


def main() -> None:
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    sys.stdout = sys.stderr  # whatever else prints must not mix with the rows
    config = json.loads(sys.stdin.readline())
    limits = Limits(**config["limits"])
    sandbox = Sandbox(limits, config["name"])
    try:
        sandbox.launch()
        _warm_up()
        sandbox.wait_ready()
    except SandboxError as error:
        sandbox.close()
        replies.write(json.dumps({"error": str(error)}) + "\n")
        replies.flush()
        sys.exit(1)
    replies.write(json.dumps({"ready": True}) + "\n")
    replies.flush()
    grader = SlotGrader(sandbox, limits, Path(config["root"]), Path(config["out"]))
    try:
        for line in sys.stdin:
            replies.write(json.dumps(grader.grade(json.loads(line))) + "\n")
            replies.flush()
    finally:
        grader.sandbox.close()


if __name__ == "__main__":
    main()
