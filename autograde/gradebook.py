"""What the grader asks nbgrader's gradebook (SQLite by default, any SQLAlchemy URL: PostgreSQL).

nbgrader's own steps record assignments and grades; the grader only checks that an assignment is known,
reads back what nbgrader decided (score, lateness, penalty), and forgets times an earlier run recorded.
Formgrader's flags and the feedback page use the one connection a process keeps (`shared_gradebook`).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

from nbgrader.api import Gradebook, MissingEntry
from sqlalchemy.exc import SQLAlchemyError

from .course import tools_on_path

__all__ = ["GradebookError", "after_penalty", "Recorded", "shared_gradebook", "find_submission", "has_assignment",
           "recorded", "forget_times"]


class GradebookError(RuntimeError):
    """The gradebook cannot be opened."""


def after_penalty(score: float, penalty: float | None) -> float:
    """A score after the late policy's penalty, never below 0: what grades.csv, nbgrader export, formgrader (with
    `autograde.formgrader`) and the feedback page give."""
    return max(0.0, score - (penalty or 0.0))


@dataclass(frozen=True)
class Recorded:
    score: float  # before the late penalty
    penalty: float
    seconds_late: float
    cells: dict[str, float]  # each graded cell's score: a score given by hand in formgrader, else the grader's

    @property
    def final_score(self) -> float:
        """The score after the late penalty: what grades.csv and nbgrader export give."""
        return after_penalty(self.score, self.penalty)

    @property
    def taken_off(self) -> float:
        """The points the late penalty took off: ``final_score + taken_off`` is nbgrader's score, before it."""
        return self.score - self.final_score

    def cell_scores(self, graded: dict[str, float]) -> dict[str, float]:
        """``graded`` (grade id → points the checks gave) with the gradebook's score wherever it holds one."""
        return {grade_id: self.cells.get(grade_id, points) for grade_id, points in graded.items()}


def _open(db_url: str) -> Gradebook:
    tools_on_path()
    try:
        return Gradebook(db_url)
    except SQLAlchemyError as error:
        raise GradebookError(f"cannot open the gradebook {db_url}: {str(getattr(error, 'orig', None) or error).strip()}") from None


@functools.cache
def shared_gradebook(db_url: str) -> Gradebook:
    """One ``Gradebook`` per process and ``db_url``, so SQLAlchemy compiles each query once. Its users start with a
    rollback and end their transaction before returning, so SQLite holds no lock between notebooks."""
    return _open(db_url)


def has_assignment(db_url: str, assignment: str) -> bool:
    with _open(db_url) as gb:
        try:
            gb.find_assignment(assignment)
        except MissingEntry:
            return False
        return True


def recorded(db_url: str, pairs: list[tuple[str, str]]) -> dict[tuple[str, str], Recorded]:
    """What the gradebook holds for each (student, assignment) submission that it has."""
    found = {}
    with _open(db_url) as gb:
        for student, assignment in pairs:
            if (submission := find_submission(gb, student, assignment)) is not None:
                cells = {grade.name: grade.score for notebook in submission.notebooks for grade in notebook.grades}
                found[(student, assignment)] = Recorded(submission.score, submission.late_submission_penalty,
                                                        submission.total_seconds_late, cells)
    return found


def forget_times(db_url: str, pairs: list[tuple[str, str]]) -> None:
    """Clear each submission's recorded time: nbgrader would keep an earlier run's for a ``no-timestamp`` row."""
    with _open(db_url) as gb:
        for student, assignment in pairs:
            if (submission := find_submission(gb, student, assignment)) is not None:
                submission.timestamp = None
        gb.db.commit()


def find_submission(gb: Gradebook, student: str, assignment: str):
    """The gradebook's submission of ``assignment`` by ``student``, or None."""
    try:
        return gb.find_submission(assignment, student)
    except MissingEntry:
        return None
