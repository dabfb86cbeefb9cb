"""``python -m autograde release``: the student notebooks, generated from the MyST sources.

1. jupytext: ``solutions/<id>/<id>.md`` → ``solutions/<id>/<id>.ipynb`` (the source nbgrader reads;
   generated, git-ignored, rewritten only when the .md is newer);
2. nbgrader ``generate_assignment``: solutions and hidden tests removed, checksums and cell
   locks added, the assignment and its grade cells recorded in the gradebook
   → ``release/<id>/<id>.ipynb``, with the students' nbgrader settings beside it
   (``autograde/student/nbgrader_config.py``: what ``nbgrader validate`` says).

Idempotent: running it twice gives the same files.
"""
from __future__ import annotations

import logging
import shutil
from pathlib import Path

import jupytext
import nbformat

from .testcells import GradedCellError, parse_test_cell
from .course import ROOT, SOLUTIONS, assignment_ids, nbgrader_config, released_notebook, source_markdown, tools_on_path

__all__ = ["source_notebook", "release"]


def source_notebook(assignment: str, solutions: Path = SOLUTIONS) -> Path:
    """The instructor .ipynb for ``assignment``, regenerated from its .md when that is newer."""
    markdown = source_markdown(assignment, solutions)
    notebook = markdown.with_suffix(".ipynb")
    if not notebook.exists() or notebook.stat().st_mtime < markdown.stat().st_mtime:
        nb = jupytext.read(markdown)
        nb.metadata.pop("jupytext", None)  # the .ipynb is an output, not a paired file
        nbformat.write(nb, notebook)
    return notebook


STUDENT_CONFIG = Path(__file__).resolve().parent / "student" / "nbgrader_config.py"


def _check_test_cells(assignment: str, source: nbformat.NotebookNode) -> None:
    """Every graded test cell must be check calls only: the grader reads them, it never runs them."""
    for cell in source.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution"):
            try:
                parse_test_cell(cell.source)
            except GradedCellError as error:
                raise ValueError(f"{assignment}, test cell {meta.get('grade_id')!r}: {error}") from None


def release(assignments: list[str] | None = None, db_url: str | None = None, root: Path = ROOT) -> list[Path]:
    """Generate ``release/<id>/<id>.ipynb`` for each assignment (all by default).

    Returns:
        the released notebooks' paths.
    Raises:
        RuntimeError: nbgrader reports an error (e.g. bad cell metadata).
    """
    from nbgrader.apps import NbGraderAPI  # heavy import, only for this command

    solutions = root / "solutions"
    assignments = assignments or assignment_ids(solutions)
    for assignment in assignments:
        _check_test_cells(assignment, nbformat.read(source_notebook(assignment, solutions), 4))
    tools_on_path()
    api = NbGraderAPI(config=nbgrader_config(db_url, root))
    api.log.setLevel(logging.WARNING)
    released = []
    for assignment in assignments:
        result = api.generate_assignment(assignment, force=True, create=True)
        if not result["success"]:
            raise RuntimeError(f"nbgrader generate_assignment {assignment} failed:\n{result['error']}\n{result['log']}")
        notebook = released_notebook(assignment, root)
        shutil.copyfile(STUDENT_CONFIG, notebook.parent / STUDENT_CONFIG.name)  # for `nbgrader validate` there
        released.append(notebook)
    return released
