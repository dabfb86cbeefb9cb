"""The ``{diagram}`` directive: a figure whose SVG is drawn inline, in the page's own colours.

```{diagram} diagrams/kv_cache.svg
:alt: What the figure shows, for readers who cannot see it.

The caption.
```

An SVG shown through ``<img>`` cannot see the page's light or dark theme; drawn inline it can. The
diagrams in book/diagrams draw text and lines in ``currentColor`` (the page's text colour) and
fill boxes with translucent tints, so one file reads well in both themes. The directive gives the
``<svg>`` the alt text as its accessible name (``role="img"``, ``aria-label``), drops the file's
comments (notes for whoever edits it), and caps it at its drawn width: narrower screens scale it
down (``_static/custom.css``).

In an edition in another language the alt text and the labels (the content of each ``<text>``
element that has words, ``<tspan>`` markup included) come from the page's catalogue, where the
gettext build puts them (_ext/translation.py); the caption is translated as any paragraph.
"""
from __future__ import annotations

import html
import re
from collections.abc import Callable
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.util.docutils import SphinxDirective

from translation import TEXTS, has_words, page_translator

_ROOT_TAG = re.compile(r"<svg\b")
_COMMENT = re.compile(r"<!--.*?-->\s*", re.S)
_LABEL = re.compile(r"(<text\b[^>]*>)(.*?)(</text>)", re.S)


def labels(source: str) -> list[str]:
    """The labels of an SVG that have words: the content of its ``<text>`` elements, markup included."""
    return [match[2] for match in _LABEL.finditer(source) if has_words(match[2])]


def inline_svg(source: str, alt: str, translate: Callable[[str], str] = str) -> str:
    """The SVG text, ready to sit in an HTML page: comments dropped, alt text as its accessible name,
    and the labels with words (`labels`) passed through ``translate``."""
    if not _ROOT_TAG.search(source):
        raise ValueError("not an SVG document: no <svg> element")
    label = html.escape(alt, quote=True)
    source = _LABEL.sub(lambda m: m[1] + (translate(m[2]) if has_words(m[2]) else m[2]) + m[3], source)
    return _ROOT_TAG.sub(f'<svg role="img" aria-label="{label}"', _COMMENT.sub("", source), count=1).strip()


class Diagram(SphinxDirective):
    required_arguments = 1
    has_content = True
    option_spec = {"alt": directives.unchanged_required, "name": directives.unchanged}

    def run(self) -> list[nodes.Node]:
        if not self.options.get("alt", "").strip():
            raise self.error("a diagram needs :alt: text, read out instead of the picture")
        if not self.content:
            raise self.error("a diagram needs a caption (the directive's content)")
        relative, path = self.env.relfn2path(self.arguments[0], self.env.docname)
        self.env.note_dependency(relative)  # an edited SVG rebuilds its page
        translate = page_translator(self.env, self.env.docname)
        try:
            source = Path(path).read_text(encoding="utf-8")
            svg = inline_svg(source, translate(self.options["alt"]), translate)
        except (OSError, ValueError) as error:
            raise self.error(f"{self.arguments[0]}: {error}") from error

        figure = nodes.figure(classes=["diagram"])
        figure[TEXTS] = [self.options["alt"], *labels(source)]
        figure += nodes.raw("", svg, format="html")
        parsed = nodes.Element()
        self.state.nested_parse(self.content, self.content_offset, parsed)
        paragraph = parsed[0] if len(parsed) and isinstance(parsed[0], nodes.paragraph) else None
        if paragraph is None:
            raise self.error("a diagram's caption is one paragraph")
        caption = nodes.caption(paragraph.rawsource, "", *paragraph.children)
        self.set_source_info(caption)  # a node without a source is no message of the page's catalogue
        figure += caption
        self.add_name(figure)
        return [figure]


def setup(app):
    app.setup_extension("translation")
    app.add_directive("diagram", Diagram)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
