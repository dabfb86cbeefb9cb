"""Browser tests of the built book (`_build/html`, made by `make book-strict` before `make test`).

Every page of the table of contents is loaded in headless Chromium from a local HTTP server on
127.0.0.1 and checked as a reader would see it: a title, rendered math, loaded figures, no
JavaScript errors, internal links that resolve, and a search that finds things; figures numbered per
chapter ("Fig. 8.1") in both editions, and the Training results page's code folded. A last test makes
sure no page, download or source copy of the site contains solution code.
"""
from __future__ import annotations

import html
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from site_browser import (  # noqa: F401 (fixtures)
    ROOT,
    SITE,
    browser,
    edition_folders,
    server,
    shows_code,
    skip_unless_built,
    toc_pages,
    wait,
)

skip_unless_built()

pytestmark = pytest.mark.slow  # a browser on the built site

SOLUTION_MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION", "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")

PAGES = toc_pages()


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.targets: list[str] = []

    def handle_starttag(self, tag, attrs) -> None:
        attrs = dict(attrs)
        for key in ("href", "src"):
            if tag in ("a", "img", "link", "script") and attrs.get(key):
                self.targets.append(attrs[key])


def test_every_toc_page_was_built():
    missing = [page for page in PAGES if not (SITE / page).is_file()]
    assert not missing, f"pages of _toc.yml missing from the build: {missing}"


@pytest.mark.parametrize("page", PAGES)
def test_page_renders_with_title_math_figures_and_no_javascript_errors(page, server, browser):
    if not (SITE / page).is_file():
        pytest.skip(f"{page} was not built")
    source = (SITE / page).read_text(encoding="utf-8")
    browser.get_log("browser")  # drop what earlier pages logged
    browser.get(f"{server}/{page}")
    wait(browser, lambda d: d.execute_script("return document.readyState") == "complete")

    assert browser.title.strip(), f"{page}: empty <title>"
    assert browser.find_elements("css selector", "main h1"), f"{page}: no <h1> in the page body"

    if 'class="math' in source:
        wait(browser, lambda d: d.find_elements("css selector", "mjx-container"))
        errors = browser.find_elements("css selector", "mjx-merror")
        assert not errors, f"{page}: MathJax could not typeset {[e.text for e in errors][:3]}"

    images = browser.execute_script(
        "return Array.from(document.images).map(i => [i.getAttribute('src').slice(0, 80), i.complete, i.naturalWidth]);")
    wait(browser, lambda d: d.execute_script("return Array.from(document.images).every(i => i.complete);"))
    broken = browser.execute_script(
        "return Array.from(document.images).filter(i => i.naturalWidth === 0).map(i => i.getAttribute('src').slice(0, 80));")
    assert not broken, f"{page}: images that did not load: {broken} (of {len(images)})"

    severe = [entry["message"] for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert not severe, f"{page}: JavaScript console errors: {severe}"


@pytest.mark.parametrize("page", PAGES)
def test_page_has_launch_buttons_and_a_download_button(page):
    if not (SITE / page).is_file():
        pytest.skip(f"{page} was not built")
    source = (SITE / page).read_text(encoding="utf-8")
    # Pages without code have none, and JupyterHub only where configured: test_site_pages.py.
    launchers = (("Binder", r'href="https://mybinder\.org/v2/'), ("Colab", r'href="https://colab\.research\.google\.com/'))
    for name, pattern in launchers if shows_code(source) else ():
        assert re.search(pattern, source), f"{page}: no {name} launch button"
    assert "btn-download-source-button" in source, f"{page}: no download button"


@pytest.mark.parametrize("page", PAGES)
def test_colab_button_opens_the_pages_executed_notebook_published_beside_the_site(page):
    if not (SITE / page).is_file():
        pytest.skip(f"{page} was not built")
    source = (SITE / page).read_text(encoding="utf-8")
    if not shows_code(source):
        pytest.skip(f"{page} shows no code, so it has no launch buttons")
    link = re.search(r'href="https://colab\.research\.google\.com/github/[^/]+/[^/]+/blob/notebooks/([^"]+)"', source)
    assert link, f"{page}: the Colab button does not open a notebook on the notebooks branch"
    notebook = SITE.parent / "colab" / link.group(1)
    assert notebook.suffix == ".ipynb" and notebook.is_file(), f"{page}: Colab would open {link.group(1)}, not exported"
    assert_executed(notebook)


@pytest.mark.parametrize("page", PAGES)
def test_the_download_button_offers_the_executed_notebook(page):
    if not (SITE / page).is_file():
        pytest.skip(f"{page} was not built")
    assert_executed(SITE / "_sources" / Path(page).with_suffix(".ipynb"))


def assert_executed(notebook: Path) -> None:
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    code = [c for c in cells if c["cell_type"] == "code"]
    assert not code or any(c.get("outputs") for c in code), f"{notebook}: the notebook was not executed"


def test_pages_with_figures_show_them():
    figures = {page: sum((SITE / page).read_text(encoding="utf-8").count(tag) for tag in ("<img", '<svg role="img"'))
               for page in PAGES if (SITE / page).is_file()}  # images, and diagrams drawn inline
    for chapter in ("book/intro.html", "book/01_attention.html", "book/02_multihead.html", "book/03_masking.html"):
        if chapter in figures:
            assert figures[chapter] > 0, f"{chapter} has no figure"


def test_internal_links_resolve_to_existing_files():
    broken = []
    # The pages a reader reaches (_static/ holds theme templates with unrendered {{ … }} links).
    for path in [SITE / page for page in (*PAGES, "index.html", "search.html", "genindex.html")]:
        if not path.is_file():
            continue
        parser = _Links()
        parser.feed(path.read_text(encoding="utf-8"))
        for target in parser.targets:
            parts = urlsplit(target)
            if parts.scheme or parts.netloc or target.startswith(("#", "data:", "mailto:", "javascript:")):
                continue
            if not parts.path:
                continue
            resolved = (path.parent / unquote(parts.path)).resolve()
            if not resolved.exists():
                broken.append(f"{path.relative_to(SITE)} → {target}")
    assert not broken, f"{len(broken)} broken internal links, e.g. {broken[:10]}"


def test_search_finds_attention(server, browser):
    browser.get(f"{server}/search.html?q=attention")
    results = wait(browser, lambda d: d.find_elements("css selector", "#search-results ul.search li"), timeout=30)
    assert len(results) >= 3, f"search for 'attention' found {len(results)} pages"
    linked = " ".join(r.find_element("css selector", "a").get_attribute("href") for r in results)
    assert "01_attention" in linked, "search for 'attention' does not find the attention chapter"


def test_training_results_shows_its_measurements_with_the_code_folded(server, browser):
    page = "book/training_results.html"
    cells = re.findall(r'<div class="cell( [^"]*)? docutils container"', (SITE / page).read_text(encoding="utf-8"))
    assert cells and all("tag_hide-input" in classes for classes in cells), f"{page}: code cells not folded"
    browser.get(f"{server}/{page}")
    wait(browser, lambda d: d.execute_script("return document.readyState") == "complete")
    shown = [e for e in browser.find_elements("css selector", ".cell_input") if e.is_displayed()]
    assert not shown, f"{page}: {len(shown)} code cells show their source"
    assert [e for e in browser.find_elements("css selector", ".cell_output img") if e.is_displayed()]


# The number in a figure's caption ("Fig. 8.1", "图 8.1"), not a table's.
_CAPTION_NUMBER = re.compile(r'<figcaption>\s*<p><span class="caption-number">[^<\d]*(\d+(?:\.\d+)*)')


@pytest.mark.parametrize("folder", edition_folders())
def test_figures_are_numbered_per_chapter(folder):
    counted: dict[int | None, int] = {}  # figures so far, by chapter (None: the pages outside the chapters)
    for page in PAGES:
        if not (SITE / folder / page).is_file():
            continue
        numbers = _CAPTION_NUMBER.findall((SITE / folder / page).read_text(encoding="utf-8"))
        found = re.match(r"book/(\d+)[a-z]?_", page)
        chapter = int(found.group(1)) if found else None
        first = counted.get(chapter, 0) + 1
        expected = [f"{chapter}.{k}" if chapter else str(k) for k in range(first, first + len(numbers))]
        assert numbers == expected, f"{folder}{page}: figures numbered {numbers}"
        counted[chapter] = first + len(numbers) - 1
    assert sum(n for chapter, n in counted.items() if chapter) >= 5, "hardly any figure found in the chapters"


def _site_texts():
    for path in SITE.rglob("*"):
        if path.is_file() and path.suffix in (".html", ".ipynb", ".md", ".py", ".txt", ".js", ".json"):
            yield path, path.read_text(encoding="utf-8", errors="replace")


def _solution_bodies() -> list[str]:
    """The code between the solution markers of the instructor notebooks (solutions/*/*.md or .ipynb)."""
    texts = []
    for notebook in sorted((ROOT / "solutions").glob("*/*.ipynb")):
        texts += ["".join(cell.get("source", "")) for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]]
    texts += [path.read_text(encoding="utf-8") for path in sorted((ROOT / "solutions").glob("*/*.md"))]
    bodies = set()
    for text in texts:
        for body in re.findall(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", text, re.S):
            lines = [line.strip() for line in body.splitlines() if line.strip() and not line.strip().startswith("#")]
            if len(lines) >= 2:  # a one-line body could coincide with the chapter's own code
                bodies.add("\n".join(lines))
    return sorted(bodies)


def test_no_built_file_contains_solution_markers():
    leaks = [f"{path.relative_to(SITE)}: {marker}" for path, text in _site_texts() for marker in SOLUTION_MARKERS
             if marker in text]
    assert not leaks, f"solution or hidden-test markers in the site: {leaks[:10]}"


def test_no_built_file_contains_a_reference_solution():
    bodies = _solution_bodies()
    if not bodies:
        pytest.skip("no instructor notebooks with solutions in solutions/")
    leaks = []
    for path, text in _site_texts():
        plain = "\n".join(line.strip() for line in html.unescape(re.sub(r"<[^>]+>", "", text)).splitlines() if line.strip())
        leaks += [f"{path.relative_to(SITE)}: {body.splitlines()[0]}" for body in bodies if body in plain]
    assert not leaks, f"reference solutions found in the site: {leaks[:10]}"
