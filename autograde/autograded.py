"""nbgrader's autograde step, for notebooks whose cells the sandbox has already run.

`stage` writes the notebook as it ran; `Recorder` runs nbgrader's ``Autograde`` converter on it
without ``ClearOutput`` and ``Execute``, then sets formgrader's flags and note (`flag_submissions`) and keeps the
submission in ``submitted/`` (`keep_submission`). nbgrader's own autograde refuses (`SandboxOnly`).
"""
from __future__ import annotations

import datetime
import glob
import json
import logging
import os
import shutil
import sqlite3
import tempfile
import warnings
from collections.abc import Iterable
from pathlib import Path

import nbformat
from nbconvert.exporters import NotebookExporter
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output
from nbgrader.converters import Autograde, NbGraderException
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import CheckCellMetadata, ClearOutput, Execute
from nbgrader.utils import parse_utc
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SAWarning
from traitlets.config import Config

from intake.collection import EXCHANGE_FILES, exportable_id

from .feedback import GRADER_NOTE, shown_comment
from .gradebook import Recorded, after_penalty, find_submission, recorded, shared_gradebook
from .messages import ENGLISH, METADATA, language
from .notebook import GradedCell
from .similarity import is_similarity

__all__ = ["executed_notebook", "stage", "Recorder", "literal_glob", "SandboxOnly", "SANDBOX_ONLY", "FLAG_NOTES",
           "UNFLAGGED", "grader_note", "flag_submissions", "keep_submission"]

SANDBOX_ONLY = ("Refused: nbgrader's autograde would run the students' code in an ordinary kernel,\n"
                "with your files and your rights, outside the course's sandbox.\n"
                "Grade with `python -m autograde grade submitted` at the course root instead:\n"
                "it runs each notebook in the sandbox, then nbgrader's autograde step and\n"
                "generate_feedback itself (autograde/README.md).")
"""Short lines: formgrader shows the message in a box that does not wrap."""


class SandboxOnly(NotebookExporter):
    """nbgrader's ``Autograde`` exporter in the course's config: it refuses with `SANDBOX_ONLY` before nbgrader
    touches a folder or the gradebook. The `Recorder` puts nbgrader's own exporter back."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        log = getattr(self.parent, "log", None) or logging.getLogger("nbgrader")
        log.error(SANDBOX_ONLY)
        raise NbGraderException(SANDBOX_ONLY)


ERROR_NAMES = {"timeout": "Timeout", "crashed": "Crashed", "bad-reply": "BadReply", "skipped": "NotRun"}
"""How a cell that did not finish shows in the notebook (the ``ename`` of its error output)."""


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
    """The notebook as the sandbox ran it, with the language its checks spoke (which its feedback page speaks)."""
    nb = new_notebook()
    if language() != ENGLISH:
        nb.metadata[METADATA] = {"language": language()}
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


def stage(staging: Path, student: str, assignment: str, cells: list[GradedCell], results: list[dict],
          timestamp: str | None, secret: str | None) -> Path:
    """Write ``staging/<student>/<assignment>/``: the notebook as it ran, ``<assignment>.ipynb`` (the gradebook
    knows it by that name), with the submission's ``timestamp.txt`` and ``submission_secret.txt``. Returns the
    folder."""
    folder = staging / student / assignment
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(executed_notebook(cells, results), folder / f"{assignment}.ipynb")
    for name, text in zip(EXCHANGE_FILES, (timestamp, secret)):
        if text:
            (folder / name).write_text(text)
    return folder


def literal_glob(name: str) -> str:
    """A file glob that matches exactly ``name``: nbgrader reads a student id as a glob, stripped of surrounding
    spaces, so ``*`` or ``bob `` would otherwise match the wrong folder or none."""
    escaped = glob.escape(name)
    core = escaped.strip()
    lead = len(escaped) - len(escaped.lstrip())
    return "".join(f"[{c}]" for c in escaped[:lead]) + core + "".join(f"[{c}]" for c in escaped[lead + len(core):])


def _without_waiting(connection: object, record: object) -> None:
    """Make a SQLite gradebook commit without waiting for the disk: nbgrader commits once per graded cell, a third
    of a notebook's time. A machine crash could spoil the file, so `grade` keeps a copy."""
    if isinstance(connection, sqlite3.Connection):
        connection.execute("PRAGMA synchronous=OFF")


class Recorder:
    """nbgrader's autograde step, one staged submission at a time (one per grading slot), without ``ClearOutput``,
    ``Execute`` and ``CheckCellMetadata`` (the notebook was just written from the course's source)."""

    def __init__(self, staging: Path, out: Path, config: Config):
        if not event.contains(Engine, "connect", _without_waiting):
            event.listen(Engine, "connect", _without_waiting)
        self.db_url, self.out = config.CourseDirectory.db_url, out
        course_root = Path(config.CourseDirectory.get("root", out))
        # the course's submitted/, where formgrader counts submissions: only when grading into the course root
        self.submitted = (course_root / config.CourseDirectory.get("submitted_directory", "submitted")
                          if course_root.resolve() == out.resolve() else None)
        self.coursedir = CourseDirectory(config=config, root=str(out), submitted_directory=str(staging))
        log = logging.getLogger("autograde.nbgrader")
        log.setLevel(logging.ERROR)  # nbgrader's converters log every step; an instructor sees only their errors
        self.converter = Autograde(coursedir=self.coursedir, config=config, log=log)
        self.converter.exporter_class = NotebookExporter  # nbgrader's own: the course config's refuses (SandboxOnly)
        self.converter.force = True  # grading again replaces what an earlier run left
        skipped = (ClearOutput, Execute, CheckCellMetadata)
        self.converter.sanitize_preprocessors = [p for p in self.converter.sanitize_preprocessors if p not in skipped]
        self.converter.autograde_preprocessors = [p for p in self.converter.autograde_preprocessors if p not in skipped]

    def record(self, student: str, assignment: str, flags: Iterable[str] = (),
               submission: Path | str | None = None) -> Recorded | None:
        """Autograde ``student``'s staged notebook; what the gradebook then holds (None: nothing, or an id
        `exportable_id` refuses). ``flags`` go to formgrader, ``submission`` to the course's ``submitted/``."""
        if not exportable_id(student):
            return None
        self.coursedir.assignment_id, self.coursedir.student_id = assignment, literal_glob(student)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", SAWarning)  # nbgrader's add_submission autoflush notices
                self.converter.start()
        except NbGraderException:  # nbgrader logged why
            return None
        entry = recorded(self.db_url, [(student, assignment)]).get((student, assignment))
        if entry is None:
            return None
        flag_submissions(self.db_url, [(student, assignment, {*flags, *(["late"] if entry.seconds_late > 0 else [])})],
                         self.out)
        if self.submitted is not None and submission is not None:
            keep_submission(self.submitted, student, assignment, Path(submission),
                            Path(self.coursedir.submitted_directory))
        return entry


FLAG_NOTES = {
    "time-unverified": "the time is the student's own timestamp.txt: check it against your record, or grade with "
                       "--submitted-at.",
    "no-timestamp": "there was no time for it: it counted as on time.",
    "bad-timestamp": "its timestamp.txt could not be read: it counted as on time.",
    "timeout": "a cell ran past --cell-timeout; its message names it.",
    "crashed": "the runner died in a cell; that cell scored 0 and its message says why.",
    "memory-limit": "a cell went over --memory-mb; that cell scored 0.",
    "output-truncated": "the notebook printed more than the grader keeps.",
    "bad-reply": "the runner's reply was late, malformed or too large; code that writes to file descriptors is "
                 "worth a conversation.",
    "forbidden-call": "the code ran a PyTorch function the exercise forbids (the feedback says which); the values "
                      "decided the score. Is the work the student's own?",
    "similar-to": "a solution cell is nearly another student's, or a piece of tfm_ref: read both.",
    "unaudited-code": "a cell too large or too deeply nested to audit: read it yourself.",
    "syntax-error": "a cell could not be parsed.",
    "submission-too-large": "the student's notebooks together were over --max-submission-mb: look at what they "
                            "handed in, and grade again with a larger budget if it is right.",
    "gradebook-error": "nbgrader's autograde step failed on it.",
    "feedback-error": "no feedback page was written (the traceback is in grader-errors.log).",
    **dict.fromkeys(("imports-reference", "imports-grader", "introspection", "patches-modules", "torch-internals",
                     "reads-files", "runs-commands", "dynamic-code"),
                    "is the work the student's own? Read the solution cells."),
    **dict.fromkeys(("missing-notebook", "corrupted-notebook", "notebook-too-large", "symlink-outside",
                     "unsafe-zip-member", "file-too-large"),
                    "the notebook was not, or not all, graded: get the file again."),
    **dict.fromkeys(("grader-error", "grader-crashed", "sandbox-failed"),
                    "the grader's own failure: grade this notebook again (the traceback is in grader-errors.log)."),
}
"""What each flag asks of the instructor, in the note formgrader shows (``late``'s is `grader_note`'s own)."""

UNFLAGGED = frozenset({"time-unverified", "no-timestamp"})
"""Flags a whole run without --submitted-at shares: in the note, but not "Flagged?" in formgrader."""


def _duration(seconds: float) -> str:
    minutes = round(seconds / 60)
    days, minutes = divmod(minutes, 24 * 60)
    hours, minutes = divmod(minutes, 60)
    parts = [f"{days} d"] * bool(days) + [f"{hours} h"] * bool(hours) + [f"{minutes} min"] * bool(minutes)
    return " ".join(parts) or f"{seconds:.0f} s"


def grader_note(flags: Iterable[str], seconds_late: float = 0.0, penalty: float = 0.0, score: float = 0.0,
                max_score: float = 0.0) -> str:
    """The note formgrader shows for ``flags``: one line per flag, ``late`` with how late and the penalty; near
    copies last, in one line, so that a run problem is not below the fold of formgrader's comment box."""
    own, similar = sorted(f for f in set(flags) if not is_similarity(f)), sorted(filter(is_similarity, set(flags)))
    lines = []
    for flag in own + [", ".join(similar)] * bool(similar):
        kind = flag.partition(":")[0]
        text = FLAG_NOTES.get(kind, "see autograde/README.md.")
        if kind == "late":
            text = (f"handed in {_duration(seconds_late)} after the due date. " +
                    (f"The late policy took {penalty:g} point{'s' * (penalty != 1)} off: "
                     f"{after_penalty(score, penalty):g} / {max_score:g} after it. Formgrader's lists give that score "
                     f"when its server has loaded the course's extension autograde.formgrader (docs/instructor.md, "
                     f"Formgrader), as grades.csv, nbgrader export and the feedback page do." if penalty
                     else "The late policy took nothing off."))
        lines.append(f"- {flag}: {text}")
    if not lines:
        return ""
    return f"{GRADER_NOTE} (the student does not see this note):\n" + "\n".join(lines)


def _cell_order(out: Path, student: str, assignment: str, notebook: str) -> list[str]:
    """The grade ids of the autograded notebook's cells, in order (empty when it cannot be read)."""
    try:
        with (out / "autograded" / student / assignment / f"{notebook}.ipynb").open(encoding="utf-8") as f:
            cells = json.load(f).get("cells", [])
        return [((c.get("metadata") or {}).get("nbgrader") or {}).get("grade_id", "") for c in cells]
    except (OSError, ValueError, AttributeError):
        return []


def flag_submissions(db_url: str, flagged: Iterable[tuple[str, str, Iterable[str]]], out: Path) -> None:
    """For each ``(student, assignment, flags)`` the gradebook has, set formgrader's "Flagged?" (any flag but
    `UNFLAGGED`) and put `grader_note` in the first solution cell's automatic comment, replacing an earlier run's
    (first in the order of the autograded notebook under the course root ``out``)."""
    gb = shared_gradebook(db_url)
    gb.db.rollback()
    try:
        for student, assignment, flags in flagged:
            if (submission := find_submission(gb, student, assignment)) is None:
                continue
            flags = set(flags)
            note = grader_note(flags, submission.total_seconds_late or 0.0, submission.late_submission_penalty or 0.0,
                               submission.score or 0.0, submission.max_score or 0.0)
            for notebook in submission.notebooks:
                notebook.flagged = bool(flags - UNFLAGGED)
                comments = {c.cell.name: c for c in notebook.comments}
                for comment in comments.values():  # an earlier run's note goes
                    if GRADER_NOTE in (comment.auto_comment or ""):
                        comment.auto_comment = shown_comment(comment.auto_comment) or None
                if note and comments:
                    order = _cell_order(out, student, assignment, notebook.name)
                    first = min(comments, key=lambda name: (order.index(name) if name in order else len(order), name))
                    comments[first].auto_comment = "\n\n".join(filter(None, [comments[first].auto_comment, note]))
        gb.db.commit()
    except BaseException:
        gb.db.rollback()
        raise


def _time(folder: Path, notebook: Path) -> tuple[datetime.datetime | None, datetime.datetime | None]:
    """When a submission was handed in (its ``timestamp.txt``) and when its notebook was written; None if unknown."""
    stamped = None
    try:
        stamped = parse_utc((folder / "timestamp.txt").read_text().strip()) or None
    except (OSError, ValueError, OverflowError):
        pass
    try:
        written = datetime.datetime.fromtimestamp(notebook.stat().st_mtime, datetime.timezone.utc)
    except OSError:
        written = None
    return stamped, written


def keep_submission(submitted: Path, student: str, assignment: str, notebook: Path, staged: Path) -> bool:
    """Copy the submission and its staged ``timestamp.txt``/``submission_secret.txt`` into ``submitted/``, as
    ``nbgrader collect`` would; whether it did. Never over itself or over one that may be newer (a later time, a
    time where this has none, or, neither timed, a notebook written later)."""
    folder, ours_folder = submitted / student / assignment, staged / student / assignment
    dest = folder / f"{assignment}.ipynb"
    if folder.is_dir() and notebook.resolve().parent == folder.resolve():
        return False
    if dest.exists():
        (ours, written), (theirs, their_written) = _time(ours_folder, notebook), _time(folder, dest)
        if theirs is not None:
            if ours is None or ours < theirs:
                return False
        elif ours is None and (written is None or their_written is None or written < their_written):
            return False
    folder.mkdir(parents=True, exist_ok=True)
    for name, source in ((dest.name, notebook), *((n, ours_folder / n) for n in EXCHANGE_FILES)):
        target = folder / name
        if not source.is_file():
            target.unlink(missing_ok=True)  # an older submission's: it would describe this one wrongly
            continue
        fd, partial = tempfile.mkstemp(dir=folder, prefix=f".{name}.")
        os.close(fd)
        shutil.copyfile(source, partial)
        os.replace(partial, target)  # a reader never sees half a file
    return True
