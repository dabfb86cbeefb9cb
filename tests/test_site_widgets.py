"""Browser tests of the widgets on the built book: they respond to their controls with no kernel.

Every chapter page (1–9), in every edition, is loaded in headless Chromium from a local server. On
each widget, moving its first control must show another figure — another file of the site, with other
bytes — that loads, or say why the combination has none; the figures must show at (nearly) their natural
size, so their text stays readable; and nothing the page loads may come from outside the site. What looks
like a control is one (a fixed value is plain text), and no value a control offers shows nothing new. On a
phone a shrunk figure — a widget's or one the page's code drew — carries a badge that says a tap enlarges
it, and a tap does.
"""
from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit

import pytest
from site_browser import (  # noqa: F401 (fixtures)
    MOVE_CONTROL,
    PANEL_SOURCES,
    PHONE,
    SITE,
    browser,
    edition_folders,
    server,
    skip_unless_built,
    toc_pages,
    viewport,
    wait,
)

skip_unless_built()

pytestmark = pytest.mark.slow  # a browser on the built site

# Each chapter's page with its widget: chapter 8's first page has none, its second the step-through decoder.
CHAPTERS = [page for page in toc_pages()
            if re.match(r"book/0[1-9][a-z]?_", page) and page != "book/08_encoder_decoder.html"]
# Every edition shows the same widgets: the Chinese one (zh/) links to the English build's figures.
EDITION_CHAPTERS = [folder + page for folder in edition_folders() for page in CHAPTERS]
# A figure shown at less than this fraction of its natural width would make its 9 pt text (12.5 px at
# tfm_widgets.display.PAGE_DPI) smaller than 10 px.
SMALLEST_SCALE = 0.8


def _built(page: str) -> str:
    if not (SITE / page).is_file():
        pytest.skip(f"{page} was not built")
    return page


def _site_file(url: str) -> bytes:
    return (SITE / unquote(urlsplit(url).path).lstrip("/")).read_bytes()


def _open(browser, server, page: str) -> None:
    browser.get_log("browser")  # drop what earlier pages logged
    browser.get(f"{server}/{_built(page)}")
    wait(browser, lambda d: d.execute_script("return document.readyState") == "complete")


def test_every_chapter_is_tested():
    assert [page.split("/")[-1][:2] for page in CHAPTERS] == [f"0{n}" for n in range(1, 10)]


@pytest.mark.parametrize("page", EDITION_CHAPTERS)
def test_moving_a_control_shows_another_figure(page, server, browser):
    _open(browser, server, page)
    widgets = browser.find_elements("css selector", ".tfm-widget")
    assert widgets, f"{page}: no widget that works without a kernel"
    for widget in widgets:
        title = widget.find_element("css selector", ".tfm-widget-title").text
        before = browser.execute_script(PANEL_SOURCES, widget)
        browser.execute_script(MOVE_CONTROL, widget.find_element("css selector", "[data-control]"))
        changed = [(old, new) for old, new in zip(before, browser.execute_script(PANEL_SOURCES, widget)) if old != new]
        said = [m.text for m in widget.find_elements("css selector", ".tfm-widget-message") if m.is_displayed()]
        # a combination the widget refuses says why (chapter 9: the build machine's measurement stops at 1024)
        assert changed or said, f"{page}, {title}: moving the first control changed no figure and said nothing"
        wait(browser, lambda d: d.execute_script(
            "return Array.from(arguments[0].querySelectorAll('img')).every(i => i.complete && i.naturalWidth > 0);",
            widget), timeout=10)
        assert all(_site_file(old) != _site_file(new) for old, new in changed), f"{page}, {title}: same figure bytes"
    severe = [entry["message"] for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert not severe, f"{page}: JavaScript console errors: {severe}"


@pytest.mark.parametrize("page", EDITION_CHAPTERS)
def test_widget_figures_are_shown_at_a_readable_scale(page, server, browser):
    _open(browser, server, page)
    wait(browser, lambda d: d.execute_script("return Array.from(document.images).every(i => i.complete);"))
    scales = browser.execute_script(
        "return Array.from(document.querySelectorAll('.tfm-widget-panel img'))"
        ".map(i => [i.getAttribute('src'), i.getBoundingClientRect().width / i.naturalWidth]);")
    assert scales, f"{page}: no widget figure"
    shrunk = [(src, round(scale, 2)) for src, scale in scales if scale < SMALLEST_SCALE]
    assert not shrunk, f"{page}: figures shown too small to read: {shrunk}"


def test_a_figure_shrunk_on_a_phone_shows_full_size_when_tapped(server, browser):
    """Chapter 1's matrices shrink to half their size in a phone's column, their numbers to about 5 px: a tap
    shows the figure at its own size, to swipe across without widening the page, and a second tap shrinks it."""
    scale = "const i = arguments[0]; return i.getBoundingClientRect().width / i.naturalWidth;"
    with viewport(browser, PHONE):
        _open(browser, server, "book/01_attention.html")
        image = browser.find_element("css selector", ".tfm-widget-panel img")
        wait(browser, lambda d: d.execute_script("return arguments[0].complete && arguments[0].naturalWidth > 0;", image))
        assert browser.execute_script(scale, image) < SMALLEST_SCALE
        browser.execute_script("arguments[0].click();", image)
        assert browser.execute_script(scale, image) == pytest.approx(1, abs=0.01)
        assert browser.execute_script("return document.documentElement.scrollWidth;") <= PHONE
        browser.execute_script("arguments[0].click();", image)
        assert browser.execute_script(scale, image) < SMALLEST_SCALE


# The magnifier badge (figure-zoom.css) on a figure's box: whether it shows.
BADGE = ("const after = getComputedStyle(arguments[0].parentElement, '::after');"
         "return after.content !== 'none' && parseFloat(after.width) > 0;")


@pytest.mark.parametrize("folder", edition_folders())
def test_a_figure_shrunk_on_a_phone_says_that_a_tap_enlarges_it(folder, server, browser):
    with viewport(browser, PHONE):
        _open(browser, server, f"{folder}book/01_attention.html")
        image = browser.find_element("css selector", ".tfm-widget-panel img")
        wait(browser, lambda d: d.execute_script(BADGE, image), timeout=10)
        browser.execute_script("arguments[0].click();", image)
        assert not browser.execute_script(BADGE, image), "the badge stays on the enlarged figure"
    _open(browser, server, f"{folder}book/01_attention.html")  # a laptop's column: the figure at its own size
    image = browser.find_element("css selector", ".tfm-widget-panel img")
    wait(browser, lambda d: d.execute_script("return arguments[0].complete && arguments[0].naturalWidth > 0;", image))
    assert not browser.execute_script(BADGE, image), "a badge on a figure shown whole"


def test_a_figure_the_pages_code_drew_shows_full_size_when_tapped_on_a_phone(server, browser):
    scale = "const i = arguments[0]; return i.getBoundingClientRect().width / i.naturalWidth;"
    with viewport(browser, PHONE):
        _open(browser, server, "book/training_results.html")
        wait(browser, lambda d: d.execute_script("return Array.from(document.images).every(i => i.complete);"))
        image = browser.find_element("css selector", ".cell_output img")
        assert browser.execute_script(scale, image) < SMALLEST_SCALE and browser.execute_script(BADGE, image)
        browser.execute_script("arguments[0].click();", image)
        assert browser.execute_script(scale, image) == pytest.approx(1, abs=0.01)
        assert browser.execute_script("return document.documentElement.scrollWidth;") <= PHONE
        browser.execute_script("arguments[0].click();", image)
        assert browser.execute_script(scale, image) < SMALLEST_SCALE


@pytest.mark.parametrize("page", EDITION_CHAPTERS)
def test_the_page_loads_nothing_from_outside_the_site(page, server, browser):
    _open(browser, server, page)
    loaded = browser.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)"
        ".concat(Array.from(document.querySelectorAll('script[src], img[src], iframe[src], source[src]'), e => e.src))"
        ".concat(Array.from(document.querySelectorAll('link[rel~=stylesheet], link[rel~=preload], link[rel~=icon]'),"
        " e => e.href));")
    assert loaded, f"{page}: the browser reports no resources at all"
    outside = sorted({url for url in loaded if not url.startswith((server + "/", "data:", "blob:"))})
    assert not outside, f"{page}: loads from outside the site: {outside}"


@pytest.mark.parametrize("page", EDITION_CHAPTERS)
def test_pages_carry_no_ipywidgets_state(page):
    # The site loads no ipywidgets JavaScript, so the state myst-nb would embed is dead weight.
    assert "application/vnd.jupyter.widget-state+json" not in (SITE / _built(page)).read_text(encoding="utf-8")


def test_a_combination_the_widget_refuses_shows_its_message(server, browser):
    # Chapter 2: G = 4 key/value heads cannot serve H = 2 query heads.
    _open(browser, server, "book/02_multihead.html")
    widget = browser.find_element("css selector", ".tfm-widget")
    heads, groups = widget.find_elements("css selector", "input[type=range]")[:2]
    browser.execute_script("arguments[0].value = 1; arguments[1].value = 2;"  # H = 2, G = 4
                           "arguments[0].dispatchEvent(new Event('input', {bubbles: true}));", heads, groups)
    message = widget.find_element("css selector", '[data-panel="0"] .tfm-widget-message')
    assert message.is_displayed() and "must divide" in message.text
    assert not widget.find_element("css selector", '[data-panel="0"] img').is_displayed()


@pytest.mark.parametrize("page", EDITION_CHAPTERS)
def test_what_looks_like_a_control_is_one(page, server, browser):
    # A value the reader cannot change (chapter 8's layer and head) is plain text, not a control that does nothing.
    _open(browser, server, page)
    idle = browser.execute_script(
        "return Array.from(document.querySelectorAll('.tfm-widget-control'))"
        ".filter(c => !c.querySelector('input, select')).map(c => c.textContent.trim());")
    assert not idle, f"{page}: controls that offer nothing to choose: {idle}"


def _widget(browser, server, page: str, title_start: str):
    _open(browser, server, page)
    found = [w for w in browser.find_elements("css selector", ".tfm-widget")
             if w.find_element("css selector", ".tfm-widget-title").text.startswith(title_start)]
    assert len(found) == 1, f"{page}: {len(found)} widgets titled {title_start}…"
    return found[0]


def _choose(browser, control, index: int) -> None:
    browser.execute_script("arguments[0].value = String(arguments[1]);"
                           "arguments[0].dispatchEvent(new Event('input', {bubbles: true}));", control, index)


def test_the_decoder_stepper_offers_dates_in_several_formats_and_says_what_is_fixed(server, browser):
    widget = _widget(browser, server, "book/08b_decoding.html", "Step-through decoder")
    dates = [o.text for o in widget.find_elements("css selector", "select[data-control] option")]
    assert len(dates) >= 4, f"the stepper offers the dates {dates}"
    fixed = [e.text for e in widget.find_elements("css selector", ".tfm-widget-fixed")]
    assert fixed == ["layer 1", "head mean"], fixed


def test_the_cost_explorer_offers_no_length_that_shows_nothing_new(server, browser):
    # Chapter 9: with the build machine's measurement (up to n = 1024), a longer n says it was not measured
    # instead of showing the same figure again.
    widget = _widget(browser, server, "book/09_efficient.html", "Attention cost")
    source = widget.find_element("css selector", 'select[data-control="0"]')
    longest = widget.find_element("css selector", 'input[data-control="1"]')
    _choose(browser, source, [o.text for o in source.find_elements("css selector", "option")].index(
        "measured on the build machine"))
    figures, said = {}, {}
    for index in range(int(longest.get_attribute("max")) + 1):
        _choose(browser, longest, index)
        n = longest.find_element("xpath", "following-sibling::output").text
        message = widget.find_element("css selector", '[data-panel="0"] .tfm-widget-message')
        if message.is_displayed():
            said[n] = message.text
        else:
            figures.setdefault(browser.execute_script(PANEL_SOURCES, widget)[0], []).append(n)
    repeated = [ns for ns in figures.values() if len(ns) > 1]
    assert not repeated, f"lengths that show the same figure: {repeated}"
    assert said and all("measured up to n = 1024 only" in text for text in said.values()), said
    assert all(int(n) > 1024 for n in said) and all(int(n) <= 1024 for ns in figures.values() for n in ns)
