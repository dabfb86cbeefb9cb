"""Recording grades in nbgrader's gradebook (SQLite by default, any SQLAlchemy URL).

The assignment and its grade cells are recorded by ``generate_assignment`` (`autograde.release`);
here each graded notebook becomes a submission whose grade cells get their ``auto_score``, so
nbgrader's own tools (``nbgrader export``, formgrader) see the same grades as grades.csv.
"""
from __future__ import annotations

import warnings

from nbgrader.api import Gradebook, MissingEntry
from sqlalchemy.exc import SAWarning

from .course import tools_on_path

__all__ = ["has_assignment", "record"]


def has_assignment(db_url: str, assignment: str) -> bool:
    tools_on_path()
    with Gradebook(db_url) as gb:
        try:
            gb.find_assignment(assignment)
        except MissingEntry:
            return False
        return True


def record(db_url: str, rows: list[dict]) -> None:
    """Write ``rows`` (student_id, assignment, notebook, cell_scores {grade_id: points}) in one session."""
    tools_on_path()
    with Gradebook(db_url) as gb, warnings.catch_warnings():
        warnings.simplefilter("ignore", SAWarning)  # nbgrader's add_submission autoflush notices
        for row in rows:
            gb.update_or_create_student(row["student_id"])
            try:
                gb.find_submission(row["assignment"], row["student_id"])
            except MissingEntry:
                gb.add_submission(row["assignment"], row["student_id"])
            for grade_id, points in row["cell_scores"].items():
                grade = gb.find_grade(grade_id, row["notebook"], row["assignment"], row["student_id"])
                grade.auto_score = points
                grade.needs_manual_grade = False
            gb.db.commit()
