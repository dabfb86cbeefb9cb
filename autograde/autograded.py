"""nbgrader's autograde step, for notebooks whose cells the sandbox has already run.

``nbgrader autograde`` clears a submission's outputs, restores its locked cells from the
gradebook, runs it in a kernel (``Execute``), then scores each test cell from its outputs and
records the grades. Here the cells ran in the sandbox (`autograde.session`), so:

1. `write_executed` writes the notebook as it ran: the source's cells with the student's answers
   (`autograde.notebook`), each with what it printed and, where it failed, an error output
   carrying the check's message; into a staging ``submitted/<student>/<assignment>/`` folder,
   beside the submission's ``timestamp.txt`` and ``submission_secret.txt`` (`stage_files`).
2. `autograde` runs nbgrader's own ``Autograde`` converter on that folder, without the two steps
   the sandbox replaced (``ClearOutput``, ``Execute``). nbgrader writes
   ``autograded/<student>/<assignment>/`` (its cell metadata and checksums, the text files) and
   records the student, the submission and its timestamp, each grade cell's ``auto_score`` (a test
   cell with an error output scores 0: nbgrader's rule) and the late penalty. Formgrader,
   ``nbgrader export`` and ``nbgrader generate_feedback`` read what it leaves, as after
   ``nbgrader autograde``.
"""
from __future__ import annotations

import logging
import warnings
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output
from sqlalchemy.exc import SAWarning
from traitlets.config import Config

from .notebook import GradedCell

__all__ = ["executed_notebook", "write_executed", "stage_files", "autograde", "nbgrader_log"]

ERROR_NAMES = {"timeout": "Timeout", "crashed": "Crashed", "bad-reply": "BadReply", "skipped": "NotRun"}
"""How a cell that did not finish shows in the notebook (the ``ename`` of its error output)."""


def nbgrader_log() -> logging.Logger:
    """nbgrader's converters log every step; an instructor sees only their errors."""
    log = logging.getLogger("autograde.nbgrader")
    log.setLevel(logging.ERROR)
    return log


def _outputs(cell: GradedCell, result: dict) -> list:
    outputs = [new_output("stream", name="stdout", text=result["stdout"])] if result["stdout"] else []
    if result["status"] == "ok" or (result["status"] == "skipped" and cell.kind != "test"):
        return outputs
    lines = (result.get("error") or result["status"]).splitlines()
    if cell.kind == "test" and result["status"] == "error":
        name = "CheckFailed"
    else:  # a student's traceback ends with "NameError: ..."
        head = lines[-1].split(":", 1)[0]
        name = ERROR_NAMES.get(result["status"], head if head.isidentifier() else "Error")
    evalue = lines[0] if name == "CheckFailed" else lines[-1]  # a check's message starts with its verdict
    return [*outputs, new_output("error", ename=name, evalue=evalue, traceback=lines)]


def executed_notebook(cells: list[GradedCell], results: list[dict]) -> nbformat.NotebookNode:
    """The notebook as the sandbox ran it: ``cells`` with their outputs, nbgrader metadata kept."""
    nb = new_notebook()
    count = 0
    for cell, result in zip(cells, results):
        if cell.kind == "markdown":
            nb.cells.append(new_markdown_cell(cell.source, metadata=cell.metadata))
            continue
        ran = result["status"] != "skipped"
        count += ran
        nb.cells.append(new_code_cell(cell.source, metadata=cell.metadata, outputs=_outputs(cell, result),
                                      execution_count=count if ran else None))
    return nb


def write_executed(staging: Path, student: str, assignment: str, cells: list[GradedCell], results: list[dict]) -> Path:
    """``staging/<student>/<assignment>/<assignment>.ipynb``: the gradebook knows the notebook by that name."""
    path = staging / student / assignment / f"{assignment}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(executed_notebook(cells, results), path)
    return path


def stage_files(staging: Path, student: str, assignment: str, timestamp: str | None, secret: str | None) -> None:
    """The submission's ``timestamp.txt`` and ``submission_secret.txt``, beside its staged notebook."""
    folder = staging / student / assignment
    for name, text in (("timestamp.txt", timestamp), ("submission_secret.txt", secret)):
        if text:
            (folder / name).write_text(text)


def autograde(staging: Path, out: Path, config: Config, assignments: list[str]) -> None:
    """nbgrader's autograde step for every staged notebook: ``out/autograded/`` and the gradebook.

    A submission nbgrader fails on is left without an autograded folder (nbgrader removes it)
    and logged; the others are done. ``config`` is the course's (`autograde.course.nbgrader_config`).
    """
    from nbgrader.converters import Autograde, NbGraderException
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.preprocessors import ClearOutput, Execute

    coursedir = CourseDirectory(config=config, root=str(out), submitted_directory=str(staging))
    converter = Autograde(coursedir=coursedir, config=config, log=nbgrader_log())
    converter.force = True  # grading again replaces what an earlier run left
    converter.sanitize_preprocessors = [p for p in converter.sanitize_preprocessors if p is not ClearOutput]
    converter.autograde_preprocessors = [p for p in converter.autograde_preprocessors if p is not Execute]
    for assignment in assignments:
        coursedir.assignment_id, coursedir.student_id = assignment, "*"
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", SAWarning)  # nbgrader's add_submission autoflush notices
                converter.start()
        except NbGraderException:  # raised after every submission was tried; the failed ones are logged
            pass
