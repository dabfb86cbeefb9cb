"""What the grader asks nbgrader's gradebook (SQLite by default, any SQLAlchemy URL: PostgreSQL).

The assignment and its grade cells are recorded by ``generate_assignment`` (`autograde.release`),
the submissions and their grades by nbgrader's autograde step (`autograde.autograded`); here the
grader only checks that an assignment is known, reads back what nbgrader decided about each
submission (its score, and how late it was and what that cost), and forgets a submission time that
an earlier run recorded when this run has none for it.
"""
from __future__ import annotations

from dataclasses import dataclass

from nbgrader.api import Gradebook, MissingEntry
from sqlalchemy.exc import SQLAlchemyError

from .course import tools_on_path

__all__ = ["GradebookError", "Recorded", "has_assignment", "recorded", "forget_times"]


class GradebookError(RuntimeError):
    """The gradebook cannot be opened."""


@dataclass(frozen=True)
class Recorded:
    score: float  # before the late penalty
    penalty: float
    seconds_late: float


def _open(db_url: str) -> Gradebook:
    tools_on_path()
    try:
        return Gradebook(db_url)
    except SQLAlchemyError as error:
        raise GradebookError(f"cannot open the gradebook {db_url}: {str(getattr(error, 'orig', None) or error).strip()}") from None


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
            try:
                submission = gb.find_submission(assignment, student)
            except MissingEntry:
                continue
            found[(student, assignment)] = Recorded(submission.score, submission.late_submission_penalty,
                                                    submission.total_seconds_late)
    return found


def forget_times(db_url: str, pairs: list[tuple[str, str]]) -> None:
    """Clear the recorded time of each (student, assignment) submission the gradebook has. nbgrader's autograde
    step keeps the time it holds when a submission comes without one: an earlier run's time (the student's own
    claim, say) would decide the late penalty of a row that says it has none (``no-timestamp``)."""
    with _open(db_url) as gb:
        for student, assignment in pairs:
            try:
                gb.find_submission(assignment, student).timestamp = None
            except MissingEntry:
                continue
        gb.db.commit()
