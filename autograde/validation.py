"""``nbgrader validate`` in this course's words: it runs the notebook's visible checks only, and, as
grading does, not the cells tagged ``widget``.

Installed by the students' nbgrader configuration (``autograde/student/nbgrader_config.py``).
"""
from __future__ import annotations

from nbconvert.filters import strip_ansi
from nbgrader.apps import validateapp
from nbgrader.validator import Validator

from .notebook import is_widget

__all__ = ["CourseValidator"]

HIDDEN_CHECKS = ("The hidden checks (other sizes, dtypes, edge cases, gradients) run when you are graded; to "
                 "try them now, run check(\"...\", your_function, hidden=True) in a cell of your own.")


class CourseValidator(Validator):
    """`Validator` whose verdict says what was checked."""

    failed_warning = Validator.failed_warning.default_value.replace(
        "VALIDATION FAILED ON {num_failed} CELL(S)!", "VISIBLE CHECKS FAILED IN {num_failed} CELL(S)!")

    def _indent(self, text: str) -> str:
        """Indented, never cut: a check's hint is read whole (the base class cuts at ``width``)."""
        return "\n".join(self.indent + line for line in strip_ansi(text).split("\n"))

    def _print_num_failed(self, num_failed: int) -> None:
        if num_failed:
            super()._print_num_failed(num_failed)
            self.stream.write("\n" + HIDDEN_CHECKS + "\n")
        else:
            self.stream.write("Success! The visible checks pass. " + HIDDEN_CHECKS + "\n")

    def _preprocess(self, nb):
        """Run the notebook as grading does: without the cells tagged ``widget`` ("Try it" cells, a chapter's
        full training run), which nbgrader's 30-second limit per cell would interrupt."""
        widgets = [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code" and is_widget(cell)]
        for i in widgets:
            nb.cells[i].cell_type = "raw"  # not run
        ran = super()._preprocess(nb)
        for i in widgets:  # the checksums of locked cells are computed on them as they were
            ran.cells[i].cell_type = "code"
        return ran

    @classmethod
    def install(cls) -> None:
        """`nbgrader validate` uses this class (its app names the class it builds directly)."""
        validateapp.Validator = cls
