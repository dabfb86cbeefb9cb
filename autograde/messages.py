"""What a student reads from the checks, the grader's side: a notebook's language and the catalogue's template.

The words themselves (``_``, ``N_``, `speaking`, the ``feedback`` catalogues) are `notebook_sandbox.words`, which
the sandbox holds too; they are re-exported here, so the grader's modules name one place. A mistake is identified
by its English name. The language is set at release (`mark_notebook`): in the notebook's metadata and as
``AUTOGRADE_LANGUAGE`` in its setup cell, which `check` reads in the student's kernel; where a notebook is read
rather than run (grading, feedback), `speaking` sets it from the metadata (`notebook_language`). `template` makes
the catalogue's .pot for ``locales/build.py --update-feedback``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from notebook_sandbox.words import (DOMAIN, ENGLISH, ENVIRONMENT, LOCALES, N_, _, known_language, language,
                                    languages, speaking, translations)

__all__ = ["DOMAIN", "ENGLISH", "ENVIRONMENT", "METADATA", "LOCALES", "N_", "_", "language", "speaking",
           "languages", "notebook_language", "setup_line", "mark_notebook", "translations", "prose_translations",
           "template", "catalogue_messages"]

METADATA = "autograde"
"""The key of a notebook's metadata that holds ``{"language": ...}``."""


def prose_translations(assignment: str) -> dict[str, str]:
    """The translations of ``assignment``'s notebook prose in the language in use (`editions.notebooks`)."""
    name = language()
    return {} if name == ENGLISH else translations(name, f"notebooks/{assignment}")


# --------------------------------------------------------------------------- a notebook's language

def notebook_language(notebook: Any) -> str:
    """The language a notebook's metadata names (`mark_notebook`), if the checks speak it, else English. The
    notebook may be a student's, of any shape: what it holds only picks among the catalogues."""
    metadata = notebook.get("metadata") if isinstance(notebook, dict) else None
    ours = metadata.get(METADATA) if isinstance(metadata, dict) else None
    return known_language(ours.get("language") if isinstance(ours, dict) else None)


def _setup_cell(notebook: Any) -> Any:
    """The locked code cell a student runs first: nbgrader's ``setup``, else the first locked non-test code cell."""
    code = [c for c in notebook.cells if c.cell_type == "code"]
    for cell in code:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "setup":
            return cell
    for cell in code:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("locked") and not meta.get("grade") and not meta.get("solution"):
            return cell
    raise ValueError("the notebook has no locked setup cell to tell the checks its language")


def setup_line(name: str) -> str:
    """The lines a notebook in language ``name`` adds to its setup cell (`mark_notebook`)."""
    with speaking(name):
        comment = _("the checks speak this notebook's language")
    return f'import os\nos.environ["{ENVIRONMENT}"] = "{name}"  # {comment}'


def mark_notebook(notebook: Any, name: str) -> Any:
    """Record ``name`` as a released notebook's language, in place: in its metadata (read by the grader and
    `nbgrader validate`) and its setup cell (run by the kernel), whose checksum is computed again."""
    from nbgrader.utils import compute_checksum  # heavy import, only where a notebook is released

    notebook.metadata[METADATA] = {**notebook.metadata.get(METADATA, {}), "language": name}
    cell = _setup_cell(notebook)
    line = setup_line(name)
    if line not in cell.source:
        cell.source = cell.source.rstrip("\n") + "\n" + line
    if "checksum" in cell.metadata.get("nbgrader", {}):
        cell.metadata.nbgrader.checksum = compute_checksum(cell)
    return notebook


# --------------------------------------------------------------------------- the catalogue's template

SOURCES = (*(f"autograde/{m}.py" for m in ("checking", "attempts", "verdict", "comparison", "feedback", "session",
                                             "validation", "candidates", "messages")),
           *(f"notebook_sandbox/{m}.py" for m in ("words", "display", "building", "drivers", "wire", "runner")),
           "autograde/templates/feedback/index.html.j2")
"""The files whose ``_("...")`` and ``N_("...")`` are messages (a Jinja template: the feedback page's words)."""


def catalogue_messages() -> list[tuple[str, str]]:
    """(message, where) of every word of the chapters' catalogues a check can show, each once."""
    from .exercises import load_all

    found: dict[str, str] = {}
    for chapter in load_all():
        where = chapter.__name__.rpartition(".")[2]
        for exercise in chapter.EXERCISES:
            texts = [exercise.input_note, *exercise.output_names,
                     *(case.label for case in (*exercise.visible, *exercise.hidden)),
                     *(text for m in exercise.mistakes for text in (m.name, m.hint, m.fix))]
            for text in texts:
                if text:
                    found.setdefault(text, f"{where}.{exercise.key}")
    return list(found.items())


def template() -> Any:
    """The ``feedback`` message template (a babel ``Catalog``): the modules' marked messages, then the catalogues'."""
    from babel.messages.catalog import Catalog
    from babel.messages.extract import extract_from_file
    from jinja2.ext import babel_extract

    catalogue = Catalog(project=DOMAIN, charset="utf-8")
    root = Path(__file__).resolve().parent.parent
    for name in SOURCES:
        method, keywords = (babel_extract, {"_": None}) if name.endswith(".j2") else ("python", {"_": None, "N_": None})
        for line, message, _comments, _context in extract_from_file(method, root / name, keywords=keywords):
            if isinstance(message, str) and message:
                catalogue.add(message, locations=[(name, line)])
    for message, where in catalogue_messages():
        if message not in catalogue:
            catalogue.add(message, auto_comments=[where])
    return catalogue


if __name__ == "__main__":  # python -m autograde.messages OUT.pot: the template, for the book's translators
    import sys

    from babel.messages.pofile import write_po

    with open(sys.argv[1], "wb") as out:
        write_po(out, template(), no_location=True)
