"""The exercise notebooks in other languages: their prose as gettext messages, and the notebook translated.

A message is one markdown block's source on one line (paragraph, list item, heading, table cell, a
``<summary>``), markup and math kept; code, answer cells and blocks without words are not. A translation keeps
each cell's id and metadata, the locked cells' checksums computed again (README, "The Chinese edition").
"""
from __future__ import annotations

import copy
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import nbformat
from babel.messages.catalog import Catalog
from babel.messages.pofile import read_po
from markdown_it import MarkdownIt

__all__ = ["CATALOGUES", "catalogue_path", "languages", "messages", "template", "read_translations",
           "translate_notebook", "translate_markdown"]

CATALOGUES = "notebooks"  # the catalogues' folder in LC_MESSAGES, beside the book's
_MARKDOWN = MarkdownIt("commonmark").enable("table")  # what JupyterLab renders, tables included
_SUMMARY = re.compile(r"(<summary>)(.*?)(</summary>)")
_NOT_WORDS = re.compile(r"`[^`]*`|\$\$.*?\$\$|\$[^$]*\$|<[^>]+>", re.DOTALL)


def catalogue_path(root: Path, language: str, assignment: str) -> Path:
    return root / "locales" / language / "LC_MESSAGES" / CATALOGUES / f"{assignment}.po"


def languages(root: Path) -> list[str]:
    """The languages with catalogues of the notebooks under ``root/locales``."""
    return sorted(p.parent.parent.name for p in (root / "locales").glob(f"*/LC_MESSAGES/{CATALOGUES}") if p.is_dir())


@dataclass(frozen=True)
class _Block:
    kind: str  # text (a paragraph or a title), row (of a table) or html
    start: int  # its lines in the cell: [start, end)
    end: int
    texts: tuple[str, ...]  # what may be messages: the text on one line, the row's cells, the hints' labels
    marker: str = ""  # what precedes a text on its first line: "## ", "1. ", indentation


def _one_line(text: str) -> str:
    return " ".join(line.strip() for line in text.split("\n")).strip()


def _has_words(text: str) -> bool:
    return re.search(r"[A-Za-z]{2}", _NOT_WORDS.sub(" ", text)) is not None


def _marker(line: str, text: str) -> str:
    line = line.rstrip()
    return line[:-len(text)] if line.endswith(text) else line[:line.find(text)]  # a title may end in "##"


def _blocks(source: str) -> list[_Block]:
    """The blocks of a markdown cell's source that may hold prose, in order."""
    found, row, row_lines, lines = [], [], (0, 0), source.split("\n")
    tokens = _MARKDOWN.parse(source)
    for before, token in zip([None, *tokens], tokens):
        if token.type == "inline" and before.type in ("paragraph_open", "heading_open"):
            marker = _marker(lines[token.map[0]], token.content.split("\n")[0].strip())
            found.append(_Block("text", *token.map, (_one_line(token.content),), marker))
        elif token.type == "tr_open":
            row, row_lines = [], token.map
        elif token.type == "inline" and before.type in ("th_open", "td_open"):
            row.append(token.content.strip())
        elif token.type == "tr_close":
            found.append(_Block("row", *row_lines, tuple(row)))
        elif token.type == "html_block":
            found.append(_Block("html", *token.map, tuple(_one_line(m[2]) for m in _SUMMARY.finditer(token.content))))
    return found


def _prose_cells(nb: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    return [c for c in nb.cells if c.cell_type == "markdown" and not c.metadata.get("nbgrader", {}).get("solution")]


def messages(nb: nbformat.NotebookNode) -> list[str]:
    """The notebook's messages, each once, in the order they appear."""
    found = [t for cell in _prose_cells(nb) for block in _blocks(cell.source) for t in block.texts if _has_words(t)]
    return list(dict.fromkeys(found))


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


def _structure(source: str) -> list[tuple[str, str]]:
    return [(t.type, t.tag) for t in _MARKDOWN.parse(source) if t.type != "inline"]


def _translated_lines(block: _Block, lines: list[str], translate: Callable[[str], str]) -> list[str]:
    """The block's lines, its texts translated."""
    if block.kind == "row":
        return ["| " + " | ".join(translate(c).replace("|", "\\|") for c in block.texts) + " |"]
    if block.kind == "html":
        return _SUMMARY.sub(lambda m: m[1] + translate(_one_line(m[2])) + m[3], "\n".join(lines)).split("\n")
    return [block.marker + translate(block.texts[0])]


def _translate_source(source: str, translations: dict[str, str]) -> tuple[str, list[str]]:
    """The cell's source with its messages translated, and those that have no translation."""
    def translate(text: str) -> str:
        return translations.get(text, text) if _has_words(text) else text

    blocks, lines = _blocks(source), source.split("\n")
    for block in reversed(blocks):  # from the end: a block's new lines do not move the lines of those before it
        if any(translate(t) != t for t in block.texts):
            lines[block.start:block.end] = _translated_lines(block, lines[block.start:block.end], translate)
    result = "\n".join(lines)
    if _structure(result) != _structure(source):
        raise ValueError(f"a translation changes the structure of the markdown cell that starts {source[:60]!r}: "
                         "each must read as one paragraph, title or table cell (a leading '1. ' is a list: "
                         "write '1\\. ')")
    return result, [t for b in blocks for t in b.texts if _has_words(t) and t not in translations]


def translate_markdown(source: str, translations: dict[str, str]) -> str:
    """A markdown cell's source with the messages that have a translation translated; the cell as it is where a
    translation would not read as the block it replaces (the feedback page, `autograde.feedback`)."""
    try:
        return _translate_source(source, translations)[0] if translations else source
    except ValueError:
        return source


def translate_notebook(nb: nbformat.NotebookNode, translations: dict[str, str]) -> nbformat.NotebookNode:
    """The notebook with its prose translated. Raises ValueError if a message has no translation or a translation
    does not read as the block it replaces."""
    from nbgrader.utils import compute_checksum  # heavy import, only where a notebook is translated

    translated, missing = copy.deepcopy(nb), []
    for cell in _prose_cells(translated):
        cell.source, untranslated = _translate_source(cell.source, translations)
        missing += untranslated
    if missing:
        missing = list(dict.fromkeys(missing))  # a message of several cells is one message to translate
        raise ValueError(f"{len(missing)} messages have no translation, e.g. {missing[0][:80]!r}")
    for cell in translated.cells:
        if "checksum" in cell.metadata.get("nbgrader", {}):
            cell.metadata.nbgrader.checksum = compute_checksum(cell)
    return translated
