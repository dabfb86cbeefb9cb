"""The weight of the built site (_ext/page_weight.py, _ext/languages.py): on disk, and on a reader's first visit.

Both editions together fit in 40 MB: the Chinese one links to the English one's ``_static`` files, keeping
only those that speak its language. A chapter's first visit — every request it makes, with an empty cache,
until its math is typeset — transfers at most 1.5 MB, counted from Chromium's DevTools network events; it
loads no search index (the search page does) and no Font Awesome script (the icons come from small web
fonts, which have a glyph for every icon the pages show).
"""
from __future__ import annotations

import importlib.util
import json
import re
import time
from urllib.parse import unquote, urlsplit

import pytest
from fontTools.ttLib import TTFont
from site_browser import ROOT, SITE, chromium, edition_folders, server, skip_unless_built, toc_pages, wait  # noqa: F401

skip_unless_built()

pytestmark = pytest.mark.slow  # a browser on the built site

SITE_BUDGET = 40 * 2**20  # bytes: both editions
FIRST_VISIT_BUDGET = 1.5 * 2**20  # bytes transferred
CHAPTERS = [folder + page for folder in edition_folders() for page in toc_pages()
            if re.match(r"book/\d\d[a-z]?_", page)]  # a chapter's pages: 08_encoder_decoder, 08b_decoding
FOLDERS = [folder for folder in edition_folders() if folder]


def _page_weight():
    spec = importlib.util.spec_from_file_location("page_weight", ROOT / "_ext" / "page_weight.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _megabytes(size: float) -> str:
    return f"{size / 2**20:.2f} MB"


def test_both_editions_fit_the_site_budget():
    files = [path for path in SITE.rglob("*") if path.is_file()]
    size = sum(path.stat().st_size for path in files)
    largest = sorted(((path.stat().st_size, path.relative_to(SITE).as_posix()) for path in files), reverse=True)[:5]
    assert size <= SITE_BUDGET, f"the site is {_megabytes(size)}; its largest files: {largest}"


@pytest.mark.parametrize("folder", FOLDERS)
def test_an_edition_in_a_folder_links_to_the_roots_static_files(folder):
    own = sorted(path.relative_to(SITE / folder / "_static").as_posix()
                 for path in (SITE / folder / "_static").rglob("*") if path.is_file())
    # documentation_options.js and translations.js speak the edition's language
    assert len(own) <= 5, f"{folder}_static keeps {len(own)} files of its own: {own[:10]}"
    missing = set()
    for page in (SITE / folder).rglob("*.html"):
        if "_static" in page.relative_to(SITE / folder).parts:
            continue
        for target in re.findall(r"""(?:src|href)="([^"]*_static/[^"]*)\"""", page.read_text(encoding="utf-8")):
            if not (page.parent / unquote(urlsplit(target).path)).resolve().is_file():
                missing.add(f"{page.relative_to(SITE)} → {target}")
    for sheet in (SITE / folder / "_static").rglob("*.css"):  # its own style sheets load what they name
        for url in re.findall(r"""url\(['"]?([^'")]+)['"]?\)""", sheet.read_text(encoding="utf-8")):
            if ":" not in url and not (sheet.parent / unquote(urlsplit(url).path)).resolve().is_file():
                missing.add(f"{sheet.relative_to(SITE)} → {url}")
    assert not missing, f"links to _static files that are not there: {sorted(missing)[:5]}"


def test_the_icon_font_has_every_icon_the_pages_show():
    page_weight = _page_weight()
    static = SITE / "_static"
    stylesheet = (static / "styles" / "pydata-sphinx-theme.css").read_text(encoding="utf-8")
    pages = [path.read_text(encoding="utf-8") for path in SITE.rglob("*.html") if "_static" not in path.parts]
    # the classes the pages use, and the icons the style sheets name (the purged ones keep what the pages use)
    shown = page_weight.icon_codepoints(
        "\n".join(path.read_text(encoding="utf-8") for path in static.rglob("*.css") if "mathjax" not in path.parts),
        pages)
    assert len(shown) >= 5, "the pages show hardly any icons: the search for them is broken"
    fonts = [(static / "styles" / url).resolve() for url in re.findall(r"url\(([^)\"']+\.(?:woff2?|ttf))\)", stylesheet)]
    assert fonts and all(font.parent == (static / page_weight.ICON_FONTS).resolve() for font in fonts), fonts
    glyphs = set()
    for font in fonts:  # the fonts the style sheet loads: a few KB each
        assert font.stat().st_size < 20_000, f"{font.name}: {font.stat().st_size} bytes, not cut down"
        glyphs |= set(TTFont(font).getBestCmap())
    assert shown <= glyphs, f"icons without a glyph: {sorted(hex(c) for c in shown - glyphs)}"


def _first_visit(driver, url: str) -> dict[str, int]:
    """{URL: bytes transferred} of every request that opening ``url`` with an empty cache makes, until the
    page has loaded, its math is typeset and the network has been quiet for a second."""
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd("Network.setCacheDisabled", {"cacheDisabled": True})
    driver.execute_cdp_cmd("Network.clearBrowserCache", {})
    driver.get_log("performance")  # drop earlier events
    driver.get(url)
    wait(driver, lambda d: d.execute_script("return document.readyState") == "complete")
    driver.set_script_timeout(60)
    driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "(window.MathJax && MathJax.startup && MathJax.startup.promise ? MathJax.startup.promise : Promise.resolve())"
        ".then(() => done(true), () => done(false));")
    urls, sizes, events = {}, {}, []
    quiet_since = time.monotonic()
    while time.monotonic() - quiet_since < 1.0:
        new = driver.get_log("performance")
        if new:
            events += new
            quiet_since = time.monotonic()
        time.sleep(0.2)
    for entry in events:
        message = json.loads(entry["message"])["message"]
        params = message.get("params", {})
        if message["method"] == "Network.requestWillBeSent":
            urls[params["requestId"]] = params["request"]["url"]
        elif message["method"] == "Network.loadingFinished":
            sizes[params["requestId"]] = int(params["encodedDataLength"])
    return {urls.get(request, request): size for request, size in sizes.items()}


@pytest.fixture(scope="module")
def network_browser():
    with chromium(network_log=True) as driver:
        yield driver


@pytest.mark.parametrize("page", CHAPTERS)
def test_a_chapters_first_visit_fits_the_budget(page, server, network_browser):
    if not (SITE / page).is_file():
        pytest.skip(f"{page} was not built")
    loaded = _first_visit(network_browser, f"{server}/{page}")
    paths = [urlsplit(url).path for url in loaded]
    assert any(path.endswith(page) for path in paths), f"{page}: the page itself is not among {paths[:5]}"
    assert not [path for path in paths if path.endswith("searchindex.js")], f"{page} loads the search index"
    assert not [path for path in paths if path.endswith("fontawesome.js")], f"{page} loads Font Awesome's script"
    if 'class="math' in (SITE / page).read_text(encoding="utf-8"):
        assert network_browser.find_elements("css selector", "mjx-container"), f"{page}: no math typeset"
        assert not network_browser.find_elements("css selector", "mjx-merror"), f"{page}: MathJax errors"
    total = sum(loaded.values())
    largest = sorted(((size, urlsplit(url).path) for url, size in loaded.items()), reverse=True)[:6]
    assert total <= FIRST_VISIT_BUDGET, (f"{page}: a first visit transfers {_megabytes(total)} in {len(loaded)} "
                                         f"requests; the largest: {largest}")
