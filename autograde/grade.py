"""``python -m autograde grade SUBMISSIONS [--out OUT]``: grade a class, nbgrader's way.

SUBMISSIONS is a folder or a .zip in nbgrader's layout or an LMS's (`intake.collection`); input that holds no
submission grades nothing and changes nothing (`GradingError`, one line). Each notebook is graded by one of
``jobs`` trusted slots (`autograde.pool`, `autograde.slot`) or a Dask cluster's workers (`autograde.cluster`):
its cells run in a fresh sandboxed runner, its checks in the slot, which then records it in the gradebook
through nbgrader's own autograde step (`autograde.autograded`) and writes its feedback page
(`autograde.feedback`). OUT (the course root by default) receives nbgrader's ``autograded/`` and ``feedback/``
folders and the class's records (`autograde.records`: grades.csv, checks.csv, grader-errors.log,
grading-record.json), into which this run's rows are merged; near copies are looked for across the class's
latest submissions. What each file holds, and the times the late policy uses: autograde/README.md and
docs/instructor.md.
"""
from __future__ import annotations

import os
import secrets
import sqlite3
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

from sqlalchemy.engine import make_url

from editions.assignments import ROOT, assignment_ids, released_notebook
from intake.collection import MAX_STUDENT_MB, CollectionError, collect, exportable_id, shown
from intake.lms import MappingError, read_mapping
from intake.submission_times import (TimesError, check_zone, read_submission_times, settle_times, submission_key,
                                     unmatched_times, with_times)
from notebook_sandbox.container import Limits

from .autograded import Recorder, flag_submissions
from .course import nbgrader_config
from .gradebook import GradebookError, forget_times, has_assignment
from .notebook import merge, solution_sources
from .pool import SlotError, SlotPool
from .records import CHECK_COLUMNS, CSV_COLUMNS, ERRORS_LOG, RECORD, ClassRecords
from .release import assignment_notebooks, release, source_notebook
from .similarity import similarity_flags
from .slot import unscored_row

__all__ = ["grade", "GradingError", "CSV_COLUMNS", "CHECK_COLUMNS", "ERRORS_LOG", "RECORD"]


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
    return {a: assignment_notebooks(a, root) for a in assignments}


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


def _same_gradebook(db_url: str, records: ClassRecords) -> None:
    """Refuse a SQLite gradebook that does not exist yet for a class graded before: the class's scores, and those
    given by hand in formgrader, are in another one (a ``--db`` forgotten, a PostgreSQL gradebook the config does
    not name), and a run here would rewrite its rows and pages without them."""
    url = make_url(db_url)
    if url.get_backend_name() != "sqlite" or not url.database or Path(url.database).is_file():
        return
    if before := sum(exportable_id(row.get("student_id") or "") for row in records.grades):
        raise GradingError(f"{records.out / 'grades.csv'} holds {_count(before, 'row')} graded into a gradebook, but "
                           f"{db_url} does not exist: grade with the --db they were graded with, or name that "
                           "gradebook in autograde/nbgrader_config.py (c.CourseDirectory.db_url); to start the class "
                           "over, move grades.csv away")


def _writable(out: Path) -> None:
    """Refuse an ``out`` that cannot be made or written, before anything is: its nearest existing folder decides."""
    existing = out
    while not os.path.lexists(existing) and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise GradingError(f"cannot write the results to {out}: {existing} is not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise GradingError(f"cannot write the results to {out}: {existing} is not writable")


def _similarity_assets(assignments: set[str], assets: dict[str, tuple], root: Path) -> dict[str, tuple]:
    """Source and released notebook of each assignment the class has rows of: this run's, and (read, not
    released again) the others'; an assignment whose notebooks cannot be read is left out."""
    found = {}
    for assignment in sorted(assignments):
        if assignment in assets:
            found[assignment] = assets[assignment]
            continue
        try:
            found[assignment] = assignment_notebooks(assignment, root)
        except (OSError, ValueError):  # gone from the course since: its rows keep the flags they have
            continue
    return found


def grade(submissions: Path, out: Path | None = None, jobs: int = 1, db_url: str | None = None,
          limits: Limits = Limits(), root: Path = ROOT, progress: bool = True, submitted_at: Path | None = None,
          timezone: str = "UTC", max_submission_mb: float = MAX_STUDENT_MB, layout: str = "auto",
          mapping: Path | None = None, notes: list[str] = (), scheduler: str | None = None) -> list[dict]:
    """Grade every submission under ``submissions`` (folder or .zip); see the module docstring.

    Args:
        out: where nbgrader's folders and grades.csv go; default: the course root ``root``.
        db_url: the gradebook; default: the course's nbgrader config's.
        submitted_at: the instructor's ``student_id, assignment, time`` file: the times the late policy uses
            (a time without a zone is in ``timezone``); default: the students' own ``timestamp.txt``.
        max_submission_mb: a student's notebooks together (all assignments): over it, none of them is read.
        layout: ``auto`` (as the names show), ``nbgrader``, ``canvas``, ``moodle`` or ``blackboard``
            (`intake.collection.collect`).
        mapping: the instructor's ``lms_name, student_id`` file (`intake.lms.read_mapping`).
        notes: lines for stderr once the submissions are found, before anything is graded (`before_grading`).
        scheduler: a Dask scheduler's address (``tcp://HOST:8786``): its workers grade, ``jobs`` is unused
            (`autograde.cluster`).
    Returns:
        this run's rows, as merged into ``out/grades.csv``, sorted by student and assignment.
    Raises:
        GradingError: nothing could be graded (and nothing was written).
    """
    out = out or root
    try:
        check_zone(timezone)
        record = read_submission_times(submitted_at, timezone) if submitted_at is not None else None
        names = read_mapping(mapping) if mapping is not None else None
    except (TimesError, MappingError) as error:
        raise GradingError(str(error)) from None
    config = nbgrader_config(db_url, root)
    db_url = config.CourseDirectory.db_url
    known = assignment_ids(root / "solutions")
    max_bytes, student_bytes = int(limits.notebook_mb * 2**20), int(max_submission_mb * 2**20)
    _writable(out)
    with tempfile.TemporaryDirectory() as tmp:
        try:
            collected = collect(submissions, Path(tmp), known, max_bytes, student_bytes, layout, names, timezone)
        except CollectionError as error:
            raise GradingError(str(error)) from None
        for note in [*notes, *collected.notes]:
            print(note, file=sys.stderr)
        record = with_times(record, collected.times, str(submissions))
        subs = settle_times(collected.submissions, record)
        records = ClassRecords(out)
        _same_gradebook(db_url, records)
        _say_unmatched(unmatched_times(subs, record) if record else [], record, {s.assignment for s in subs},
                       {submission_key(*key) for key in records.record})
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise GradingError(f"cannot write the results to {out}: {error.strerror or error}") from None
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

        # one seed for the class: every student's checks get the same inputs, and each slot computes them once, for
        # the assignments graded
        pool_config = {"root": str(root), "staging": str(staging), "out": str(out.resolve()), "db_url": db_url,
                       "limits": asdict(limits), "seed": secrets.randbelow(2**31), "assignments": sorted(assets)}
        if scheduler:
            from .cluster import ClusterSlots  # Dask is loaded for a cluster only
        try:
            with ClusterSlots(scheduler, pool_config) if scheduler else SlotPool(jobs, pool_config) as pool:
                rows = pool.grade(tasks, 2 * limits.notebook_timeout + 120, unscored, progress)
        except SlotError as error:
            raise GradingError(str(error)) from None
    # near copies, over the class's latest submissions: this run's rows and everyone else's, kept in RECORD
    class_rows = records.class_rows(rows)
    known_assets = _similarity_assets({r["assignment"] for r in class_rows}, assets, root)
    class_rows = [r for r in class_rows if r["assignment"] in known_assets]
    # each solution cell as released (the stub every student starts from) and as the instructor wrote it
    stubs = {(a, g): code for a, (_, released) in known_assets.items()
             for g, code in solution_sources(released).items()}
    solutions = {(a, g): code for a, (source, _) in known_assets.items()
                 for g, code in solution_sources(source).items()}
    similar = {(r["student_id"], r["assignment"]): flags
               for r, flags in zip(class_rows, similarity_flags(class_rows, stubs, solutions=solutions))}
    records.merge(rows, similar)
    # formgrader's "Flagged?" and its note, similarity's included, for every row of the class the gradebook has
    flag_submissions(db_url, [(s, a, entry["flags"]) for (s, a), entry in records.record.items() if exportable_id(s)],
                     out)
    rows.sort(key=lambda r: (r["student_id"], r["assignment"]))
    return rows


# ---------------------------------------------------------------- what the command says

GRADER_FAILURES = ("grader-error", "grader-crashed", "sandbox-failed", "gradebook-error", "feedback-error")
SHOWN_ROWS, SHOWN_FLAGS = 8, 3  # of the flagged rows the summary names, and of each one's flags


def _say_unmatched(unmatched: list[tuple[str, str, int]], record, graded: set[str],
                   graded_before: set[tuple[str, str]], listed: int = 10) -> None:
    """Name the record's times for this run's assignments that no submission has; count the other assignments' and
    those of students graded before (the class's times file, given again to grade a few students)."""
    here = [u for u in unmatched if u[1] in graded]
    named = [u for u in here if u[:2] not in graded_before]
    for student, assignment, line in named[:listed]:
        print(f"{record.source} line {line}: no submission of {assignment} by {shown(student)}", file=sys.stderr)
    if len(named) > listed:
        print(f"{record.source}: {len(named) - listed} more times of no submission", file=sys.stderr)
    if before := len(here) - len(named):
        print(f"{record.source}: {_count(before, 'time')} of students graded before, not in this run", file=sys.stderr)
    if others := len(unmatched) - len(here):
        print(f"{record.source}: {_count(others, 'time')} of assignments this run does not grade", file=sys.stderr)


def _count(n: int, thing: str) -> str:
    return f"{n} {thing}{'' if n == 1 else 's'}"


def _gradebook(root: Path, db: str | None) -> str:
    return nbgrader_config(db, root).CourseDirectory.db_url


def before_grading(root: Path, db: str | None, out: Path, limits: Limits) -> list[str]:
    """What the instructor should know before a run: where the scores go when ``out`` is not the course root, and
    that the nbgrader config's ``c.Execute.timeout`` (nbgrader's kernel's) is not the cell timeout."""
    config = nbgrader_config(db, root)
    notes = []
    if db is not None and db != (configured := _gradebook(root, None)):
        notes.append(f"note: formgrader and nbgrader's commands without --db read {configured}, not {db}: to see "
                     "this run there, name it in autograde/nbgrader_config.py (c.CourseDirectory.db_url)")
    if out.resolve() != root.resolve() and db is None:
        notes.append(f"note: --out {out} receives the files; the scores go to the course's gradebook, "
                     f"{config.CourseDirectory.db_url}, as always (--db names another)")
    timeout = config.Execute.get("timeout") if "Execute" in config else None
    if timeout is not None and timeout != limits.cell_timeout:
        notes.append(f"note: the nbgrader config's c.Execute.timeout = {timeout} is not used (grading runs no kernel): "
                     f"a cell may run {limits.cell_timeout:g} s (--cell-timeout)")
    return notes


def _row_flags(flags: list[str], common: set[str]) -> list[str]:
    """A row's flags as the summary names them: the grader's own failures first, near copies last."""
    own = [f for f in flags if f not in common]
    return sorted(own, key=lambda f: (f not in GRADER_FAILURES, f.startswith("similar-to:"), f))


def summary(rows: list[dict], out: Path, root: Path, db: str | None = None) -> str:
    """The end of a run, for the terminal: how many were graded, who is flagged and why (a flag every row has,
    once), and where everything is."""
    several = len({r["assignment"] for r in rows}) > 1
    common = set.intersection(*(set(r["flags"]) for r in rows)) if len(rows) > 1 else set()
    flagged = [(r, _row_flags(r["flags"], common)) for r in rows]
    flagged = [(r, flags) for r, flags in flagged if flags]
    said = [f"graded {_count(len(rows), 'notebook')}"]
    if common:
        said.append(f"every one flagged {', '.join(sorted(common))}")
    if flagged:
        names = []
        for row, flags in flagged[:SHOWN_ROWS]:
            who = shown(row["student_id"]) + (f" {row['assignment']}" if several else "")
            more = f" +{len(flags) - SHOWN_FLAGS}" if len(flags) > SHOWN_FLAGS else ""
            names.append(f"{who} ({', '.join(flags[:SHOWN_FLAGS])}{more})")
        rest = f" … and {len(flagged) - SHOWN_ROWS} more" if len(flagged) > SHOWN_ROWS else ""
        said.append(f"{len(flagged)} flagged{' besides' if common else ''}: {', '.join(names)}{rest}")
    elif not common:
        said.append("none flagged")
    return ("; ".join(said) + f"\nthe class's rows → {out / 'grades.csv'} (flags: look at them), "
            f"{out / 'checks.csv'}; "
            f"notebooks as they ran → {out / 'autograded'}; feedback → {out / 'feedback'}; scores → "
            f"{_gradebook(root, db)}")
