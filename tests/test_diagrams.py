"""The book's diagrams: the SVG sources in book/diagrams and the ``{diagram}`` directive (_ext/diagrams.py)
that draws them inline. How they look on the built site: test_site_pages.py."""
from __future__ import annotations

import importlib.util
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DIAGRAM_FILES = sorted((ROOT / "book" / "diagrams").glob("*.svg"))
# The chapters: book/01_….md to book/10_capstone.md.
CHAPTERS = sorted((ROOT / "book").glob("[0-9][0-9]_*.md"))
SVG = "{http://www.w3.org/2000/svg}"
# Colours that vanish on one of the two themes' backgrounds (white, and the dark theme's near-black).
THEME_BOUND = {"#000", "#000000", "black", "#fff", "#ffffff", "white"}


def _load_extension():
    spec = importlib.util.spec_from_file_location("diagrams", ROOT / "_ext" / "diagrams.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


inline_svg = _load_extension().inline_svg


def test_inline_svg_names_the_picture_with_its_alt_text():
    svg = inline_svg('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 10 10"><rect/></svg>',
                     'Q "and" K <scores>')
    root = ET.fromstring(svg)
    assert root.get("role") == "img"
    assert root.get("aria-label") == 'Q "and" K <scores>'


def test_inline_svg_drops_the_comments_meant_for_editors():
    svg = inline_svg('<svg viewBox="0 0 1 1">\n  <!-- how to edit -->\n  <rect/>\n</svg>', "a box")
    assert "<!--" not in svg and "<rect/>" in svg


def test_inline_svg_rejects_a_file_that_is_not_svg():
    with pytest.raises(ValueError, match="no <svg>"):
        inline_svg("<html><body></body></html>", "alt")


def test_there_are_diagrams():
    assert DIAGRAM_FILES, "book/diagrams holds no SVG"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda path: path.stem)
def test_every_chapter_has_a_diagram(chapter):
    """Each chapter explains at least one idea with a picture, drawn inline by the {diagram} directive."""
    placed = re.findall(r"^```\{diagram\}\s+diagrams/(\S+\.svg)", chapter.read_text(encoding="utf-8"), re.M)
    assert placed, f"{chapter.name} has no diagram"
    missing = [name for name in placed if not (ROOT / "book" / "diagrams" / name).is_file()]
    assert not missing, f"{chapter.name} places diagrams that book/diagrams lacks: {missing}"


@pytest.mark.parametrize("path", DIAGRAM_FILES, ids=lambda path: path.name)
def test_diagram_is_drawn_in_the_pages_colours(path):
    root = ET.parse(path).getroot()
    assert root.tag == f"{SVG}svg" and re.fullmatch(r"0 0 [\d.]+ [\d.]+", root.get("viewBox", "")), "needs a viewBox"
    assert root.get("fill") == "currentColor", "text must default to the page's text colour"
    bound = [(element.tag.removeprefix(SVG), attribute, element.get(attribute)) for element in root.iter()
             for attribute in ("fill", "stroke") if (element.get(attribute) or "").lower() in THEME_BOUND]
    assert not bound, f"colours unreadable in one of the themes: {bound[:5]}"


@pytest.mark.parametrize("path", DIAGRAM_FILES, ids=lambda path: path.name)
def test_diagram_has_no_ids(path):
    """Inline SVGs share the page's ids: two diagrams defining the same one would draw each other's parts."""
    ids = [element.get("id") for element in ET.parse(path).getroot().iter() if element.get("id")]
    assert not ids, f"ids {ids}"
