"""``nbgrader validate`` in this course's words: it runs the notebook's visible checks only, and, as
grading does, not the cells tagged ``widget``. Its verdict is in the notebook's language (its metadata,
`autograde.messages.notebook_language`), as are the checks' messages, which the notebook's setup cell sets.

Installed by the students' nbgrader configuration (``autograde/student/nbgrader_config.py``).
"""
from __future__ import annotations

from textwrap import fill

from nbconvert.filters import strip_ansi
from nbgrader.apps import validateapp
from nbgrader.validator import Validator

from .messages import N_, _, notebook_language, speaking
from .notebook import is_widget

__all__ = ["CourseValidator"]

HIDDEN_CHECKS = N_("The hidden checks (other sizes, dtypes, edge cases, gradients) run when you are graded; to "
                   "try them now, run check(\"...\", your_function, hidden=True) in a cell of your own.")


class CourseValidator(Validator):
    """`Validator` whose verdict says what was checked."""

    failed_warning = N_("VISIBLE CHECKS FAILED IN {num_failed} CELL(S)! If you submit your assignment as it is, you "
                        "WILL NOT receive full credit.")  # nbgrader's words, but for the first three
    language = "en"  # the notebook's, once `_preprocess` has read it

    def _indent(self, text: str) -> str:
        """Indented, never cut: a check's hint is read whole (the base class cuts at ``width``)."""
        return "\n".join(self.indent + line for line in strip_ansi(text).split("\n"))

    def _print_num_failed(self, num_failed: int) -> None:
        with speaking(self.language):
            if num_failed:
                self.stream.write(fill(_(self.failed_warning).format(num_failed=num_failed), width=self.width))
                self.stream.write("\n" + _(HIDDEN_CHECKS) + "\n")
            else:
                self.stream.write(_("Success! The visible checks pass.") + " " + _(HIDDEN_CHECKS) + "\n")

    def _print_error(self, source: str, error: str) -> None:
        """nbgrader's, with its headings in the notebook's language."""
        with speaking(self.language):
            self.stream.write("\n" + "=" * self.width + "\n")
            self.stream.write(_("The following cell failed:") + "\n\n")
            self.stream.write(self._indent(source) + "\n\n")
            self.stream.write(_("The error was:") + "\n\n")
            self.stream.write(self._indent(error) + "\n\n")

    def _preprocess(self, nb):
        """Run the notebook as grading does: without the cells tagged ``widget`` ("Try it" cells, a chapter's
        full training run), which nbgrader's 30-second limit per cell would interrupt."""
        self.language = notebook_language(nb)
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
