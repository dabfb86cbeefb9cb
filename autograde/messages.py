"""What a student reads from the checks, in their notebook's language (gettext domain ``feedback``).

Messages are English in the code (``_("...")``, ``N_`` where defined before shown) and in the catalogues
(mistakes, cases, labels); `_` looks each up in ``locales/<language>/LC_MESSAGES/feedback.po`` (English where
missing; `template` makes its .pot for ``locales/build.py --update-feedback``), placeholders filled after. A
mistake is identified by its English name. The language is set at release (`mark_notebook`): in the notebook's
metadata and as ``AUTOGRADE_LANGUAGE`` in its setup cell, which `check` reads in the student's kernel; where a
notebook is read rather than run (grading, feedback), `speaking` sets it from the metadata (`notebook_language`).
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
    """The non-fuzzy translations of ``locales/<name>/LC_MESSAGES/<domain>.po``; empty for English or none."""
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
    """The translations of ``assignment``'s notebook prose in the language in use (`editions.notebooks`)."""
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

MODULES = ("checking", "attempts", "verdict", "comparison", "display", "feedback", "session", "validation", "messages",
           "building", "drivers", "wire", "runner", "candidates")
"""The modules of `autograde` whose ``_("...")`` and ``N_("...")`` are messages."""
TEMPLATES = ("templates/feedback/index.html.j2",)
"""The Jinja templates of `autograde` whose ``_("...")`` are messages (the feedback page's words)."""


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
    package = Path(__file__).resolve().parent
    sources = [("python", f"{module}.py", {"_": None, "N_": None}) for module in MODULES]
    sources += [(babel_extract, name, {"_": None}) for name in TEMPLATES if (package / name).is_file()]
    for method, name, keywords in sources:
        for line, message, _comments, _context in extract_from_file(method, package / name, keywords=keywords):
            if isinstance(message, str) and message:
                catalogue.add(message, locations=[(f"autograde/{name}", line)])
    for message, where in catalogue_messages():
        if message not in catalogue:
            catalogue.add(message, auto_comments=[where])
    return catalogue


if __name__ == "__main__":  # python -m autograde.messages OUT.pot: the template, for the book's translators
    import sys

    from babel.messages.pofile import write_po

    with open(sys.argv[1], "wb") as out:
        write_po(out, template(), no_location=True)
