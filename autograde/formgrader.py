"""Formgrader's scores after the late penalty: a Jupyter server extension for the instructor's server.

nbgrader's formgrader adds up a submission's cells and shows that, the score before the late policy's penalty,
while ``grades.csv``, ``nbgrader export`` and the feedback page give the score after it. Loaded beside formgrader
(``autograde/jupyter_server_config.d/autograde.json``, installed with the package, enables it), this extension
gives formgrader `FinalScores`: its lists of submissions, students and notebooks and its averages show the score
after the penalty, never below 0, as nbgrader's export computes it. The grading page's cell scores stay nbgrader's
(a cell has no penalty), and so do the code, written and task parts of a score.
"""
from __future__ import annotations

from collections.abc import Iterable

from nbgrader.api import Assignment, Notebook, SubmittedAssignment, SubmittedNotebook
from nbgrader.apps.api import NbGraderAPI

from .gradebook import after_penalty

__all__ = ["FinalScores"]


def _mean(scores: Iterable[float]) -> float:
    scores = list(scores)
    return sum(scores) / len(scores) if scores else 0.0


def _set_scores(rows: list[dict], final: dict[str, float]) -> list[dict]:
    """``rows`` (nbgrader's dicts of submissions) with the score of each one ``final`` has by id."""
    for row in rows:
        if row.get("id") in final:
            row["score"] = final[row["id"]]
    return rows


class FinalScores(NbGraderAPI):
    """nbgrader's API for formgrader, with every submitted assignment's and notebook's score, every student's
    total and every average after the late penalty."""

    def _assignments(self, *criteria) -> list[tuple[str, str, float]]:
        """``(id, student, score after the penalty)`` of each submitted assignment that ``criteria`` select."""
        with self.gradebook as gb:
            rows = (gb.db.query(SubmittedAssignment.id, SubmittedAssignment.student_id, SubmittedAssignment.score,
                                SubmittedAssignment.late_submission_penalty)
                    .join(Assignment, SubmittedAssignment.assignment_id == Assignment.id)
                    .filter(*criteria).all())
        return [(id_, student, after_penalty(score, penalty)) for id_, student, score, penalty in rows]

    def _assignment_scores(self, *criteria) -> dict[str, float]:
        """The score after the penalty of each submitted assignment that ``criteria`` select, by id."""
        return {id_: score for id_, _, score in self._assignments(*criteria)}

    def _notebook_scores(self, *criteria) -> dict[str, float]:
        """The score after the penalty of each submitted notebook that ``criteria`` select, by id."""
        with self.gradebook as gb:
            rows = (gb.db.query(SubmittedNotebook.id, SubmittedNotebook.score,
                                SubmittedNotebook.late_submission_penalty)
                    .join(SubmittedAssignment, SubmittedNotebook.assignment_id == SubmittedAssignment.id)
                    .join(Notebook, SubmittedNotebook.notebook_id == Notebook.id)
                    .join(Assignment, Notebook.assignment_id == Assignment.id)
                    .filter(*criteria).all())
        return {id_: after_penalty(score, penalty) for id_, score, penalty in rows}

    def _totals(self, *criteria) -> dict[str, float]:
        """Each student's total over the submitted assignments that ``criteria`` select, after the penalties."""
        totals: dict[str, float] = {}
        for _, student, score in self._assignments(*criteria):
            totals[student] = totals.get(student, 0.0) + score
        return totals

    def get_assignment(self, assignment_id, released=None):
        assignment = super().get_assignment(assignment_id, released)
        if assignment is not None and assignment["id"] is not None:
            assignment["average_score"] = _mean(self._assignment_scores(Assignment.name == assignment_id).values())
        return assignment

    def get_notebooks(self, assignment_id):
        notebooks = super().get_notebooks(assignment_id)
        for notebook in notebooks:
            if notebook["id"] is not None:
                notebook["average_score"] = _mean(self._notebook_scores(Notebook.id == notebook["id"]).values())
        return notebooks

    def get_submission(self, assignment_id, student_id, ungraded=None, students=None):
        submission = super().get_submission(assignment_id, student_id, ungraded, students)
        if submission is None:
            return None
        return _set_scores([submission], self._assignment_scores(Assignment.name == assignment_id,
                                                                 SubmittedAssignment.student_id == student_id))[0]

    def get_submissions(self, assignment_id):
        return _set_scores(super().get_submissions(assignment_id),
                           self._assignment_scores(Assignment.name == assignment_id))

    def get_notebook_submissions(self, assignment_id, notebook_id):
        return _set_scores(super().get_notebook_submissions(assignment_id, notebook_id),
                           self._notebook_scores(Assignment.name == assignment_id, Notebook.name == notebook_id))

    def get_student_notebook_submissions(self, student_id, assignment_id):
        return _set_scores(super().get_student_notebook_submissions(student_id, assignment_id),
                           self._notebook_scores(Assignment.name == assignment_id,
                                                 SubmittedAssignment.student_id == student_id))

    def get_student(self, student_id, submitted=None):
        student = super().get_student(student_id, submitted)
        if student is not None:
            student["score"] = self._totals(SubmittedAssignment.student_id == student_id).get(student_id, 0.0)
        return student

    def get_students(self):
        students, totals = super().get_students(), self._totals()
        for student in students:
            student["score"] = totals.get(student["id"], 0.0)
        return students


def _jupyter_server_extension_points():
    return [{"module": "autograde.formgrader"}]


def _load_jupyter_server_extension(serverapp) -> None:
    """Formgrader builds its API from ``base.NbGraderAPI`` on every request and has no setting for that class:
    the extension names `FinalScores` there."""
    from nbgrader.server_extensions.formgrader import base

    base.NbGraderAPI = FinalScores
    serverapp.log.info("autograde.formgrader: formgrader shows every score after the late penalty")
