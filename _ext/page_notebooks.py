"""A page of the book in an edition's language, as a notebook and as MyST markdown: its prose translated
from the page's catalogue, its code and outputs as they are.

Sphinx translates a page's doctree, and what the site shows is HTML; a notebook opened by a launch button
(Binder, Colab, JupyterHub) or downloaded is the page's source, in the sources' language. This module
translates that source with the translator of the exercise notebooks (`editions.markdown`),
given myst-parser's own parser: its blocks, directives included, are the messages the gettext builder
extracts. _ext/book_site.py writes the editions' notebooks and ``.md`` downloads with it.
"""
from __future__ import annotations

import copy

import nbformat
from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from myst_parser.config.main import MdParserConfig
from myst_parser.parsers.mdit import create_md_parser

from editions.markdown import Translate, translate_markdown

__all__ = ["markdown_parser", "translate_markdown", "translate_notebook"]


def markdown_parser(config: MdParserConfig | None = None) -> MarkdownIt:
    """MyST's markdown-it parser, with the given settings (the book's ``myst_enable_extensions``)."""
    return create_md_parser(config or MdParserConfig(), RendererHTML)


def translate_notebook(notebook: nbformat.NotebookNode, translate: Translate,
                       parser: MarkdownIt | None = None) -> nbformat.NotebookNode:
    """A copy of the notebook with its markdown cells translated (`translate_markdown`); code cells, their
    outputs and the notebook's metadata unchanged. Raises ValueError as `translate_markdown` does."""
    parser = parser or markdown_parser()
    translated = copy.deepcopy(notebook)
    for cell in translated.cells:
        if cell.cell_type == "markdown":
            cell.source = translate_markdown(cell.source, translate, parser)
    return translated
