"""Generated courses and classes of submissions, for the benchmark and the end-to-end tests.

`make_course` makes a course root of its own, so that releasing and grading write nothing into the
repository; a "solved" notebook has the instructor's solutions, an "untouched" one is as handed out.
"""
from __future__ import annotations

import copy
import shutil
from pathlib import Path

import nbformat

from editions.assignments import ROOT, SOLUTIONS
from .course import CONFIG_NAME
from .release import assignment_notebooks

__all__ = ["make_course", "solved_notebook", "untouched_notebook", "write_submission", "make_class"]


def make_course(folder: Path, assignments: list[str]) -> Path:
    """A course root at ``folder``: the ``assignments``' sources and the course's nbgrader configs."""
    for assignment in assignments:
        (folder / "solutions" / assignment).mkdir(parents=True, exist_ok=True)
        shutil.copy2(SOLUTIONS / assignment / f"{assignment}.md", folder / "solutions" / assignment)
    (folder / "autograde").mkdir(exist_ok=True)
    shutil.copy2(ROOT / "autograde" / CONFIG_NAME, folder / "autograde" / CONFIG_NAME)
    shutil.copy2(ROOT / CONFIG_NAME, folder / CONFIG_NAME)
    return folder


def untouched_notebook(assignment: str, root: Path = ROOT) -> nbformat.NotebookNode:
    return assignment_notebooks(assignment, root)[1]


def solved_notebook(assignment: str, answers: dict[str, str] | None = None, root: Path = ROOT) -> nbformat.NotebookNode:
    """The released notebook with the instructor's solutions, or ``answers[grade_id]`` where given."""
    source, release = assignment_notebooks(assignment, root)
    student = copy.deepcopy(release)
    for original, cell in zip(source.cells, student.cells):
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution"):
            lines = [l for l in original.source.splitlines() if l.strip() not in ("### BEGIN SOLUTION", "### END SOLUTION")]
            cell.source = (answers or {}).get(meta["grade_id"], "\n".join(lines))
    return student


def write_submission(folder: Path, student_id: str, assignment: str, notebook: nbformat.NotebookNode | str) -> Path:
    """``folder/<student_id>/<assignment>/<assignment>.ipynb`` (a string is written as raw text)."""
    path = folder / student_id / assignment / f"{assignment}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(notebook, str):
        path.write_text(notebook)
    else:
        nbformat.write(notebook, path)
    return path


def make_class(folder: Path, n_students: int, assignments: list[str], root: Path = ROOT) -> list[Path]:
    """Half the students solved every assignment, half handed it back untouched."""
    paths = []
    for i in range(n_students):
        for assignment in assignments:
            nb = solved_notebook(assignment, root=root) if i % 2 == 0 else untouched_notebook(assignment, root)
            paths.append(write_submission(folder, f"student{i:03d}", assignment, nb))
    return paths
