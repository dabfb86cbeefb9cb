"""What is executed for a submission: the source notebook, with the student's answers in it.

Grading never trusts the submitted notebook's structure: it walks the *source* notebook (hidden tests
included) and takes from the submission only the solution cells (by nbgrader ``grade_id``) and the cells the
student added, where they were. Test and locked cells come from the source, so an edited or deleted test is
restored; a missing solution cell is the released stub. Cells tagged ``widget`` are not executed.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import nbformat

__all__ = ["GradedCell", "load_notebook", "merge", "max_score", "is_widget", "solution_sources"]


@dataclass
class GradedCell:
    """One cell to run (or show): ``kind`` is markdown / student / test / locked / widget."""

    kind: str
    source: str  # what is executed
    grade_id: str | None = None
    points: float = 0.0
    metadata: dict = field(default_factory=dict)  # the released cell's (nbgrader's), none for the student's own


def load_notebook(path: Path) -> tuple[nbformat.NotebookNode | None, str | None]:
    """The notebook at ``path``, or None and why it could not be read."""
    try:
        return nbformat.read(path, as_version=4), None
    except Exception as error:  # any unreadable file: corrupted JSON, wrong schema, binary data
        return None, f"unreadable notebook: {type(error).__name__}: {str(error)[:200]}"


def _dict(value: object) -> dict:
    return value if isinstance(value, dict) else {}


def _meta(cell: dict) -> dict:
    return _dict(_dict(cell.get("metadata")).get("nbgrader"))


def is_widget(cell: dict) -> bool:
    """A cell tagged ``widget`` ("Try it", a full training run): never run when grading or validating."""
    tags = _dict(cell.get("metadata")).get("tags")
    return isinstance(tags, list) and "widget" in tags


def _writable(text: str) -> str:
    """``text`` with each lone surrogate (valid JSON, not UTF-8: nbgrader and the gradebook would fail) as ``?``."""
    return text.encode("utf-8", "replace").decode("utf-8")


def _source(cell: dict) -> str:
    """A cell's text; a submitted cell of the wrong shape holds no code."""
    source = cell.get("source", "")
    if isinstance(source, list) and all(isinstance(line, str) for line in source):
        source = "".join(source)
    return _writable(source) if isinstance(source, str) else ""


def _kind(cell: nbformat.NotebookNode) -> str:
    meta = _meta(cell)
    if cell.cell_type != "code":
        return "markdown"
    if meta.get("grade") and not meta.get("solution"):
        return "test"
    if meta.get("solution"):
        return "student"
    if meta.get("locked"):
        return "locked"
    return "widget" if is_widget(cell) else "student"


def _student_cells(student: nbformat.NotebookNode | None, known: set[str],
                   solutions: set[str]) -> tuple[dict, dict, list]:
    """The student's solution sources by grade_id, and their own cells by the known cell they precede (``None``:
    after the last); a duplicated solution cell's later copies run as the student's own cells."""
    answers: dict[str, str] = {}
    extras: dict[str | None, list[str]] = {}
    pending: list[str] = []
    cells = student.get("cells") if isinstance(student, dict) else None
    for cell in (c for c in (cells if isinstance(cells, list) else []) if isinstance(c, dict)):
        grade_id = _meta(cell).get("grade_id")
        source = _source(cell)
        if isinstance(grade_id, str) and grade_id in answers:
            if grade_id in solutions and cell.get("cell_type") == "code" and source.strip():
                pending.append(source)
        elif isinstance(grade_id, str) and grade_id in known:
            answers.setdefault(grade_id, source)
            extras.setdefault(grade_id, []).extend(pending)
            pending = []
        elif cell.get("cell_type") == "code" and not is_widget(cell) and source.strip():
            pending.append(source)
    return answers, extras, pending


def merge(source: nbformat.NotebookNode, release: nbformat.NotebookNode,
          student: nbformat.NotebookNode | None) -> list[GradedCell]:
    """The cells to execute, in source order (see the module docstring)."""
    if len(source.cells) != len(release.cells):
        raise ValueError("the released notebook does not match its source: run `python -m autograde release`")
    known = {g for g in (_meta(c).get("grade_id") for c in source.cells) if g}
    solutions = {_meta(c).get("grade_id") for c in source.cells if _kind(c) == "student"} & known
    answers, extras, trailing = _student_cells(student, known, solutions)
    cells: list[GradedCell] = []
    for original, released in zip(source.cells, release.cells):
        meta, kind = _meta(original), _kind(original)
        grade_id = meta.get("grade_id")
        cells += [GradedCell("student", code) for code in extras.get(grade_id, [])]
        if kind == "student" and grade_id:
            answer = answers.get(grade_id, released.source)
            cells.append(GradedCell("student", answer, grade_id, metadata=released.metadata))
        else:
            points = float(meta.get("points", 0)) if kind == "test" else 0.0
            cells.append(GradedCell(kind, original.source, grade_id, points, released.metadata))
    cells += [GradedCell("student", code) for code in trailing]
    return cells


def solution_sources(source: nbformat.NotebookNode) -> dict[str, str]:
    """The instructor's solution cells of a source notebook, by grade_id."""
    return {g: c.source for c in source.cells if _kind(c) == "student" and (g := _meta(c).get("grade_id"))}


def max_score(cells: list[GradedCell]) -> float:
    return sum(c.points for c in cells if c.kind == "test")
