"""The exercise notebooks in other languages: their prose as gettext messages, and the notebook translated.

The messages are those of the markdown cells as JupyterLab renders them (`editions.markdown`);
answer cells have none. A translation keeps each cell's id and metadata, the locked cells' checksums computed
again (docs/chinese-edition.md).
"""
from __future__ import annotations

import copy
from pathlib import Path

import nbformat
from babel.messages.catalog import Catalog
from babel.messages.pofile import read_po

from . import markdown

__all__ = ["CATALOGUES", "catalogue_path", "languages", "messages", "template", "read_translations",
           "translate_notebook", "translate_cell"]

CATALOGUES = "notebooks"  # the catalogues' folder in LC_MESSAGES, beside the book's


def catalogue_path(root: Path, language: str, assignment: str) -> Path:
    return root / "locales" / language / "LC_MESSAGES" / CATALOGUES / f"{assignment}.po"


def languages(root: Path) -> list[str]:
    """The languages with catalogues of the notebooks under ``root/locales``."""
    return sorted(p.parent.parent.name for p in (root / "locales").glob(f"*/LC_MESSAGES/{CATALOGUES}") if p.is_dir())


def _prose_cells(nb: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    return [c for c in nb.cells if c.cell_type == "markdown" and not c.metadata.get("nbgrader", {}).get("solution")]


def messages(nb: nbformat.NotebookNode) -> list[str]:
    """The notebook's messages, each once, in the order they appear."""
    return list(dict.fromkeys(m for cell in _prose_cells(nb) for m in markdown.messages(cell.source)))


def template(nb: nbformat.NotebookNode, project: str) -> Catalog:
    """The notebook's message template (.pot)."""
    catalogue = Catalog(project=project, charset="utf-8")
    for message in messages(nb):
        catalogue.add(message)
    return catalogue


def read_translations(path: Path) -> dict[str, str]:
    """A catalogue's translations; a fuzzy one is of an older English, to be revisited, and is not used."""
    with path.open("rb") as file:
        return {m.id: m.string for m in read_po(file) if m.id and m.string and not m.fuzzy}


def translate_cell(source: str, translations: dict[str, str]) -> str:
    """A markdown cell's source with the messages that have a translation translated; the cell as it is where a
    translation would not read as the block it replaces (the feedback page, `autograde.feedback`)."""
    try:
        return markdown.translate_markdown(source, translations.get) if translations else source
    except ValueError:
        return source


def translate_notebook(nb: nbformat.NotebookNode, translations: dict[str, str]) -> nbformat.NotebookNode:
    """The notebook with its prose translated. Raises ValueError if a message has no translation or a translation
    does not read as the block it replaces."""
    from nbgrader.utils import compute_checksum  # heavy import, only where a notebook is translated

    translated, missing = copy.deepcopy(nb), []
    for cell in _prose_cells(translated):
        missing += [m for m in markdown.messages(cell.source) if m not in translations]
        cell.source = markdown.translate_markdown(cell.source, translations.get)
    if missing:
        missing = list(dict.fromkeys(missing))  # a message of several cells is one message to translate
        raise ValueError(f"{len(missing)} messages have no translation, e.g. {missing[0][:80]!r}")
    for cell in translated.cells:
        if "checksum" in cell.metadata.get("nbgrader", {}):
            cell.metadata.nbgrader.checksum = compute_checksum(cell)
    return translated
