"""The feedback a student receives: ``feedback/<student>/<assignment>/<assignment>.html``.

nbgrader's ``generate_feedback`` makes it from the autograded notebook (`autograde.autograded`)
and the gradebook, so the page is the one an instructor gets by running that command after
grading by hand in formgrader: each test cell with its score and the check's message (the likely
mistake and the smallest failing input), comments and manual scores, the late penalty. The
course's nbgrader config makes it remove hidden tests: their cells show their comment line and
the failure message, never their source. Beside the page, the submission's ``timestamp.txt`` and
``submission_secret.txt``, which ``nbgrader release_feedback`` needs.
"""
from __future__ import annotations

import glob
import os
from pathlib import Path

from traitlets.config import Config

from .autograded import nbgrader_log

__all__ = ["feedback_path", "generate_feedback"]


def feedback_path(out: Path, student_id: str, assignment: str) -> Path:
    """Where nbgrader puts the feedback page of one notebook, under the course root ``out``."""
    return out / "feedback" / student_id / assignment / f"{assignment}.html"


def generate_feedback(out: Path, config: Config, graded: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """nbgrader's generate_feedback for each (student, assignment) autograded under ``out``.

    Returns:
        the pairs nbgrader could not make a page for (it logs why).
    """
    from nbgrader.converters import GenerateFeedback, NbGraderException
    from nbgrader.coursedir import CourseDirectory

    class Graded(GenerateFeedback):
        """nbgrader's converter, for the notebooks just graded only (not every student's, as
        ``--student '*'`` would); one exporter serves them all."""

        def init_notebooks(self) -> None:
            self.notebooks = []
            self.assignments = {}
            for student, assignment in graded:
                folder = self._format_source(assignment, student)
                if found := glob.glob(os.path.join(glob.escape(folder), "*.ipynb")):
                    self.assignments[folder] = found

    coursedir = CourseDirectory(config=config, root=str(out))
    converter = Graded(coursedir=coursedir, config=config, log=nbgrader_log())
    converter.force = True
    try:
        converter.start()
    except NbGraderException:  # raised after every notebook was tried; the failed ones are logged
        pass
    return [(s, a) for s, a in graded if not glob.glob(os.path.join(
        glob.escape(coursedir.format_path(coursedir.feedback_directory, s, a)), "*.html"))]
