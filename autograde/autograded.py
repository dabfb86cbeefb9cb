"""nbgrader's autograde step, for notebooks whose cells the sandbox has already run.

``nbgrader autograde`` clears a submission's outputs, restores its locked cells from the
gradebook, runs it in a kernel (``Execute``), then scores each test cell from its outputs and
records the grades. Here the cells ran in the sandbox (`autograde.session`), so:

1. `write_executed` writes the notebook as it ran: the source's cells with the student's answers
   (`autograde.notebook`), each with what it printed and, where it failed, an error output
   carrying the check's message; into a staging ``submitted/<student>/<assignment>/`` folder,
   beside the submission's ``timestamp.txt`` and ``submission_secret.txt`` (`stage_files`).
2. `Recorder.record` runs nbgrader's own ``Autograde`` converter on that folder, without the steps
   the sandbox replaced (``ClearOutput``, ``Execute``). nbgrader writes
   ``autograded/<student>/<assignment>/`` (its cell metadata and checksums, the text files) and
   records the student, the submission and its timestamp, each grade cell's ``auto_score`` (a test
   cell with an error output scores 0: nbgrader's rule) and the late penalty. Formgrader,
   ``nbgrader export`` and ``nbgrader generate_feedback`` read what it leaves, as after
   ``nbgrader autograde``.
"""
from __future__ import annotations

import glob
import logging
import warnings
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output
from sqlalchemy.exc import SAWarning
from traitlets.config import Config

from .collection import exportable_id
from .gradebook import Recorded, recorded
from .notebook import GradedCell

__all__ = ["executed_notebook", "write_executed", "stage_files", "Recorder", "nbgrader_log", "literal_glob"]

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


def literal_glob(name: str) -> str:
    """A file glob that matches exactly ``name``. nbgrader reads a student id as a glob, stripped
    of surrounding spaces: a student folder named ``*`` or ``bob `` would otherwise match the wrong
    folder or none. (nbgrader globs the folder it found once more, unescaped, so an id such as
    ``[0-9]*`` still finds nothing; the slot stages one submission at a time, so it finds no one else's.)"""
    escaped = glob.escape(name)
    core = escaped.strip()
    lead = len(escaped) - len(escaped.lstrip())
    return "".join(f"[{c}]" for c in escaped[:lead]) + core + "".join(f"[{c}]" for c in escaped[lead + len(core):])


def _sqlite_commits_without_waiting() -> None:
    """In this process, a SQLite gradebook commits without waiting for the disk (``PRAGMA synchronous=OFF``):
    nbgrader commits once per graded cell, and each wait for the disk took more than a third of the time a notebook
    took to grade. An application that dies mid-commit still leaves the file whole; a machine that does could spoil
    it, so `autograde.grade` keeps a copy of the gradebook as it was before the run."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    if not event.contains(Engine, "connect", _without_waiting):
        event.listen(Engine, "connect", _without_waiting)


def _without_waiting(connection: object, record: object) -> None:
    import sqlite3

    if isinstance(connection, sqlite3.Connection):
        connection.execute("PRAGMA synchronous=OFF")


class Recorder:
    """nbgrader's autograde step, one graded submission at a time (each grading slot has one).

    The converter is nbgrader's ``Autograde`` without the steps the sandbox replaced (``ClearOutput``,
    ``Execute``) and without its metadata validation (``CheckCellMetadata``: the notebook was just
    written from the course's own source). A submission nbgrader fails on is left without an
    autograded folder (nbgrader removes it) and logged.
    """

    def __init__(self, staging: Path, out: Path, config: Config):
        _sqlite_commits_without_waiting()
        from nbgrader.converters import Autograde
        from nbgrader.coursedir import CourseDirectory
        from nbgrader.preprocessors import CheckCellMetadata, ClearOutput, Execute

        self.db_url, self.out = config.CourseDirectory.db_url, out
        self.coursedir = CourseDirectory(config=config, root=str(out), submitted_directory=str(staging))
        self.converter = Autograde(coursedir=self.coursedir, config=config, log=nbgrader_log())
        self.converter.force = True  # grading again replaces what an earlier run left
        skipped = (ClearOutput, Execute, CheckCellMetadata)
        self.converter.sanitize_preprocessors = [p for p in self.converter.sanitize_preprocessors if p not in skipped]
        self.converter.autograde_preprocessors = [p for p in self.converter.autograde_preprocessors if p not in skipped]

    def record(self, student: str, assignment: str) -> Recorded | None:
        """Autograde the staged notebook of ``student``; what the gradebook then holds (None: nothing). An id
        that `autograde.collection.exportable_id` refuses is never recorded: None."""
        from nbgrader.converters import NbGraderException

        if not exportable_id(student):
            return None
        self.coursedir.assignment_id, self.coursedir.student_id = assignment, literal_glob(student)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", SAWarning)  # nbgrader's add_submission autoflush notices
                self.converter.start()
        except NbGraderException:  # nbgrader logged why
            return None
        return recorded(self.db_url, [(student, assignment)]).get((student, assignment))
