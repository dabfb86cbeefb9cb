"""Browser tests of what a reader sees on the built book, at desktop and phone width, light and dark.

Markdown tables render as tables, one search field, a favicon, equations that fit their column,
launch buttons only where there is code to run, the diagrams (drawn inline, with alt text and a
caption, legible on a phone and in both colour themes), and chapter 1's build-up before its formula.
"""
from __future__ import annotations

import os
import re
import urllib.request

import pytest
from site_browser import (  # noqa: F401 (fixtures)
    DESKTOP,
    PHONE,
    ROOT,
    SITE,
    browser,
    server,
    shows_code,
    skip_unless_built,
    theme,
    toc_pages,
    viewport,
    wait,
)

skip_unless_built()

pytestmark = pytest.mark.slow  # a browser on the built site

PAGES = [page for page in toc_pages() if (SITE / page).is_file()]
# Each diagram's figure id (its :name: in the page's source), by page.
DIAGRAMS = {
    "book/intro.html": ["fig-architecture"],
    "book/01_attention.html": ["fig-one-query", "fig-qk-shapes"],
    "book/02_multihead.html": ["fig-multihead-split", "fig-kv-sharing"],
    "book/03_masking.html": ["fig-masks", "fig-teacher-forcing"],
    "book/04_cross_attention.html": ["fig-decoder-data-flow"],
    "book/05_positional.html": ["fig-rope-rotation"],
    "book/06_feedforward.html": ["fig-ffn-swiglu"],
    "book/07_norms.html": ["fig-norm-axes", "fig-pre-post-norm"],
    "book/08b_decoding.html": ["fig-beam-tree", "fig-kv-cache"],
    "book/09_efficient.html": ["fig-flash-tiles"],
    "book/10_capstone.html": ["fig-training-step"],
}
# Text drawn smaller than this many CSS pixels is hard to read on a phone.
SMALLEST_TEXT_PX = 9
# WCAG's minimum contrast for large or bold text: the floor for every label of a diagram (plain text
# is currentColor, the page's own text colour, far above it).
SMALLEST_CONTRAST = 3.0


def _source(page: str) -> str:
    return (SITE / page).read_text(encoding="utf-8")


def _open(browser, server, page: str) -> None:
    browser.get(f"{server}/{page}")
    wait(browser, lambda d: d.execute_script("return document.readyState") == "complete")


# ------------------------------------------------------------------ tables, search, favicon

_VISIBLE_TEXT = """
const main = document.querySelector('main').cloneNode(true);
main.querySelectorAll('pre, code, script, style, mjx-container').forEach(e => e.remove());
return main.textContent;
"""


@pytest.mark.parametrize("page", PAGES)
def test_no_markdown_table_shows_as_raw_pipes(page, server, browser):
    _open(browser, server, page)
    # A table's separator row |---|, whose dashes typography may have turned into en or em dashes.
    raw = re.findall(r"\|\s*:?[-\u2013\u2014]+:?\s*\|", browser.execute_script(_VISIBLE_TEXT))
    assert not raw, f"{page}: a Markdown table printed as text ({raw[:2]})"


def test_tables_that_cells_print_render_as_tables(server, browser):
    page = "book/training_results.html"
    _open(browser, server, page)
    printed = (ROOT / "book" / "training_results.md").read_text(encoding="utf-8").count('"|---|')  # one per table
    tables = browser.find_elements("css selector", "div.cell_output table")
    assert printed and len(tables) >= printed, f"{page}: {len(tables)} tables from {printed} cells that print one"


@pytest.mark.parametrize("width", [DESKTOP, PHONE])
def test_one_search_field(width, server, browser):
    with viewport(browser, width):
        _open(browser, server, "book/01_attention.html")
        shown = browser.execute_script("""
            return Array.from(document.querySelectorAll('.search-button, .search-button-field, input[type=search]'))
              .filter(e => { const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0
                               && getComputedStyle(e).visibility !== 'hidden'; })
              .map(e => e.className || e.tagName);""")
    assert len(shown) == 1, f"{width} px wide: {len(shown)} search fields or buttons shown: {shown}"


def _fetch(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.status, response.read()


def test_favicon_is_served_where_the_pages_and_browsers_look(server, browser):
    _open(browser, server, "book/intro.html")
    icons = browser.execute_script("return Array.from(document.querySelectorAll('link[rel~=icon]')).map(l => l.href);")
    assert icons, "the pages name no favicon"
    for url in (*icons, f"{server}/favicon.ico"):  # browsers also ask the site's root, e.g. for its redirect page
        status, body = _fetch(url)
        assert status == 200 and (body.startswith(b"\x00\x00\x01\x00") or b"<svg" in body[:200]), f"{url}: no icon"


# ------------------------------------------------------------------ equations

_EQUATIONS = """
return Array.from(document.querySelectorAll('div.math')).map(box => {
  const math = box.querySelector('mjx-container > mjx-math');
  return math ? [Math.round(math.getBoundingClientRect().width), Math.floor(box.getBoundingClientRect().width),
                 (box.querySelector('mjx-assistive-mml') || box).textContent.slice(0, 60)] : null;
});
"""


@pytest.mark.parametrize("width", [DESKTOP, PHONE])
def test_display_equations_fit_their_column(width, server, browser):
    too_wide, pages_with_math = [], 0
    with viewport(browser, width):
        for page in PAGES:
            if '<div class="math' not in _source(page):  # display math
                continue
            pages_with_math += 1
            _open(browser, server, page)
            equations = wait(browser, lambda d: (lambda eqs: eqs if all(eqs) else None)(d.execute_script(_EQUATIONS)))
            too_wide += [f"{page}: {w} px in {box} px: {text}" for w, box, text in equations if w > box]
    assert pages_with_math, "no page has display math"
    assert not too_wide, f"{width} px wide, equations wider than their column:\n" + "\n".join(too_wide)


@pytest.mark.parametrize("page", [page for page in PAGES if 'class="math' in (SITE / page).read_text(encoding="utf-8")])
def test_no_tex_source_shows_in_rendered_math(page, server, browser):
    _open(browser, server, page)
    wait(browser, lambda d: d.find_elements("css selector", "mjx-container"))
    leaks = browser.execute_script(
        "return Array.from(document.querySelectorAll('mjx-assistive-mml')).map(e => e.textContent)"
        ".filter(t => t.includes('\\\\'));")
    assert not leaks, f"{page}: backslashes in rendered math (an escape MathJax left as text): {leaks[:3]}"


# ------------------------------------------------------------------ launch buttons

_LAUNCHERS = re.compile(r'href="https://(mybinder\.org/v2/|colab\.research\.google\.com/|[^"]+/hub/user-redirect/)')


def test_pages_without_code_have_no_launch_buttons():
    without_code = [page for page in PAGES if not shows_code(_source(page))]
    assert without_code, "every page shows code: nothing to check"
    launching = [page for page in without_code if _LAUNCHERS.search(_source(page))]
    assert not launching, f"launch buttons on pages that run nothing: {launching}"


def test_jupyterhub_button_appears_only_for_a_configured_hub():
    hub = os.environ.get("BOOK_JUPYTERHUB_URL", "").strip().rstrip("/")
    with_code = [page for page in PAGES if shows_code(_source(page))]
    hub_buttons = {page: re.findall(r'href="(https://[^"]+)/hub/user-redirect/git-pull\?', _source(page)) for page in with_code}
    if hub:
        assert all(hub_buttons[page] == [hub] for page in with_code), f"pages without a button to {hub}: {hub_buttons}"
    else:
        assert not any(hub_buttons.values()), f"JupyterHub buttons, but no hub is configured: {hub_buttons}"


# ------------------------------------------------------------------ diagrams

_DIAGRAM = """
const figure = document.getElementById(arguments[0]);
if (!figure) return null;
const svg = figure.querySelector('svg');
const caption = figure.querySelector('figcaption');
const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
const background = getComputedStyle(document.documentElement).getPropertyValue('--pst-color-background').trim();
return {
  role: svg.getAttribute('role'), alt: svg.getAttribute('aria-label') || '', caption: caption ? caption.textContent.trim() : '',
  width: svg.getBoundingClientRect().width, room: figure.getBoundingClientRect().width,
  smallest: Math.min(...Array.from(svg.querySelectorAll('text')).map(t => parseFloat(getComputedStyle(t).fontSize) * scale)),
  fills: Array.from(new Set(Array.from(svg.querySelectorAll('text')).map(t => getComputedStyle(t).fill))),
  background: background,
};
"""


def _rgb(colour: str) -> tuple[float, float, float]:
    if colour.startswith("#"):
        digits = colour[1:] if len(colour) == 7 else "".join(c * 2 for c in colour[1:4])
        return tuple(int(digits[i:i + 2], 16) for i in (0, 2, 4))
    return tuple(float(x) for x in re.findall(r"[\d.]+", colour)[:3])


def _contrast(a: str, b: str) -> float:
    """WCAG contrast ratio of two CSS colours."""
    def luminance(colour):
        channels = [c / 255 for c in _rgb(colour)]
        linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_every_diagram_source_is_placed_on_a_page():
    used = {name for page in (ROOT / "book").glob("*.md")
            for name in re.findall(r"^```\{diagram\}\s+diagrams/(\S+\.svg)", page.read_text(encoding="utf-8"), re.M)}
    files = {path.name for path in (ROOT / "book" / "diagrams").glob("*.svg")}
    assert len(used) == sum(len(ids) for ids in DIAGRAMS.values()), f"diagram directives: {sorted(used)}"
    assert files == used, f"unused: {sorted(files - used)}; missing: {sorted(used - files)}"


@pytest.mark.parametrize("page", sorted(DIAGRAMS))
@pytest.mark.parametrize("mode", ["light", "dark"])
@pytest.mark.parametrize("width", [DESKTOP, PHONE])
def test_diagrams_have_alt_text_a_caption_and_stay_legible(page, mode, width, server, browser):
    with viewport(browser, width), theme(browser, mode):
        _open(browser, server, page)
        for figure_id in DIAGRAMS[page]:
            shown = browser.execute_script(_DIAGRAM, figure_id)
            assert shown, f"{page}: no diagram #{figure_id}"
            assert shown["role"] == "img" and len(shown["alt"]) > 40, f"{page}#{figure_id}: no alt text"
            assert shown["caption"], f"{page}#{figure_id}: no caption"
            assert shown["width"] <= shown["room"] + 0.5, f"{page}#{figure_id}: {shown['width']} px in {shown['room']} px"
            assert shown["smallest"] >= SMALLEST_TEXT_PX, \
                f"{page}#{figure_id} at {width} px: text {shown['smallest']:.1f} px high"
            faint = [fill for fill in shown["fills"] if _contrast(fill, shown["background"]) < SMALLEST_CONTRAST]
            assert not faint, f"{page}#{figure_id}, {mode} theme: text colours {faint} on {shown['background']}"


# ------------------------------------------------------------------ chapter 1's build-up

def test_chapter_1_builds_attention_up_before_its_formula(server, browser):
    page = "book/01_attention.html"
    _open(browser, server, page)
    order = browser.execute_script("""
        const section = document.getElementById('from-averaging-to-attention');
        const formula = Array.from(document.querySelectorAll('div.math'))
          .find(m => (m.querySelector('mjx-assistive-mml') || m).textContent.includes('Attention'));
        const cells = Array.from(document.querySelectorAll('div.cell'))
          .filter(c => section && formula && (section.compareDocumentPosition(c) & Node.DOCUMENT_POSITION_FOLLOWING)
                       && (c.compareDocumentPosition(formula) & Node.DOCUMENT_POSITION_FOLLOWING));
        return {section: !!section, formula: !!formula,
                sectionFirst: !!(section && formula && section.compareDocumentPosition(formula) & Node.DOCUMENT_POSITION_FOLLOWING),
                outputs: cells.map(c => (c.querySelector('.cell_output') || {textContent: ''}).textContent.trim())};""")
    assert order["section"] and order["formula"], f"{page}: build-up section or attention formula missing: {order}"
    assert order["sectionFirst"], f"{page}: the attention formula comes before the build-up"
    assert len(order["outputs"]) >= 3 and all(order["outputs"]), \
        f"{page}: the build-up needs executed cells with output before the formula: {order['outputs']}"
