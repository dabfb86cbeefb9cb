"""The feedback a student receives: ``feedback/<student>/<assignment>/<assignment>.html``, one standalone page.

`FeedbackExporter` (``templates/feedback/``) is what ``grade`` writes (`write_feedback`) and the course config's
``GenerateFeedback`` exporter, so ``nbgrader generate_feedback`` writes the same page with the instructor's
scores and comments. Never shown: hidden tests, the "try it" cells, the grader's note (`GRADER_NOTE`).
"""
from __future__ import annotations

import copy
import functools
import html
import re
import shutil
from pathlib import Path

import mistune
import nbformat
from latex2mathml.converter import convert as tex_to_mathml
from nbconvert.exporters import TemplateExporter
from nbconvert.filters import strip_ansi
from nbgrader.preprocessors import ClearHiddenTests, GetGrades
from traitlets import default

from editions.notebooks import translate_cell
from intake.collection import EXCHANGE_FILES

from .gradebook import after_penalty, shared_gradebook
from .messages import METADATA, _, language, notebook_language, prose_translations, speaking
from .notebook import is_widget

__all__ = ["FeedbackExporter", "CourseGrades", "TEMPLATES", "GRADER_NOTE", "feedback_path", "feedback_html",
           "write_feedback"]

TEMPLATES = Path(__file__).resolve().parent / "templates"
GRADER_NOTE = "⚑ Flagged by the grader"
"""How the grader's note to the instructor starts, in the first solution cell's automatic comment (formgrader
shows it in that cell's comment box): the page leaves it, and whatever follows it, out."""


class _MathRenderer(mistune.HTMLRenderer):
    """Markdown with $…$ and $$…$$ drawn as MathML."""

    def inline_math(self, text: str) -> str:
        return _mathml(text, "inline")

    def block_math(self, text: str) -> str:
        return _mathml(text, "block")


def _mathml(tex: str, display: str) -> str:
    try:
        return tex_to_mathml(tex, display=display)
    except Exception:  # a macro the converter does not know: the source is still readable
        return f"<code>{html.escape(tex)}</code>"


_markdown = mistune.create_markdown(renderer=_MathRenderer(escape=False), plugins=["math", "table", "strikethrough"])


def _text(value: object) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def course_markdown(text: object) -> str:
    """A markdown cell (or a comment) as HTML, its math as MathML."""
    return _markdown(_text(text))


def check_message(traceback: object) -> str:
    """An error output (a check's message, or the student's traceback), its fix folded behind a toggle."""
    from .verdict import FIX_PREFIX  # the checks' module: only where a page shows a failure

    entries = traceback if isinstance(traceback, list) else [traceback]
    lines = [line for entry in entries for line in strip_ansi(_text(entry)).splitlines()]
    prefix, label = _(FIX_PREFIX), html.escape(_("How to fix it"))  # the message's language: the page's
    shown = [line for line in lines if not line.startswith(prefix)]
    fixes = [line.removeprefix(prefix) for line in lines if line.startswith(prefix)]
    return (f"<pre class='out err'>{html.escape(chr(10).join(shown))}</pre>"
            + "".join(f"<details class='fix'><summary>{label}</summary><pre>{html.escape(fix)}</pre></details>"
                      for fix in fixes))


def shown_comment(comment: object) -> str:
    """A cell's comment as the student may read it: without the grader's note to the instructor."""
    if not comment:
        return ""
    return _text(comment).split(GRADER_NOTE, 1)[0].strip()


def anchor(grade_id: object) -> str:
    """A graded cell's id on the page (the class report links to it)."""
    return "cell-" + re.sub(r"[^A-Za-z0-9_-]", "-", str(grade_id))


def number(value: object) -> str:
    """A score as people write it: 2, 1.5, 0.25."""
    return f"{float(value or 0):g}"


def graded_cells(cells: list) -> list:
    """The cells that carry points: test cells, and cells graded by hand."""
    return [c for c in cells if (meta := c.get("metadata", {}).get("nbgrader") or {}).get("grade") or meta.get("task")]


def _without_try_it(cells: list) -> list:
    """The cells but the "try it" ones (tagged ``widget``) and the markdown that introduces each."""
    return [cell for index, cell in enumerate(cells)
            if not is_widget(cell)
            and not (cell.cell_type == "markdown" and index + 1 < len(cells) and is_widget(cells[index + 1]))]


class FeedbackExporter(TemplateExporter):
    """The course's feedback page. As ``GenerateFeedback``'s exporter it gets scores and comments from
    ``GetGrades``; it drops hidden tests and "try it" cells itself, whatever preprocessors are configured."""

    export_from_notebook = None  # not one of nbconvert's --to formats
    output_mimetype = "text/html"

    @default("file_extension")
    def _file_extension_default(self) -> str:
        return ".html"

    @default("template_name")
    def _template_name_default(self) -> str:
        return "feedback"

    @default("extra_template_basedirs")
    def _extra_template_basedirs_default(self) -> list[str]:
        return [str(TEMPLATES)]

    def _create_environment(self):
        environment = super()._create_environment()
        environment.globals["_"] = _  # the page's words, in its language (`autograde.messages`)
        return environment

    def default_filters(self):
        yield from super().default_filters()
        yield from {"course_markdown": course_markdown, "check_message": check_message, "anchor": anchor,
                    "shown_comment": shown_comment, "number": number, "graded_cells": graded_cells}.items()

    def from_notebook_node(self, nb: nbformat.NotebookNode, resources: dict | None = None, **kw):
        nb = copy.deepcopy(nb)
        nb.cells = _without_try_it(nb.cells)
        # a student's own cell that happens to hold the markers is not an error: its text goes
        nb, resources = ClearHiddenTests(enforce_metadata=False).preprocess(nb, resources if resources is not None else {})
        # The page speaks the language the notebook was graded in (its metadata, `autograde.autograded`), else the
        # one in use: its words, the checks' fixes it folds, and the notebook's prose (the notebook's catalogue).
        with speaking(notebook_language(nb) if METADATA in nb.metadata else language()) as page_language:
            resources["language"] = page_language.replace("_", "-")
            prose = prose_translations(str((resources.get("nbgrader") or {}).get("assignment") or ""))
            for cell in nb.cells:
                if cell.cell_type == "markdown" and prose:
                    cell.source = translate_cell(cell.source, prose)
            return super().from_notebook_node(nb, resources, **kw)


def feedback_path(out: Path, student_id: str, assignment: str) -> Path:
    """Where nbgrader puts the feedback page of one notebook, under the course root ``out``."""
    return out / "feedback" / student_id / assignment / f"{assignment}.html"


def feedback_html(notebook: nbformat.NotebookNode, resources: dict | None = None) -> str:
    """The page of ``notebook`` whose metadata and ``resources["nbgrader"]`` already hold what ``GetGrades`` leaves."""
    return FeedbackExporter().from_notebook_node(notebook, resources)[0]


class CourseGrades(GetGrades):
    """nbgrader's ``GetGrades`` (the course config's, for ``generate_feedback``), which also marks a score given by
    hand in formgrader, so that the page does not show a check that failed under a ✓ with no word why."""

    def _get_score(self, cell, resources):  # GetGrades' own, with the grade read once for the mark too
        grade = self.gradebook.find_grade(cell.metadata.nbgrader["grade_id"], self.notebook_id, self.assignment_id,
                                          self.student_id)
        cell.metadata.nbgrader.update(score=grade.score, points=grade.max_score, by_hand=grade.manual_score is not None)


class _GetGradesOnce(CourseGrades):
    """nbgrader's ``GetGrades`` on the process's one gradebook connection (`shared_gradebook`): the same page as
    ``generate_feedback``'s, in a tenth of the time."""

    def preprocess(self, nb, resources):
        info = resources["nbgrader"]
        self.notebook_id, self.assignment_id = info["notebook"], info["assignment"]
        self.student_id, self.db_url = info["student"], info["db_url"]
        self.gradebook = shared_gradebook(self.db_url)
        self.gradebook.db.rollback()  # what the autograde step has just committed
        try:  # GetGrades.preprocess, on that gradebook
            nb, resources = super(GetGrades, self).preprocess(nb, resources)
            notebook = self.gradebook.find_submission_notebook(self.notebook_id, self.assignment_id, self.student_id)
            late_penalty = notebook.late_submission_penalty or 0
            info.update(score=after_penalty(notebook.score, late_penalty), max_score=notebook.max_score,
                        late_penalty=late_penalty)
        finally:
            self.gradebook.db.rollback()
        return nb, resources


@functools.cache
def _exporter_with_grades() -> FeedbackExporter:
    """One exporter per process (its template compiled once), reading grades as ``generate_feedback`` does."""
    exporter = FeedbackExporter()
    exporter.register_preprocessor(_GetGradesOnce(), enabled=True)
    return exporter


def write_feedback(out: Path, student_id: str, assignment: str, db_url: str) -> Path:
    """Write the page of ``out``'s autograded notebook, and what ``release_feedback`` reads, as nbgrader would."""
    autograded = out / "autograded" / student_id / assignment
    resources = {"unique_key": assignment, "output_files_dir": f"{assignment}_files",
                 "nbgrader": {"student": student_id, "assignment": assignment, "notebook": assignment, "db_url": db_url}}
    page_html, _ = _exporter_with_grades().from_filename(str(autograded / f"{assignment}.ipynb"), resources=resources)
    page = feedback_path(out, student_id, assignment)
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(page_html, encoding="utf-8")
    for name in EXCHANGE_FILES:
        if (autograded / name).exists():
            shutil.copyfile(autograded / name, page.parent / name)
    return page
