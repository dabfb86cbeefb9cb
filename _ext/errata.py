"""Errata and clarifications of the study notes: an anchor on every box, and the errata page's tables.

A box is a MyST admonition whose classes include ``erratum`` (the notes are wrong: the box gives
the corrected value, computed by the code beside it) or ``clarification`` (the notes are right but
easy to misread, or say less than they seem to), and ``dropdown``, so that it shows collapsed, its
title a one-line summary::

    ```{admonition} Erratum — the sine's base is 10000, as the cosine's
    :class: erratum dropdown
    **Note:** {note}`data-flow` give PE(pos, 2i) = sin(pos / 1000^(2i/d)) …
    **Correct:** … the corrected value, from the code cell above …
    ```

While a page is read, each box gets an anchor (its ``:name:``, else one made from its title) and
is recorded with the notes it cites through the ``{note}`` role (study_notes.py); a box that cites
no note, lacks ``dropdown`` or has a title of the wrong form is a warning (an error in the strict
build). The directive ``{errata-table}`` (option ``:kind: erratum`` or ``clarification``) becomes,
when the page is written, a count and a table of every box of that kind, in the order of the table
of contents, each row linking to its box.

Its words (the title words, the tables' headings and counts) come from the site catalogue
(_ext/translation.py): in another edition a box's title starts with the translated word, or with the
English one while its page is not translated yet.
"""
from __future__ import annotations

from dataclasses import dataclass

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.addnodes import pending_xref
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective
from study_notes import NOTES
from translation import N_, _

__all__ = ["Box", "ErrataTable", "setup"]

logger = logging.getLogger(__name__)

# The title word and the plural of each kind of box.
KINDS = {"erratum": (N_("Erratum"), N_("errata")), "clarification": (N_("Clarification"), N_("clarifications"))}
TITLE_SEPARATOR = N_(" — ")  # between the title word and the summary; "：" in Chinese

# The errata page links to a box by its anchor; open the box when the address names it.
_OPEN_TARGETED_BOX = """
window.addEventListener("load", () => {
  const openTarget = () => {
    const box = document.getElementById(decodeURIComponent(location.hash.slice(1)));
    if (box && box.classList.contains("toggle-hidden")) box.querySelector(".admonition-title").click();
  };
  openTarget();
  window.addEventListener("hashchange", openTarget);
});
"""


@dataclass(frozen=True)
class Box:
    """One erratum or clarification box: where it is, what it says it corrects, which notes it cites."""

    docname: str
    anchor: str
    kind: str
    summary: str  # the title after "Erratum — "
    notes: tuple[str, ...]  # keys of study_notes.NOTES


class errata_table(nodes.General, nodes.Element):
    """Placeholder for a table of boxes, filled in once every page has been read."""


class ErrataTable(SphinxDirective):
    """``{errata-table}`` with ``:kind: erratum`` (the default) or ``:kind: clarification``."""

    option_spec = {"kind": lambda argument: directives.choice(argument, tuple(KINDS))}

    def run(self) -> list[nodes.Node]:
        self.env.errata_table_docs = getattr(self.env, "errata_table_docs", set()) | {self.env.docname}
        return [errata_table(kind=self.options.get("kind", "erratum"))]


def _boxes(env) -> dict[str, list[Box]]:
    if not hasattr(env, "errata_boxes"):
        env.errata_boxes = {}
    return env.errata_boxes


def _record_boxes(app, doctree: nodes.document) -> None:
    """Give every box of the page just read an anchor and record it."""
    docname = app.env.docname
    boxes = []
    for node in doctree.findall(nodes.admonition):
        kinds = [kind for kind in KINDS if kind in node["classes"]]
        if not kinds:
            continue
        kind = kinds[0]
        word = KINDS[kind][0]
        title = node.next_node(nodes.title).astext()
        prefix = f"{_(word)}{_(TITLE_SEPARATOR)}"
        if not title.startswith(prefix):  # a page not translated yet
            prefix = f"{word}{TITLE_SEPARATOR}"
        if len(kinds) > 1 or not title.startswith(prefix):
            logger.warning(f"a {kind} box's title must read '{_(word)}{_(TITLE_SEPARATOR)}<what it corrects>', "
                           f"not {title!r}", location=node)
        if "dropdown" not in node["classes"]:
            logger.warning(f"{kind} box {title!r} must have the class 'dropdown', so that it shows collapsed",
                           location=node)
        notes = tuple(dict.fromkeys(ref["note_key"] for ref in node.findall(pending_xref) if "note_key" in ref))
        if not notes:
            logger.warning(f"{kind} box {title!r} cites no note: name one with {{note}}`key`", location=node)
        summary = title.removeprefix(prefix)
        if not node["ids"]:
            anchor = base = nodes.make_id(f"{kind}-{summary}")
            suffix = 1
            while anchor in doctree.ids:
                suffix += 1
                anchor = f"{base}-{suffix}"
            node["ids"].append(anchor)
            doctree.ids[anchor] = node
        boxes.append(Box(docname, node["ids"][0], kind, summary, notes))
    if boxes:
        _boxes(app.env)[docname] = boxes


def _purge(app, env, docname: str) -> None:
    _boxes(env).pop(docname, None)
    getattr(env, "errata_table_docs", set()).discard(docname)


def _merge(app, env, docnames, other) -> None:
    _boxes(env).update({name: boxes for name, boxes in _boxes(other).items() if name in docnames})
    env.errata_table_docs = getattr(env, "errata_table_docs", set()) | getattr(other, "errata_table_docs", set())


def _reread_tables(app, env, added, changed, removed) -> list[str]:
    """A page with a table lists the boxes of every page, so it is read again when any page changes."""
    return sorted(getattr(env, "errata_table_docs", set())) if added | changed | removed else []


def _toc_order(env) -> list[str]:
    order, seen = [], set()

    def visit(docname: str) -> None:
        if docname not in seen:
            seen.add(docname)
            order.append(docname)
            for child in env.toctree_includes.get(docname, ()):
                visit(child)

    visit(env.config.root_doc)
    return order + sorted(set(_boxes(env)) - seen)


def _link(text: str, refuri: str) -> nodes.paragraph:
    return nodes.paragraph("", "", nodes.reference(text, text, internal=True, refuri=refuri))


def _table(app, fromdocname: str, boxes: list[Box]) -> nodes.table:
    builder, labels = app.builder, app.env.get_domain("std").labels
    uri = lambda docname, anchor="": builder.get_relative_uri(fromdocname, docname) + (f"#{anchor}" if anchor else "")
    # Three columns, so that the table fits a phone's width; the notes go under the chapter.
    headers, widths = ("#", _("what is corrected"), _("chapter · notes")), (4, 60, 36)
    tgroup = nodes.tgroup(cols=len(headers))
    tgroup += [nodes.colspec(colwidth=width) for width in widths]
    tgroup += nodes.thead("", nodes.row("", *(nodes.entry("", nodes.paragraph(text=h)) for h in headers)))
    body = nodes.tbody()
    for number, box in enumerate(boxes, start=1):
        where = nodes.entry("", _link(app.env.titles[box.docname].astext(), uri(box.docname)))
        for key in box.notes:
            docname, labelid, _title = labels.get(NOTES[key].label, (None, "", ""))
            name = _(NOTES[key].name)
            note = _link(name, uri(docname, labelid)) if docname else nodes.paragraph(text=name)
            note["classes"].append("errata-note")
            where += note
        body += nodes.row(
            "",
            nodes.entry("", nodes.paragraph(text=str(number))),
            nodes.entry("", _link(box.summary, uri(box.docname, box.anchor))),
            where,
        )
    tgroup += body
    return nodes.table("", tgroup, classes=["errata-table"])


def _fill_tables(app, doctree: nodes.document, fromdocname: str) -> None:
    boxes = [box for docname in _toc_order(app.env) for box in _boxes(app.env).get(docname, [])]
    for node in list(doctree.findall(errata_table)):
        kind = node["kind"]
        chosen = [box for box in boxes if box.kind == kind]
        pages = len({box.docname for box in chosen})
        word, plural = KINDS[kind]
        count = nodes.paragraph(text=_("{count} {kind} on {pages} {page}.").format(
            count=len(chosen), kind=_(word).lower() if len(chosen) == 1 else _(plural), pages=pages,
            page=_("page") if pages == 1 else _("pages")))
        node.replace_self([count, _table(app, fromdocname, chosen)] if chosen else [count])


def setup(app):
    app.setup_extension("study_notes")
    app.setup_extension("translation")
    app.add_node(errata_table)
    app.add_directive("errata-table", ErrataTable)
    app.add_js_file(None, body=_OPEN_TARGETED_BOX)
    app.connect("doctree-read", _record_boxes)
    app.connect("env-purge-doc", _purge)
    app.connect("env-merge-info", _merge)
    app.connect("env-get-outdated", _reread_tables)
    app.connect("doctree-resolved", _fill_tables)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "env_version": 1}
