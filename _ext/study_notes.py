"""The study notes the course grew from, and the ``{note}`` role that cites one of them.

Readers never see the notes' file names: a page cites a note by its key, ``{note}`data-flow```,
which renders as the note's name ("the notes on the Transformer's data flow") and links to its
section of the notes map (book/notes_map.md, label ``notes-<key>``); ``{note}`text <key>```
chooses the link text. The file names live here only, for the tests that check every quotation
of a note against that note (tests/test_notes_citations.py). The names are messages of the site
catalogue (_ext/translation.py), shown in each edition's language.
"""
from __future__ import annotations

from dataclasses import dataclass

from docutils import nodes
from sphinx.addnodes import pending_xref
from sphinx.util.docutils import SphinxRole
from sphinx.util.nodes import split_explicit_title

from translation import N_, _

__all__ = ["Note", "NOTES", "NoteRole"]


@dataclass(frozen=True)
class Note:
    key: str
    file: str  # in shared/seeds/
    name: str  # how the book refers to it: a message of the site catalogue, shown as _(note.name)

    @property
    def label(self) -> str:
        """The label of the note's section on the notes map."""
        return f"notes-{self.key}"


NOTES: dict[str, Note] = {note.key: note for note in (
    Note("worked-examples", "000_53fd03a28cfd30be.txt", N_("the notes on attention by example")),
    Note("data-flow", "001_157e113c0f4243ed.txt", N_("the notes on the Transformer's data flow")),
    Note("components", "002_dd6b0fe75acbf285.txt", N_("the notes on the Transformer's components")),
    Note("overview", "003_cc6de099deb8f0e6.txt", N_("the overview notes on attention models")),
    Note("matrices", "004_a625cfee7937b3fa.txt", N_("the notes on attention in matrix form")),
)}


class NoteRole(SphinxRole):
    """``{note}`key``` or ``{note}`text <key>```: a link to the note's section of the notes map."""

    def run(self) -> tuple[list[nodes.Node], list[nodes.system_message]]:
        has_text, text, key = split_explicit_title(self.text)
        note = NOTES.get(key)
        if note is None:
            message = self.inliner.reporter.error(
                f"unknown note {key!r}; the notes are {', '.join(NOTES)}", line=self.lineno)
            return [self.inliner.problematic(self.rawtext, self.rawtext, message)], [message]
        label = text if has_text else _(note.name)
        reference = pending_xref(self.rawtext, nodes.inline(label, label), refdomain="std", reftype="ref",
                                 reftarget=note.label, refexplicit=True, refwarn=True, refdoc=self.env.docname)
        reference["note_key"] = key  # what the errata extension reads to list a box's notes
        return [reference], []


def setup(app):
    app.setup_extension("translation")
    app.add_role("note", NoteRole())
    return {"parallel_read_safe": True, "parallel_write_safe": True}
