"""The words of the book's figures in the edition's language, with no change to the code that draws them.

`install` (called by the book's build alone, never in a reader's kernel) wraps `matplotlib.text.Text` so that
every line of a figure's text is looked up in the catalogue, with its numbers as placeholders ("head {0} → kv
{1}"), and `recording` collects the messages drawn, for the translators. How, and what counts as a message:
tfm_widgets/README.md.
"""
from __future__ import annotations

import gettext
import os
import re
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

from matplotlib.text import Text

__all__ = ["CATALOGUE_VARIABLE", "OUTPUT_KEY", "install", "message", "recording", "start_book_kernel", "words"]

CATALOGUE_VARIABLE = "BOOK_FIGURE_CATALOGUE"  # a compiled catalogue (.mo) for the build's kernels
OUTPUT_KEY = "figure_texts"  # in the metadata of a kernel's output: the messages drawn for it
MISSING_GLYPH = r"(Glyph \d+ .* missing from font|.* does not have a glyph for)"

# A number standing alone: not part of a name such as fp16, W_1 or x2.
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?!\w)")
_PLACEHOLDER = re.compile(r"\{(\d+)\}")
_WORD = re.compile(r"[A-Za-z]{2}")
_MATH = re.compile(r"\$[^$]*\$")

_original = {"set_text": Text.set_text, "draw": Text.draw}
_catalogue: gettext.NullTranslations | None = None
_recorder = threading.local()  # .drawn: the set `recording` fills in this thread, if any


def message(line: str) -> tuple[str, list[str]] | None:
    """The catalogue's key for one line of text and the numbers it takes out, or None for a line with no word."""
    numbers = _NUMBER.findall(line)
    if not _WORD.search(_MATH.sub("", line)):
        return None
    counter = iter(range(len(numbers)))
    return _NUMBER.sub(lambda _match: f"{{{next(counter)}}}", line), numbers


def _translate_line(line: str) -> str:
    found = message(line)
    if found is None:
        return line
    msgid, numbers = found
    translation = _catalogue.gettext(msgid)
    if translation == msgid:
        return line  # untranslated: the line as it was
    return _PLACEHOLDER.sub(lambda match: numbers[int(match.group(1))], translation)


def _translate(text: str) -> str:
    return text if _catalogue is None else "\n".join(map(_translate_line, text.split("\n")))


def _set_text(self: Text, s) -> None:
    english = "" if s is None else str(s)
    self._english_text = english
    _original["set_text"](self, _translate(english))


def _record(text: str) -> None:
    """Add the messages of ``text`` to the set `recording` fills in this thread, if any."""
    drawn = getattr(_recorder, "drawn", None)
    if drawn is not None:
        drawn.update(found[0] for line in text.split("\n") if (found := message(line)) is not None)


def _draw(self: Text, renderer) -> None:
    if self.get_visible():
        _record(getattr(self, "_english_text", self.get_text()))
    _original["draw"](self, renderer)


def words(text: str) -> str:
    """A text a widget shows in place of a figure (why it refuses a combination of its controls), in the
    edition's language: recorded and translated line by line, as a figure's words are."""
    _record(text)
    return _translate(text)


def install(catalogue: gettext.NullTranslations | None = None) -> None:
    """Translate every text that figures set from now on with ``catalogue`` (None: keep them English), record
    the messages drawn, and make a missing glyph an error. Calling it again replaces the catalogue."""
    global _catalogue
    _catalogue = catalogue
    Text.set_text, Text.draw = _set_text, _draw
    warnings.filterwarnings("error", message=MISSING_GLYPH)


@contextmanager
def recording() -> Iterator[set[str]]:
    """The messages of the texts drawn in this thread while the context lasts, as a set it fills."""
    outer, _recorder.drawn = getattr(_recorder, "drawn", None), set()
    try:
        yield _recorder.drawn
    finally:
        _recorder.drawn = outer


def start_book_kernel(shell) -> None:
    """Set up a kernel of the book's build (an IPython startup file runs it): figures speak the language of
    the catalogue that ``$BOOK_FIGURE_CATALOGUE`` names, if any, and each output that shows a figure lists,
    in its metadata (`OUTPUT_KEY`, kept by the execution cache), the messages drawn since the previous one:
    a figure is often drawn to PNG before the output that shows it (`controls.figure_image`)."""
    path = os.environ.get(CATALOGUE_VARIABLE)
    if path:
        with open(path, "rb") as file:
            install(gettext.GNUTranslations(file))
    else:
        install()
    _recorder.drawn = drawn = set()  # the cells run in this thread
    formatter = shell.display_formatter
    original_format = formatter.format

    def format_with_messages(obj, *args, **kwargs):
        data, metadata = original_format(obj, *args, **kwargs)
        if "image/png" in data or drawn:
            metadata = {**(metadata or {}), OUTPUT_KEY: sorted(drawn)}
            drawn.clear()
        return data, metadata

    formatter.format = format_with_messages
