"""``python -m autograde release``: the student notebooks from the MyST sources, idempotently.

jupytext makes ``solutions/<id>/<id>.ipynb``; nbgrader's ``generate_assignment`` writes ``release/<id>/<id>.ipynb``
and the students' settings; each language whose notebook catalogue is complete gets ``release/<language>/<id>/``.
"""
from __future__ import annotations

import logging
import shutil
from pathlib import Path

import jupytext
import nbformat

from editions.assignments import ROOT, SOLUTIONS, assignment_ids, released_notebook, source_markdown, translated_notebook
from editions.notebooks import catalogue_path, languages, read_translations, translate_notebook

from .testcells import GradedCellError, parse_test_cell
from .course import nbgrader_config, tools_on_path
from .messages import mark_notebook

__all__ = ["source_notebook", "assignment_notebooks", "release"]

log = logging.getLogger(__name__)


def source_notebook(assignment: str, solutions: Path = SOLUTIONS) -> Path:
    """The instructor .ipynb for ``assignment``, regenerated from its .md when that is newer."""
    markdown = source_markdown(assignment, solutions)
    notebook = markdown.with_suffix(".ipynb")
    if not notebook.exists() or notebook.stat().st_mtime < markdown.stat().st_mtime:
        nb = jupytext.read(markdown)
        nb.metadata.pop("jupytext", None)  # the .ipynb is an output, not a paired file
        nbformat.write(nb, notebook)
    return notebook


def assignment_notebooks(assignment: str, root: Path) -> tuple[nbformat.NotebookNode, nbformat.NotebookNode]:
    """The source and the released notebook of ``assignment`` in the course at ``root``: what grading merges a
    submission with (`autograde.notebook.merge`)."""
    return (nbformat.read(source_notebook(assignment, root / "solutions"), 4),
            nbformat.read(released_notebook(assignment, root), 4))


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


def _translate(assignment: str, language: str, root: Path) -> Path | None:
    """Write the released notebook of ``assignment`` in ``language``, if its catalogue is complete."""
    target, catalogue = translated_notebook(assignment, language, root), catalogue_path(root, language, assignment)
    try:
        if not catalogue.is_file():
            raise ValueError(f"it has no catalogue, {catalogue} (python locales/build.py --update-notebooks)")
        notebook = mark_notebook(translate_notebook(nbformat.read(released_notebook(assignment, root), 4),
                                                    read_translations(catalogue)), language)
    except ValueError as why:
        shutil.rmtree(target.parent, ignore_errors=True)  # a translation of an older English would mislead
        log.warning("%s is not released in %s: %s", assignment, language, why)
        return None
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, target)
    shutil.copyfile(STUDENT_CONFIG, target.parent / STUDENT_CONFIG.name)
    return target


def release(assignments: list[str] | None = None, db_url: str | None = None, root: Path = ROOT) -> list[Path]:
    """Generate ``release/<id>/<id>.ipynb`` for each assignment (default: all) and its translations; their paths,
    the assignments' first. Raises RuntimeError when nbgrader reports an error (e.g. bad cell metadata)."""
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
    translated = [_translate(assignment, language, root) for language in languages(root) for assignment in assignments]
    return released + [path for path in translated if path]
