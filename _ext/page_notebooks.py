"""A page of the book in an edition's language, as a notebook and as MyST markdown: its prose translated
from the page's catalogue, its code and outputs as they are.

Sphinx translates a page's doctree, and what the site shows is HTML; a notebook opened by a launch button
(Binder, Colab, JupyterHub) or downloaded is the page's source, in the sources' language. This module
translates that source the way Sphinx reads it: MyST markdown, parsed with myst-parser's own parser, whose
blocks are the catalogue's messages — each paragraph (in a list item or a box too), title, table cell,
definition-list term, the title of a directive (``{admonition} Erratum — …``, ``{dropdown} Why …?``) and
its options' texts (``:alt:``), each message its block's source on one line, as the gettext builder
extracts it. The translated block is written on one line after its own marker (``## ``, ``- ``, ``: ``,
a table's pipes); the bodies of directives are translated in turn, except those that hold code or data
(`NOT_MARKDOWN`). Code, math, front matter and HTML are never touched, and a block without a translation
stays as it is.

`translate_markdown` translates a page's MyST source (a markdown cell of its notebook, or the whole
``.md`` file); `translate_notebook` a notebook's markdown cells. _ext/book_site.py writes the editions'
notebooks with them.
"""
from __future__ import annotations

import copy
import re
from collections.abc import Callable
from dataclasses import dataclass

import nbformat
from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from myst_parser.config.main import MdParserConfig
from myst_parser.parsers.mdit import create_md_parser

__all__ = ["NOT_MARKDOWN", "markdown_parser", "translate_markdown", "translate_notebook"]

# Directives whose body is not MyST prose: code, math, data, tables of contents.
NOT_MARKDOWN = frozenset({
    "code-cell", "code-block", "code", "sourcecode", "literalinclude", "include", "math", "raw", "eval-rst",
    "eval-rest", "bibliography", "toctree", "tableofcontents", "csv-table", "list-table", "glue", "glue:figure",
    "glue:any", "glue:math", "mermaid", "graphviz", "errata-table",
})
_DIRECTIVE = re.compile(r"^\{(?P<name>[^}\s]+)\}\s*(?P<argument>.*)$")
_OPTION = re.compile(r"^(?P<key>:[\w-]+:)(?P<space>\s*)(?P<value>.*)$")

Translate = Callable[[str], str]


def markdown_parser(config: MdParserConfig | None = None) -> MarkdownIt:
    """MyST's markdown-it parser, with the given settings (the book's ``myst_enable_extensions``)."""
    return create_md_parser(config or MdParserConfig(), RendererHTML)


@dataclass(frozen=True)
class _Edit:
    start: int  # the lines it replaces: [start, end)
    end: int
    lines: tuple[str, ...]


def _one_line(text: str) -> str:
    """A block's source as the gettext builder's message: its lines on one line."""
    return text.replace("\n", " ").strip()


def _translation(text: str, translate: Translate) -> str | None:
    """The translation of a block's text, or None where the catalogue has none."""
    for message in dict.fromkeys((_one_line(text), " ".join(line.strip() for line in text.split("\n")).strip())):
        if message:
            translated = translate(message)
            if translated and translated != message:
                return translated
    return None


def _marker(line: str, first: str) -> str:
    """What precedes a block's text on its first line: "## ", "- ", "> ", ": ", indentation."""
    found = line.find(first)
    return line[:found] if found >= 0 else line[:len(line) - len(line.lstrip())]


def _directive_edits(lines: list[str], start: int, end: int, info: str, content: str, translate: Translate,
                     parser: MarkdownIt) -> list[_Edit]:
    """A directive's title, options and (unless it holds code or data) body, translated."""
    found = _DIRECTIVE.match(info.strip())
    if not found:
        return []  # a plain code block
    edits = []
    argument = found["argument"].strip()
    if argument and found["name"] not in NOT_MARKDOWN:
        translated = _translation(argument, translate)
        first = lines[start]
        if translated and first.rstrip().endswith(argument):
            edits.append(_Edit(start, start + 1, (first.rstrip()[:-len(argument)] + translated,)))
    if found["name"] in NOT_MARKDOWN:
        return edits
    fence_line = lines[start]
    indent = fence_line[:len(fence_line) - len(fence_line.lstrip())]
    body = content.split("\n")
    if body and body[-1] == "":
        body.pop()
    # Its options: `:key: value` lines first (a YAML block between --- lines is left as it is).
    skip = 0
    if body and body[0].strip() == "---":
        closing = next((i for i in range(1, len(body)) if body[i].strip() == "---"), None)
        skip = closing + 1 if closing is not None else 0
    else:
        while skip < len(body) and (option := _OPTION.match(body[skip].strip())):
            translated = option["value"] and _translation(option["value"], translate)
            line = start + 1 + skip
            if translated and line < end:
                edits.append(_Edit(line, line + 1, (f"{indent}{option['key']}{option['space'] or ' '}{translated}",)))
            skip += 1
    rest = "\n".join(body[skip:])
    translated_body = translate_markdown(rest, translate, parser)
    if translated_body != rest:
        first_line = start + 1 + skip
        new = tuple(f"{indent}{line}" if line else line for line in translated_body.split("\n"))
        edits.append(_Edit(first_line, first_line + len(body) - skip, new))
    return edits


def _edits(source: str, translate: Translate, parser: MarkdownIt) -> list[_Edit]:
    lines, edits = source.split("\n"), []
    tokens = parser.parse(source)
    row: list[tuple[str, str | None]] = []
    row_lines: list[int] | None = None
    for before, token in zip([None, *tokens], tokens):
        if token.type == "inline" and before is not None and before.map and \
                before.type in ("paragraph_open", "heading_open", "dt_open"):
            translated = _translation(token.content, translate)
            if translated:
                start, end = before.map
                end = max(end, start + 1)  # a definition's term is one line, mapped to none
                marker = _marker(lines[start], token.content.split("\n")[0].strip())
                edits.append(_Edit(start, end, (marker + translated,)))
        elif token.type == "tr_open":
            row, row_lines = [], token.map
        elif token.type == "inline" and before is not None and before.type in ("th_open", "td_open"):
            row.append((token.content.strip(), _translation(token.content, translate)))
        elif token.type == "tr_close" and row_lines and any(translated for _, translated in row):
            cells = [(translated.replace("|", "\\|") if translated else text) for text, translated in row]
            marker = lines[row_lines[0]][:len(lines[row_lines[0]]) - len(lines[row_lines[0]].lstrip())]
            edits.append(_Edit(row_lines[0], row_lines[1], (marker + "| " + " | ".join(cells) + " |",)))
        elif token.type in ("fence", "colon_fence") and token.map:
            edits += _directive_edits(lines, *token.map, token.info, token.content, translate, parser)
    return edits


def _structure(source: str, parser: MarkdownIt) -> list[tuple[str, str, str]]:
    return [(t.type, t.tag, t.info.split(" ")[0] if t.info.startswith("{") else "")
            for t in parser.parse(source) if t.type != "inline"]


def translate_markdown(source: str, translate: Translate, parser: MarkdownIt | None = None) -> str:
    """MyST markdown with each block whose source is a message replaced by its translation.

    ``translate`` gives a message's translation, or the message itself where there is none.

    Raises:
        ValueError: a translation does not read as the block it replaces (its markdown changes the structure).
    """
    parser = parser or markdown_parser()
    lines = source.split("\n")
    for edit in sorted(_edits(source, translate, parser), key=lambda e: e.start, reverse=True):
        lines[edit.start:edit.end] = edit.lines  # from the end: the lines of the edits before stay where they are
    translated = "\n".join(lines)
    if translated != source and _structure(translated, parser) != _structure(source, parser):
        raise ValueError(f"a translation changes the structure of the markdown that starts {source[:60]!r}: "
                         "each must read as one paragraph, title or table cell (a leading '1. ' is a list: "
                         "write '1\\. ')")
    return translated


def translate_notebook(notebook: nbformat.NotebookNode, translate: Translate,
                       parser: MarkdownIt | None = None) -> nbformat.NotebookNode:
    """A copy of the notebook with its markdown cells translated (`translate_markdown`); code cells, their
    outputs and the notebook's metadata unchanged."""
    parser = parser or markdown_parser()
    translated = copy.deepcopy(notebook)
    for cell in translated.cells:
        if cell.cell_type == "markdown":
            cell.source = translate_markdown(cell.source, translate, parser)
    return translated
