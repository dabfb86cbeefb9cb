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
3. Then it tells formgrader what the grader found (`flag_submissions`): a flagged submission is "Flagged?" in
   formgrader, and the flags, with what each asks of the instructor (and the late penalty, since formgrader's
   scores are before it), are the automatic comment of its first solution cell, which formgrader shows in that
   cell's comment box and the feedback page leaves out (`autograde.feedback.GRADER_NOTE`).
4. When it grades into the course root, it leaves the student's notebook (and ``timestamp.txt``, when the time is
   known) in the course's ``submitted/<student>/<assignment>/``, as ``nbgrader collect`` would, so formgrader
   counts it; never over a newer submission there (`keep_submission`).

nbgrader's own ``autograde`` (the command, and formgrader's Autograde button) would run each submission in an
ordinary kernel, outside the sandbox: the course's config makes its converter refuse (`SandboxOnly`), saying to
grade with ``python -m autograde grade``; the `Recorder` uses the converter without that refusal and without
its kernel.
"""
from __future__ import annotations

import datetime
import functools
import glob
import json
import logging
import os
import shutil
import tempfile
import warnings
from collections.abc import Iterable
from pathlib import Path

import nbformat
from nbconvert.exporters import NotebookExporter
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output
from sqlalchemy.exc import SAWarning
from traitlets.config import Config

from .collection import exportable_id
from .feedback import GRADER_NOTE
from .gradebook import Recorded, recorded
from .messages import ENGLISH, METADATA, language
from .notebook import GradedCell

__all__ = ["executed_notebook", "write_executed", "stage_files", "Recorder", "nbgrader_log", "literal_glob",
           "SandboxOnly", "SANDBOX_ONLY", "FLAG_NOTES", "UNFLAGGED", "grader_note", "flag_submissions",
           "keep_submission", "shared_gradebook"]

SANDBOX_ONLY = ("Refused: nbgrader's autograde would run the students' code in an ordinary kernel,\n"
                "with your files and your rights, outside the course's sandbox.\n"
                "Grade with `python -m autograde grade submitted` at the course root instead:\n"
                "it runs each notebook in the sandbox, then nbgrader's autograde step and\n"
                "generate_feedback itself (autograde/README.md).")
"""Short lines: formgrader shows the message in a box that does not wrap."""


class SandboxOnly(NotebookExporter):
    """nbgrader's ``Autograde`` converter's exporter in the course's config: it refuses, with `SANDBOX_ONLY`, before
    nbgrader touches a folder or the gradebook (``nbgrader autograde``, formgrader's Autograde button and its API
    route all build it first). The `Recorder` puts nbgrader's own exporter back."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        from nbgrader.converters import NbGraderException

        log = getattr(self.parent, "log", None) or logging.getLogger("nbgrader")
        log.error(SANDBOX_ONLY)
        raise NbGraderException(SANDBOX_ONLY)

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
    """The notebook as the sandbox ran it: ``cells`` with their outputs, nbgrader metadata kept; and the language its
    checks spoke (`autograde.messages`), which its feedback page speaks too, whoever writes it."""
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
        course_root = Path(config.CourseDirectory.get("root", out))
        # the course's submitted/, where formgrader counts submissions: only when grading into the course root
        self.submitted = (course_root / config.CourseDirectory.get("submitted_directory", "submitted")
                          if course_root.resolve() == out.resolve() else None)
        self.coursedir = CourseDirectory(config=config, root=str(out), submitted_directory=str(staging))
        self.converter = Autograde(coursedir=self.coursedir, config=config, log=nbgrader_log())
        self.converter.exporter_class = NotebookExporter  # nbgrader's own: the course config's refuses (SandboxOnly)
        self.converter.force = True  # grading again replaces what an earlier run left
        skipped = (ClearOutput, Execute, CheckCellMetadata)
        self.converter.sanitize_preprocessors = [p for p in self.converter.sanitize_preprocessors if p not in skipped]
        self.converter.autograde_preprocessors = [p for p in self.converter.autograde_preprocessors if p not in skipped]

    def record(self, student: str, assignment: str, flags: Iterable[str] = (),
               submission: Path | str | None = None) -> Recorded | None:
        """Autograde the staged notebook of ``student``; what the gradebook then holds (None: nothing). An id
        that `autograde.collection.exportable_id` refuses is never recorded: None.

        ``flags``, the row's so far (``late`` is added here when nbgrader found the submission late), go to
        formgrader (`flag_submissions`); ``submission``, the notebook as the student handed it in, to the course's
        ``submitted/`` when grading into the course root (`keep_submission`)."""
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
    "late": "handed in after the due date.",
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
"""What each flag asks of the instructor, in the note formgrader shows (autograde/README.md says more)."""

UNFLAGGED = frozenset({"time-unverified", "no-timestamp"})
"""Flags that say where a time came from, which a whole run shares (no --submitted-at file): in the note, but they
do not make a submission "Flagged?" in formgrader."""


def _duration(seconds: float) -> str:
    minutes = round(seconds / 60)
    days, minutes = divmod(minutes, 24 * 60)
    hours, minutes = divmod(minutes, 60)
    parts = [f"{days} d"] * bool(days) + [f"{hours} h"] * bool(hours) + [f"{minutes} min"] * bool(minutes)
    return " ".join(parts) or f"{seconds:.0f} s"


def grader_note(flags: Iterable[str], seconds_late: float = 0.0, penalty: float = 0.0, score: float = 0.0,
                max_score: float = 0.0) -> str:
    """The note formgrader shows for a submission with ``flags`` (empty: none): one line per flag, what it asks;
    ``late`` with how late, and the late penalty, which formgrader's scores do not include."""
    lines = []
    for flag in sorted(set(flags)):
        kind = flag.partition(":")[0]
        text = FLAG_NOTES.get(kind, "see autograde/README.md.")
        if kind == "late":
            text = (f"handed in {_duration(seconds_late)} after the due date. " +
                    (f"The late policy took {penalty:g} points off: {max(score - penalty, 0.0):g} / {max_score:g} "
                     f"after it. Formgrader's scores are before the penalty; grades.csv, nbgrader export and the "
                     f"feedback page are after it." if penalty else "The late policy took nothing off."))
        lines.append(f"- {flag}: {text}")
    if not lines:
        return ""
    return f"{GRADER_NOTE} (the student does not see this note):\n" + "\n".join(lines)


def _cell_order(out: Path | None, student: str, assignment: str, notebook: str) -> list[str]:
    """The grade ids of the autograded notebook's cells, in order (empty when it cannot be read)."""
    if out is None:
        return []
    try:
        with (out / "autograded" / student / assignment / f"{notebook}.ipynb").open(encoding="utf-8") as f:
            cells = json.load(f).get("cells", [])
        return [((c.get("metadata") or {}).get("nbgrader") or {}).get("grade_id", "") for c in cells]
    except (OSError, ValueError, AttributeError):
        return []


@functools.lru_cache(maxsize=None)
def shared_gradebook(db_url: str):
    """One nbgrader ``Gradebook`` for the process and ``db_url``: SQLAlchemy then compiles each query once, where a
    gradebook opened per notebook (as nbgrader's ``GetGrades`` does) compiled them all again, most of what reading a
    notebook's grades cost. Whoever uses it ends their transaction (commit or rollback) before returning, and
    starts with a rollback, so that it reads what other connections committed and SQLite holds no lock between
    notebooks."""
    from nbgrader.api import Gradebook

    from .course import tools_on_path

    tools_on_path()
    return Gradebook(db_url)


def flag_submissions(db_url: str, flagged: Iterable[tuple[str, str, Iterable[str]]], out: Path | None = None) -> None:
    """For each ``(student, assignment, flags)`` the gradebook has: formgrader's "Flagged?" (set by any flag but
    the `UNFLAGGED` ones, cleared otherwise: each grading run decides it anew) and the grader's note (`grader_note`)
    as the automatic comment of the notebook's first solution cell, after nbgrader's own ("No response."); an
    earlier run's note goes. ``out``: where the autograded notebooks are, for the order of the cells."""
    from nbgrader.api import MissingEntry

    gb = shared_gradebook(db_url)
    gb.db.rollback()
    try:
        for student, assignment, flags in flagged:
            flags = set(flags)
            try:
                submission = gb.find_submission(assignment, student)
            except MissingEntry:
                continue
            note = grader_note(flags, submission.total_seconds_late or 0.0, submission.late_submission_penalty or 0.0,
                               submission.score or 0.0, submission.max_score or 0.0)
            for notebook in submission.notebooks:
                notebook.flagged = bool(flags - UNFLAGGED)
                comments = {c.cell.name: c for c in notebook.comments}
                for comment in comments.values():  # an earlier run's note goes
                    if comment.auto_comment and GRADER_NOTE in comment.auto_comment:
                        comment.auto_comment = comment.auto_comment.split(GRADER_NOTE, 1)[0].strip() or None
                order = _cell_order(out, student, assignment, notebook.name)
                first = sorted(comments, key=lambda name: (order.index(name) if name in order else len(order), name))
                if note and first:
                    comment = comments[first[0]]
                    comment.auto_comment = "\n\n".join(filter(None, [comment.auto_comment, note]))
        gb.db.commit()
    except BaseException:
        gb.db.rollback()
        raise


def _time(folder: Path, notebook: Path) -> tuple[datetime.datetime | None, datetime.datetime | None]:
    """When a submission was handed in (its ``timestamp.txt``, None without one) and when its notebook was
    written (None: no notebook)."""
    from nbgrader.utils import parse_utc

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
    """Put ``notebook`` (the submission as handed in) into ``submitted/<student>/<assignment>/<assignment>.ipynb``,
    with the ``timestamp.txt`` and ``submission_secret.txt`` staged beside the graded one in ``staged/<student>/
    <assignment>/``, as ``nbgrader collect`` leaves a submission; whether it did. It does not when the notebook
    is already there (the class was graded from ``submitted/``), nor over a submission that may be newer: one
    with a later time, or with a time when this one has none, or, neither having one, a notebook written
    later."""
    folder, stage = submitted / student / assignment, staged / student / assignment
    dest = folder / f"{assignment}.ipynb"
    if folder.is_dir() and notebook.resolve().parent == folder.resolve():
        return False
    if dest.exists():
        ours, theirs = _time(stage, notebook), _time(folder, dest)
        if theirs[0] is not None:
            if ours[0] is None or ours[0] < theirs[0]:
                return False
        elif ours[0] is None and (ours[1] is None or theirs[1] is None or ours[1] < theirs[1]):
            return False
    folder.mkdir(parents=True, exist_ok=True)
    for name, source in ((dest.name, notebook), *((n, stage / n) for n in ("timestamp.txt", "submission_secret.txt"))):
        target = folder / name
        if not source.is_file():
            target.unlink(missing_ok=True)  # an older submission's: it would describe this one wrongly
            continue
        fd, partial = tempfile.mkstemp(dir=folder, prefix=f".{name}.")
        os.close(fd)
        shutil.copyfile(source, partial)
        os.replace(partial, target)  # a reader never sees half a file
    return True
