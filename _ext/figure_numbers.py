"""Figures numbered per chapter, as books number them: "Fig. 8.1" is chapter 8's first figure.

The table of contents numbers no sections (the chapters' titles say their number), so Sphinx numbers
the figures across the whole book, and chapter 8's first figure is "Fig. 7". After Sphinx has numbered
them, each one gets the chapter's number (the page's name begins with it: ``book/08_encoder_decoder``) and
its place in the chapter; on a page outside the chapters (the introduction) the figures are numbered
1, 2, … in the book's order. Captions and references ({numref}) both read these numbers.
"""
from __future__ import annotations

import re

__all__ = ["chapter_of", "number_per_chapter", "setup"]

_CHAPTER = re.compile(r"^(\d+)[a-z]?_")


def chapter_of(docname: str) -> int | None:
    """The chapter a page belongs to, from its name (``book/08_encoder_decoder`` → 8); None outside the chapters."""
    match = _CHAPTER.match(docname.rsplit("/", 1)[-1])
    return int(match.group(1)) if match else None


def number_per_chapter(fignumbers: dict[str, dict[str, dict[str, tuple[int, ...]]]]
                       ) -> dict[str, dict[str, dict[str, tuple[int, ...]]]]:
    """Sphinx's numbers ({page: {figure type: {id: number}}}, in the book's order) renumbered per chapter."""
    counters: dict[tuple[int | None, str], int] = {}
    renumbered: dict[str, dict[str, dict[str, tuple[int, ...]]]] = {}
    for docname, types in fignumbers.items():
        chapter = chapter_of(docname)
        for figtype, figures in types.items():
            # Sphinx's numbers are in the page's order
            for figure_id, _number in sorted(figures.items(), key=lambda item: item[1]):
                counters[chapter, figtype] = counters.get((chapter, figtype), 0) + 1
                number = counters[chapter, figtype]
                renumbered.setdefault(docname, {}).setdefault(figtype, {})[figure_id] = (
                    (chapter, number) if chapter is not None else (number,))
    return renumbered


def _renumber(app, env) -> list[str]:
    """After Sphinx's numbering (env-get-updated): the pages whose numbers changed since the last build."""
    renumbered = number_per_chapter(env.toc_fignumbers)
    previous = getattr(env, "chapter_fignumbers", {})
    env.toc_fignumbers = renumbered
    env.chapter_fignumbers = renumbered
    return [docname for docname in renumbered.keys() | previous.keys()
            if renumbered.get(docname) != previous.get(docname)]


def setup(app):
    app.connect("env-get-updated", _renumber, priority=900)  # after sphinx's TocTreeCollector numbered them
    return {"parallel_read_safe": True, "parallel_write_safe": True, "env_version": 1}
