"""What a student reads from the checks, in the language of their notebook (gettext domain ``feedback``).

Every message a check can show is written in English in the code: the templates of `autograde.checking`,
`autograde.comparison` and `autograde.display` (each in ``_("...")``, or ``N_("...")`` where it is defined
before it is shown), and the words of each chapter's catalogue (`autograde.exercises`: each mistake's name,
hint and fix, each case's label, the names of an output's items, an input note), which are read from the
exercises themselves. As a message is shown, `_` looks the English up in the catalogue of the language in
use, ``locales/<language>/LC_MESSAGES/feedback.po`` (`template` makes its .pot; ``python locales/build.py
--update-feedback`` brings the catalogues in step), and keeps the English where it has no translation.
A template's ``{placeholders}`` are filled after it is translated. What identifies a mistake is its English
name (`Mistake.name`), never the words shown: the fix that a second failure reveals, the gradebook's record
and the class report all key on it, whatever the language.

The language is chosen once, when the notebook is released (`mark_notebook`, by `autograde.release`): a
translated notebook carries it in its metadata, ``{"autograde": {"language": "zh_CN"}}``, and its setup cell
(the locked code cell a student runs first) ends with ``os.environ["AUTOGRADE_LANGUAGE"] = "zh_CN"``.

* In the student's kernel, `check` reads the environment variable ``AUTOGRADE_LANGUAGE`` (`ENVIRONMENT`) each
  time it speaks: the setup cell set it, in JupyterLab, in `nbgrader validate`'s kernel, in Colab alike. A kernel
  cannot read its notebook's metadata; a line of code it runs is the one channel every front end has.
* Where a notebook is read rather than run (grading, whose checks run in the trusted grader; `nbgrader
  validate`'s own summary; the feedback page), the language is the notebook's metadata (`notebook_language`),
  set for what is said under `speaking`, which overrides the environment.

A language without a ``feedback`` catalogue is English. The catalogues sit beside the package, in the course
tree (``locales/``, as the book's do); where they are not found the checks speak English.
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["DOMAIN", "ENGLISH", "ENVIRONMENT", "METADATA", "LOCALES", "N_", "_", "language", "speaking",
           "languages", "notebook_language", "setup_line", "mark_notebook", "translations", "prose_translations",
           "template", "catalogue_messages"]

DOMAIN = "feedback"
"""The gettext domain of the checks' messages: ``locales/<language>/LC_MESSAGES/feedback.po``."""
ENGLISH = "en"
ENVIRONMENT = "AUTOGRADE_LANGUAGE"
"""The environment variable a translated notebook's setup cell sets: the language of the checks in a kernel."""
METADATA = "autograde"
"""The key of a notebook's metadata that holds ``{"language": ...}``."""
LOCALES = Path(__file__).resolve().parent.parent / "locales"

_SPEAKING: contextvars.ContextVar[str | None] = contextvars.ContextVar("autograde_language", default=None)


def N_(message: str) -> str:
    """Mark ``message`` for the catalogue where it is defined; `_` translates it where it is shown."""
    return message


@functools.cache
def languages() -> list[str]:
    """The languages the checks speak besides English: those with a ``feedback`` catalogue."""
    return sorted(p.parent.parent.name for p in LOCALES.glob(f"*/LC_MESSAGES/{DOMAIN}.po"))


def _known(name: object) -> str:
    """``name`` as a language the checks speak (``zh-CN`` → ``zh_CN``), else English."""
    if not isinstance(name, str) or not name.strip():
        return ENGLISH
    name = name.strip().replace("-", "_")
    return name if name in languages() else ENGLISH


def language() -> str:
    """The language in use: that of `speaking`, else ``$AUTOGRADE_LANGUAGE``, else English."""
    chosen = _SPEAKING.get()
    return chosen if chosen is not None else _known(os.environ.get(ENVIRONMENT))


@contextlib.contextmanager
def speaking(name: str | None) -> Iterator[str]:
    """What is said inside is in ``name`` (a language without a catalogue: English), whatever the environment."""
    token = _SPEAKING.set(_known(name))
    try:
        yield _SPEAKING.get()
    finally:
        _SPEAKING.reset(token)


@functools.cache
def translations(name: str, domain: str = DOMAIN) -> dict[str, str]:
    """The translations of ``locales/<name>/LC_MESSAGES/<domain>.po`` (a fuzzy one is of an older English: not
    used); empty for English or a missing catalogue."""
    path = LOCALES / name / "LC_MESSAGES" / f"{domain}.po"
    if name == ENGLISH or not path.is_file():
        return {}
    from babel.messages.pofile import read_po  # only where a language other than English is spoken

    with path.open("rb") as file:
        return {m.id: m.string for m in read_po(file) if m.id and m.string and not m.fuzzy}


def _(message: str) -> str:
    """``message`` in the language in use; the English where the catalogue lacks it."""
    name = language()
    if name == ENGLISH or not message:
        return message
    return translations(name).get(message, message)


def prose_translations(assignment: str) -> dict[str, str]:
    """The translations of ``assignment``'s notebook prose in the language in use (`autograde.notebook_translation`)."""
    name = language()
    return {} if name == ENGLISH else translations(name, f"notebooks/{assignment}")


# --------------------------------------------------------------------------- a notebook's language

def notebook_language(notebook: Any) -> str:
    """The language a notebook's metadata names (`mark_notebook`), if the checks speak it, else English. The
    notebook may be a student's, of any shape: what it holds only picks among the catalogues."""
    metadata = notebook.get("metadata") if isinstance(notebook, dict) else None
    ours = metadata.get(METADATA) if isinstance(metadata, dict) else None
    return _known(ours.get("language") if isinstance(ours, dict) else None)


def _setup_cell(notebook: Any) -> Any:
    """The locked code cell a student runs first: nbgrader's ``setup``, else the first locked code cell that is
    not a test."""
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
    """Record ``name`` as the language of a released notebook (changed in place, and returned): in its metadata,
    which the grader and `nbgrader validate` read, and at the end of its setup cell, which the student's kernel
    runs (its nbgrader checksum is computed again)."""
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

MODULES = ("checking", "attempts", "verdict", "comparison", "display", "feedback", "session", "validation", "messages")
"""The modules of `autograde` whose ``_("...")`` and ``N_("...")`` are messages."""
TEMPLATES = ("templates/feedback/index.html.j2",)
"""The Jinja templates of `autograde` whose ``_("...")`` are messages (the feedback page's words)."""


def catalogue_messages() -> list[tuple[str, str]]:
    """(message, where) of every word of the chapters' catalogues a check can show, each once: mistakes' names,
    hints and fixes, cases' labels, outputs' item names and input notes."""
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
    package = Path(__file__).resolve().parent
    for module in MODULES:
        path = package / f"{module}.py"
        for line, message, _comments, _context in extract_from_file("python", path, keywords={"_": None, "N_": None}):
            if isinstance(message, str) and message:
                catalogue.add(message, locations=[(f"autograde/{module}.py", line)])
    for name in TEMPLATES:
        path = package / name
        found = extract_from_file(babel_extract, path, keywords={"_": None}) if path.is_file() else []
        for line, message, _comments, _context in found:
            if isinstance(message, str) and message:
                catalogue.add(message, locations=[(f"autograde/{name}", line)])
    for message, where in catalogue_messages():
        if message not in catalogue:
            catalogue.add(message, auto_comments=[where])
    return catalogue
