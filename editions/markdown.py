"""Markdown translated block by block: the one translator of the exercise notebooks and the book's pages.

A message is one block's source on one line, markup and math kept: a paragraph (in a list item, a quote or a
box too), a title, a definition's term, a table cell, a ``<summary>``; where the parser is MyST's, also a
directive's title, its options' values and the blocks of its body (except directives of code or data,
`NOT_MARKDOWN`). A translated block is written on one line after its own marker (``## ``, ``1. ``, ``> ``,
indentation, a table row's pipes). Code, math, front matter and other HTML are never touched. A text
without words (`has_words`) is not a message, yet a catalogue's translation of it is used, as Sphinx does.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from markdown_it import MarkdownIt

__all__ = ["JUPYTER", "NOT_MARKDOWN", "Translate", "has_words", "messages", "translate_markdown"]

Translate = Callable[[str], str | None]  # a message → its translation; itself or None where there is none

JUPYTER = MarkdownIt("commonmark").enable("table")  # what JupyterLab renders: a ```{note} fence is code there
# Directives whose body is not MyST prose: code, math, data, tables of contents.
NOT_MARKDOWN = frozenset({
    "code-cell", "code-block", "code", "sourcecode", "literalinclude", "include", "math", "raw", "eval-rst",
    "eval-rest", "bibliography", "toctree", "tableofcontents", "csv-table", "list-table", "glue", "glue:figure",
    "glue:any", "glue:math", "mermaid", "graphviz", "errata-table",
})
_NOT_WORDS = re.compile(r"`[^`]*`|\$\$.*?\$\$|\$[^$]*\$|<[^>]+>", re.DOTALL)
_SUMMARY = re.compile(r"(<summary>)(.*?)(</summary>)")
_DIRECTIVE = re.compile(r"^\{(?P<name>[^}\s]+)\}\s*(?P<argument>.*)$")
_OPTION = re.compile(r"^(?P<key>:[\w-]+:)(?P<space>\s*)(?P<value>.*)$")
_UNESCAPED_PIPE = re.compile(r"(?<!\\)\|")


def has_words(text: str) -> bool:
    """Whether a text has something to translate: two letters in a row outside code, math and HTML tags."""
    return re.search(r"[A-Za-z]{2}", _NOT_WORDS.sub(" ", text)) is not None


@dataclass(frozen=True)
class _Block:
    start: int  # its lines in the source: [start, end)
    end: int
    texts: tuple[str, ...]  # what may be messages, each on one line
    write: Callable[[tuple[str, ...]], list[str]]  # the block's lines with these texts in place of its own


def _one_line(text: str) -> str:
    return " ".join(line.strip() for line in text.split("\n")).strip()


def _marker(line: str, first: str) -> str:
    """What precedes a block's first line of text on its line: "## ", "1. ", "> ", ": ", indentation."""
    line = line.rstrip()
    if first and line.endswith(first):  # a title may end in "##"; a marker may hold its text ("1. 1")
        return line[:-len(first)]
    found = line.find(first)
    return line[:found] if found >= 0 else line[:len(line) - len(line.lstrip())]


def _indented(block: _Block, offset: int, indent: str) -> _Block:
    """A block of a directive's body, placed in the page's lines."""
    return _Block(block.start + offset, block.end + offset, block.texts,
                  lambda texts: [indent + line if line else line for line in block.write(texts)])


def _directive_blocks(lines: list[str], start: int, end: int, info: str, content: str,
                      parser: MarkdownIt) -> list[_Block]:
    """A MyST directive's title, its options' values and (unless it holds code or data) its body's blocks."""
    found = _DIRECTIVE.match(info.strip())
    if not found:
        return []  # a plain code block
    blocks, argument, first = [], found["argument"].strip(), lines[start].rstrip()
    if argument and found["name"] not in NOT_MARKDOWN and first.endswith(argument):
        blocks.append(_Block(start, start + 1, (argument,), lambda texts: [first[:-len(argument)] + texts[0]]))
    if found["name"] in NOT_MARKDOWN:
        return blocks
    indent = first[:len(first) - len(first.lstrip())]
    body = content.split("\n")
    if body and body[-1] == "":
        body.pop()
    skip = 0  # its options: `:key: value` lines first (a YAML block between --- lines is left as it is)
    if body and body[0].strip() == "---":
        closing = next((i for i in range(1, len(body)) if body[i].strip() == "---"), None)
        skip = closing + 1 if closing is not None else 0
    else:
        while skip < len(body) and (option := _OPTION.match(body[skip].strip())):
            line, key, space = start + 1 + skip, option["key"], option["space"] or " "
            if option["value"] and line < end:
                blocks.append(_Block(line, line + 1, (option["value"].strip(),),
                                     lambda texts, key=key, space=space: [f"{indent}{key}{space}{texts[0]}"]))
            skip += 1
    offset = start + 1 + skip
    return blocks + [_indented(block, offset, indent) for block in _blocks("\n".join(body[skip:]), parser)]


def _blocks(source: str, parser: MarkdownIt) -> list[_Block]:
    """The blocks of ``source`` that may hold prose, in order."""
    found, lines, row, row_lines = [], source.split("\n"), [], (0, 0)
    directives = parser.options.get("myst_config") is not None  # MyST's parser; JupyterLab reads such fences as code
    tokens = parser.parse(source)
    for before, token in zip([None, *tokens], tokens):
        if token.type == "inline" and before is not None and before.map and \
                before.type in ("paragraph_open", "heading_open", "dt_open"):
            start, end = before.map[0], max(before.map[1], before.map[0] + 1)  # a term is one line, mapped to none
            marker = _marker(lines[start], token.content.split("\n")[0].strip())
            found.append(_Block(start, end, (_one_line(token.content),),
                                lambda texts, marker=marker: [marker + texts[0]]))
        elif token.type == "tr_open":
            row, row_lines = [], token.map
        elif token.type == "inline" and before is not None and before.type in ("th_open", "td_open"):
            row.append(token.content.strip())
        elif token.type == "tr_close" and row_lines:
            indent = lines[row_lines[0]][:len(lines[row_lines[0]]) - len(lines[row_lines[0]].lstrip())]
            found.append(_Block(*row_lines, tuple(row), lambda texts, indent=indent: [
                indent + "| " + " | ".join(_UNESCAPED_PIPE.sub(r"\\|", text) for text in texts) + " |"]))
        elif token.type == "html_block" and token.map:
            html = "\n".join(lines[token.map[0]:token.map[1]])
            summaries = tuple(_one_line(m[2]) for m in _SUMMARY.finditer(html))
            if summaries:
                found.append(_Block(*token.map, summaries, lambda texts, html=html: _SUMMARY.sub(
                    lambda m, each=iter(texts): m[1] + next(each) + m[3], html).split("\n")))
        elif directives and token.type in ("fence", "colon_fence") and token.map:
            found += _directive_blocks(lines, *token.map, token.info, token.content, parser)
    return found


def messages(source: str, parser: MarkdownIt = JUPYTER) -> list[str]:
    """The messages of ``source``, in order (a message that appears twice is there twice)."""
    return [text for block in _blocks(source, parser) for text in block.texts if has_words(text)]


def _structure(source: str, parser: MarkdownIt) -> list[tuple[str, str, str]]:
    return [(t.type, t.tag, t.info.split(" ")[0] if t.info.startswith("{") else "")
            for t in parser.parse(source) if t.type != "inline"]


def translate_markdown(source: str, translate: Translate, parser: MarkdownIt = JUPYTER) -> str:
    """``source`` with each message that ``translate`` translates replaced by its translation.

    Raises:
        ValueError: a translation does not read as the block it replaces (its markdown changes the structure).
    """
    def translated(text: str) -> str:  # a text without words is no message, but its catalogue may hold one
        return (translate(text) or text) if text else text

    lines = source.split("\n")
    for block in reversed(_blocks(source, parser)):  # from the end: the lines of the blocks before stay put
        texts = tuple(translated(text) for text in block.texts)
        if texts != block.texts:
            lines[block.start:block.end] = block.write(texts)
    result = "\n".join(lines)
    if result != source and _structure(result, parser) != _structure(source, parser):
        raise ValueError(f"a translation changes the structure of the markdown that starts {source[:60]!r}: "
                         "each must read as one paragraph, title or table cell (a leading '1. ' is a list: "
                         "write '1\\. ')")
    return result
