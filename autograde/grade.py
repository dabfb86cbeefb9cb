"""``python -m autograde grade SUBMISSIONS [--out OUT]``: grade a class, nbgrader's way.

SUBMISSIONS is a folder (or a .zip of one) laid out ``<student_id>/<assignment>/<assignment>.ipynb``,
as ``nbgrader collect`` leaves ``submitted/`` (`autograde.collection`). Each notebook is graded by
one of ``jobs`` trusted slot processes (`autograde.pool`, `autograde.slot`): its cells run in a
fresh sandboxed runner, its checks in the slot. Then, in the slot, nbgrader's own autograde step
records the grades, timestamps and late penalties in the gradebook (`autograde.autograded`) and
the feedback page is written where nbgrader's generate_feedback puts it (`autograde.feedback`).
OUT (the course root by default, where formgrader and ``nbgrader release_feedback`` look) receives

    OUT/autograded/<student_id>/<assignment>/<assignment>.ipynb   the notebook as it ran, for formgrader
    OUT/feedback/<student_id>/<assignment>/<assignment>.html      the page the student gets
    OUT/grades.csv                                                student_id, assignment, notebook, score, max_score, flags, per-cell scores
    OUT/checks.csv                                                one row per check made: what it found (`CHECK_COLUMNS`)
    OUT/grader-errors.log                                         the grader's own failures (grader-error…), with tracebacks

``score`` is after nbgrader's late penalty (a late submission has the flag ``late``), computed from the time
the instructor's ``submitted_at`` file gives (an LMS export: `autograde.collection.read_submission_times`), else
from the student's own ``timestamp.txt``, flagged ``time-unverified`` (`autograde.collection.settle_times`). Every
submission gets a row scored against the assignment's real maximum, whatever it holds; if the
gradebook cannot be opened or the sandbox cannot start at all, nothing is graded and
`GradingError` says why.
"""
from __future__ import annotations

import csv
import re
import secrets
import sqlite3
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

import nbformat
from sqlalchemy.engine import make_url

from .autograded import Recorder
from .collection import (MAX_STUDENT_MB, CollectionError, exportable_id, extract_zip, find_submissions,
                         read_submission_times, settle_times, shown, unmatched_times, without_assignments)
from .course import ROOT, assignment_ids, nbgrader_config, released_notebook
from .gradebook import GradebookError, forget_times, has_assignment
from .notebook import merge, solution_sources
from .pool import SlotError, SlotPool
from .release import release, source_notebook
from .sandbox import Limits
from .similarity import similarity_flags
from .slot import unscored_row

__all__ = ["grade", "GradingError", "CSV_COLUMNS"]

CSV_COLUMNS = ["student_id", "assignment", "notebook", "score", "max_score", "flags", "cells"]
CHECK_COLUMNS = ["student_id", "assignment", "cell", "exercise", "hidden", "passed", "mistake", "delegated"]
"""checks.csv: each check of each notebook (its test cell's grade id, the exercise key, visible or hidden), whether it
passed, the catalogued mistake its failure named (empty: none named), and the forbidden operators that ran."""
ERRORS_LOG = "grader-errors.log"


class GradingError(RuntimeError):
    """Nothing was graded: the submissions or the gradebook cannot be read, or the sandbox cannot start."""


def _assets(assignments: list[str], db_url: str, root: Path) -> dict[str, tuple]:
    """Source and released notebooks; (re)released when stale or unknown to the gradebook."""
    sources = {a: source_notebook(a, root / "solutions") for a in assignments}
    stale = []
    for assignment, source in sources.items():
        released = released_notebook(assignment, root)
        if not has_assignment(db_url, assignment) or not released.exists() or released.stat().st_mtime < source.stat().st_mtime:
            stale.append(assignment)
    if stale:
        release(stale, db_url, root)
    return {a: (nbformat.read(source, 4), nbformat.read(released_notebook(a, root), 4)) for a, source in sources.items()}


def _keep_a_copy(db_url: str) -> None:
    """A SQLite gradebook as it was before this run, beside it (``gradebook.db.before-grading``): grading commits
    without waiting for the disk (`autograde.autograded`), so a machine that dies mid-run could spoil the file."""
    url = make_url(db_url)
    if url.get_backend_name() == "sqlite" and url.database and Path(url.database).is_file():
        source = sqlite3.connect(url.database)
        try:
            with sqlite3.connect(f"{url.database}.before-grading") as copy:
                source.backup(copy)
        finally:
            source.close()


def grade(submissions: Path, out: Path | None = None, jobs: int = 1, db_url: str | None = None,
          limits: Limits = Limits(), root: Path = ROOT, progress: bool = True, submitted_at: Path | None = None,
          timezone: str = "UTC", max_submission_mb: float = MAX_STUDENT_MB) -> list[dict]:
    """Grade every submission under ``submissions`` (folder or .zip); see the module docstring.

    Args:
        out: where nbgrader's folders and grades.csv go; default: the course root ``root``.
        db_url: the gradebook; default: the course's nbgrader config's.
        submitted_at: the instructor's ``student_id, assignment, time`` file: the times the late policy uses
            (a time without a zone is in ``timezone``); default: the students' own ``timestamp.txt``.
        max_submission_mb: a student's notebooks together (all assignments): over it, none of them is read.
    Returns:
        the rows written to ``out/grades.csv``, sorted by student and assignment.
    Raises:
        GradingError: nothing could be graded (and nothing was written).
    """
    out = out or root
    try:
        record = read_submission_times(submitted_at, timezone) if submitted_at is not None else None
    except CollectionError as error:
        raise GradingError(str(error)) from None
    config = nbgrader_config(db_url, root)
    db_url = config.CourseDirectory.db_url
    known = assignment_ids(root / "solutions")
    max_bytes, student_bytes = int(limits.notebook_mb * 2**20), int(max_submission_mb * 2**20)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise GradingError(f"cannot write the results to {out}: {error.strerror or error}") from None
    with tempfile.TemporaryDirectory() as tmp:
        try:
            if submissions.suffix == ".zip" and submissions.is_file():
                folder, found = extract_zip(submissions, Path(tmp) / "zip", known, max_bytes, student_bytes)
            elif submissions.is_dir():
                folder, found = submissions, {}
            else:
                raise CollectionError(f"{submissions} is neither a folder nor a .zip of one")
        except CollectionError as error:
            raise GradingError(str(error)) from None
        subs = settle_times(find_submissions(folder, known, max_bytes, found, student_bytes), record)
        for name in without_assignments(folder, known):
            print(f"not graded: {shown(name)}/ holds no folder named after an assignment ({', '.join(known)})",
                  file=sys.stderr)
        for student, assignment, line in unmatched_times(subs, record) if record else ():
            print(f"{record.source} line {line}: no submission of {assignment} by {shown(student)}", file=sys.stderr)
        _keep_a_copy(db_url)
        try:
            assets = _assets(sorted({s.assignment for s in subs}), db_url, root)
            # a time the gradebook holds from an earlier run is not this run's: a row without one counts as on time
            forget_times(db_url, [(s.student_id, s.assignment) for s in subs if not s.timestamp])
        except GradebookError as error:
            raise GradingError(str(error)) from None
        staging = Path(tmp) / "submitted"  # the notebooks as they ran, for nbgrader's autograde step: a folder per slot
        own_staging = staging / "main"
        tasks = [{"student_id": s.student_id, "assignment": s.assignment, "path": str(s.path) if s.path else None,
                  "flags": list(s.flags), "timestamp": s.timestamp, "secret": s.secret} for s in subs]
        recorder = None  # this process's own (staged in own_staging), for the rare row of a slot that died

        def unscored(task: dict, flag: str) -> dict:
            nonlocal recorder
            recorder = recorder or Recorder(own_staging, out, config)
            return unscored_row(task, merge(*assets[task["assignment"]], None), flag,
                                "the grader failed on this notebook; your instructor will look at it.", own_staging,
                                recorder)

        # one seed for the class: every student's checks get the same inputs, and each slot computes them once
        pool_config = {"root": str(root), "staging": str(staging), "out": str(out.resolve()), "db_url": db_url,
                       "limits": asdict(limits), "seed": secrets.randbelow(2**31)}
        try:
            with SlotPool(jobs, pool_config) as pool:
                rows = pool.grade(tasks, 2 * limits.notebook_timeout + 120, unscored, progress)
        except SlotError as error:
            raise GradingError(str(error)) from None
    # each solution cell as released (the stub every student starts from) and as the instructor wrote it
    stubs = {(a, g): code for a, (_, released) in assets.items() for g, code in solution_sources(released).items()}
    solutions = {(a, g): code for a, (source, _) in assets.items() for g, code in solution_sources(source).items()}
    for row, flags in zip(rows, similarity_flags(rows, stubs, solutions=solutions)):
        row["flags"] = sorted({*row["flags"], *flags})
        if not exportable_id(row["student_id"]):  # the gradebook refused it (`Recorder.record`), not nbgrader failed
            row["flags"] = sorted({*row["flags"], "unexportable-student-id"} - {"gradebook-error"})
    rows.sort(key=lambda r: (r["student_id"], r["assignment"]))
    _write_csv(out / "grades.csv", rows)
    _write_checks(out / "checks.csv", rows)
    _write_errors(out / ERRORS_LOG, rows)
    return rows


def _write_errors(path: Path, rows: list[dict]) -> None:
    """The grader's own failures, each row's traceback under its student and assignment, where an instructor can
    read why (a flag on the row says that one is there); no file when there were none."""
    failed = [r for r in rows if r.get("errors")]
    path.unlink(missing_ok=True)  # from an earlier run
    if failed:
        path.write_text("".join(f"== {shown(r['student_id'])} / {r['assignment']}\n" + "\n".join(r["errors"]) + "\n"
                                for r in failed), encoding="utf-8", errors="backslashreplace")
        print(f"the grader failed on {len(failed)} notebook(s): the tracebacks are in {path}", file=sys.stderr)


_FORMULA_START = re.compile(r"(?:^|(?<=[;,\r\n]))(?=[=+\-@\t\r])")


def _cell(value: object) -> object:
    """A CSV value a spreadsheet shows as text: a formula's first character (``=``, ``+``, ``-``, ``@``, a tab, a
    carriage return) is escaped with a quote, at the start and wherever a reader may start a cell: after each ';',
    where a spreadsheet whose locale separates lists with ';' (German or French Excel) does; after a ',' or a line
    break, where one that ignores the quotes does."""
    return _FORMULA_START.sub("'", value) if isinstance(value, str) else value


def _write_csv(path: Path, rows: list[dict]) -> None:
    partial = path.with_suffix(".csv.partial")
    # A student folder whose name is not UTF-8 (os.listdir gives lone surrogates) is written escaped.
    with partial.open("w", newline="", encoding="utf-8", errors="backslashreplace") as f:
        writer = csv.DictWriter(f, CSV_COLUMNS)
        writer.writeheader()
        for row in rows:
            cells = ";".join(f"{k}={v:g}" for k, v in row["cell_scores"].items())
            values = {**{k: row[k] for k in CSV_COLUMNS if k not in ("cells", "flags")},
                      "flags": ";".join(row["flags"]), "cells": cells}
            writer.writerow({k: _cell(v) for k, v in values.items()})
    partial.replace(path)  # atomic: a reader never sees half a file


def _write_checks(path: Path, rows: list[dict]) -> None:
    partial = path.with_suffix(".csv.partial")
    with partial.open("w", newline="", encoding="utf-8", errors="backslashreplace") as f:
        writer = csv.DictWriter(f, CHECK_COLUMNS)
        writer.writeheader()
        for row in rows:
            for check in row.get("checks", ()):
                values = {"student_id": row["student_id"], "assignment": row["assignment"], **check,
                          "hidden": int(check["hidden"]), "passed": int(check["passed"]),
                          "mistake": check["mistake"] or "", "delegated": ";".join(check["delegated"])}
                writer.writerow({k: _cell(values[k]) for k in CHECK_COLUMNS})
    partial.replace(path)
