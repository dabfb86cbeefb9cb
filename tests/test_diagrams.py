"""The book's diagrams: the SVG sources in book/diagrams and the ``{diagram}`` directive (_ext/diagrams.py)
that draws them inline. How they look on the built site: test_site_pages.py."""
from __future__ import annotations

import importlib.util
import math
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
    """Each chapter explains at least one idea with a picture, drawn inline by the {diagram} directive, on one
    of its pages (chapter 8's are on its second page, 08b_decoding.md)."""
    pages = [chapter, *sorted(chapter.parent.glob(f"{chapter.name[:2]}[a-z]_*.md"))]
    placed = [name for page in pages
              for name in re.findall(r"^```\{diagram\}\s+diagrams/(\S+\.svg)", page.read_text(encoding="utf-8"), re.M)]
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


def test_beam_search_tree_scores_are_the_sums_of_its_log_probabilities():
    """Chapter 8's beam-search tree (K = 2): every node's number is its sequence's log-probability under the
    chapter's two-step example, and the solid nodes are the K best of each step, the dashed ones pruned."""
    first = {"A": 0.6, "B": 0.4, "C": 0.0}  # the chapter's cell: p(first token), p(second token | first)
    second = {"A": {"A": 0.3, "B": 0.3, "C": 0.4}, "B": {"A": 0.05, "B": 0.9, "C": 0.05}}
    cell = (ROOT / "book" / "08b_decoding.md").read_text(encoding="utf-8")
    assert "first = torch.tensor([0.6, 0.4, 0.0])" in cell and "[0.05, 0.9, 0.05]" in cell, \
        "chapter 8's example changed: redraw book/diagrams/beam_search_tree.svg"

    def log_p(sequence: str) -> float:
        p = first[sequence[0]] * (second[sequence[0]][sequence[1]] if len(sequence) > 1 else 1)
        return math.log(p) if p > 0 else -math.inf

    root = ET.parse(ROOT / "book" / "diagrams" / "beam_search_tree.svg").getroot()
    texts = [(float(t.get("x")), float(t.get("y")), "".join(t.itertext())) for t in root.iter(f"{SVG}text")]

    def inside(box, x, y):
        left, top = float(box.get("x")), float(box.get("y"))
        return left <= x <= left + float(box.get("width")) and top <= y <= top + float(box.get("height"))

    nodes = {}  # a node: a box holding a sequence's name and its log p
    for box in root.iter(f"{SVG}rect"):
        held = [text for x, y, text in texts if inside(box, x, y)]
        names = [text for text in held if re.fullmatch(r"[ABC]{1,2}", text)]
        values = [text for text in held if re.fullmatch(r"−?\d\.\d\d|−∞", text)]
        if names and values:
            nodes[names[0]] = (values[0], box.get("stroke-dasharray") is None)
    assert set(nodes) == {"A", "B", "C"} | {a + b for a in "AB" for b in "ABC"}, sorted(nodes)
    for name, (value, _kept) in nodes.items():
        expected = log_p(name)
        shown = -math.inf if value == "−∞" else float(value.replace("−", "-"))
        assert shown == expected or abs(shown - expected) <= 0.005, f"{name}: drawn {value}, log p = {expected:.4f}"
    for length in (1, 2):
        step = sorted((name for name in nodes if len(name) == length), key=log_p, reverse=True)
        kept = {name for name in step if nodes[name][1]}
        assert kept == set(step[:2]), f"step {length}: drawn as kept {sorted(kept)}, the 2 best are {step[:2]}"
