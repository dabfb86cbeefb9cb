"""Browser tests of the Chinese edition, _build/html/zh (built beside the English site by `make book-strict`).

Every page of the table of contents has a Chinese page; the translated ones (_config.yml's
translated_pages) show their Chinese text in a CJK font — no missing-glyph boxes — with their math,
their diagrams' labels in Chinese, and no JavaScript errors; the others say that they are shown in
English. Every page, in either edition, links to the same page in the other, and back. The Chinese
search finds pages. A Chinese page's launch buttons (Binder, Colab, JupyterHub where one is named) and its
download button open the page as a Chinese notebook, published in _build/colab/zh (the notebooks branch);
an English page's open the English source as before. (The widgets are tested in both editions by
test_site_widgets.py.)
"""
from __future__ import annotations

import html
import json
import os
import re
from pathlib import Path
from urllib.parse import parse_qs, quote, urlsplit

import jupytext
import pytest
import yaml
from site_browser import (  # noqa: F401 (fixtures)
    PHONE,
    ROOT,
    SITE,
    browser,
    server,
    shows_code,
    skip_unless_built,
    toc_pages,
    viewport,
    wait,
)

skip_unless_built()

pytestmark = pytest.mark.slow  # a browser on the built site
ZH = "zh/"
if not (SITE / ZH / "index.html").is_file():
    pytest.skip("the Chinese edition is not built: run `make book`", allow_module_level=True)

PAGES = toc_pages()
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))["sphinx"]["config"]
TRANSLATED = [f"{name}.html" for name in CONFIG["translated_pages"]["zh_CN"]]
CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


def _open(browser, server, page: str) -> None:
    browser.get_log("browser")  # drop what earlier pages logged
    browser.get(f"{server}/{page}")
    wait(browser, lambda d: d.execute_script("return document.readyState") == "complete")


def _switch(page_html: str) -> str:
    found = re.findall(r'<a class="btn btn-sm language-switch" href="([^"]+)"', page_html)
    assert len(found) == 1, f"{len(found)} language switches"
    return found[0]


def test_every_page_has_a_chinese_page():
    missing = [page for page in (*PAGES, "index.html", "search.html", "genindex.html")
               if not (SITE / ZH / page).is_file()]
    assert not missing, f"pages without a Chinese page: {missing}"
    assert set(TRANSLATED) <= set(PAGES), f"translated_pages names pages outside the table of contents: {TRANSLATED}"


def _widget_folders(page: str) -> list:
    return [(page.parent / base).resolve()
            for base in re.findall(r'data-base="([^"]+)"', page.read_text(encoding="utf-8"))]


def test_the_chinese_edition_draws_its_own_widget_figures_in_chinese():
    english = _widget_folders(SITE / "book" / "01_attention.html")
    chinese = _widget_folders(SITE / ZH / "book" / "01_attention.html")
    assert english and len(chinese) == len(english)
    assert all(folder.parent == (SITE / ZH / "_widgets").resolve() and folder.is_dir() for folder in chinese), chinese
    for en, zh in zip(english, chinese):
        en_manifest, zh_manifest = (json.loads((f / "manifest.json").read_text(encoding="utf-8")) for f in (en, zh))
        assert en_manifest["texts"], f"{en}: its figures draw no words"
        assert [c["labels"] for c in zh_manifest["controls"]] == [c["labels"] for c in en_manifest["controls"]]
        initial = zh_manifest["panels"][0]["states"]["-".join(str(c["initial"]) for c in zh_manifest["controls"][:1])]
        assert (zh / initial).read_bytes() != (en / initial).read_bytes(), f"{zh / initial} is the English figure"


@pytest.mark.parametrize("page", PAGES)
def test_every_page_switches_to_the_same_page_in_the_other_edition_and_back(page):
    english = (SITE / page).read_text(encoding="utf-8")
    chinese_url = urlsplit(_switch(english)).path
    assert (SITE / page).parent.joinpath(chinese_url).resolve() == (SITE / ZH / page).resolve(), chinese_url
    back = urlsplit(_switch((SITE / ZH / page).read_text(encoding="utf-8"))).path
    assert (SITE / ZH / page).parent.joinpath(back).resolve() == (SITE / page).resolve(), back


def test_the_switch_round_trips_in_the_browser(server, browser):
    _open(browser, server, "book/02_multihead.html")
    browser.find_element("css selector", "a.language-switch").click()
    wait(browser, lambda d: d.current_url == f"{server}/{ZH}book/02_multihead.html"
         and CJK.search(d.find_element("css selector", "article section > h1").text))
    browser.find_element("css selector", "a.language-switch").click()
    wait(browser, lambda d: d.current_url == f"{server}/book/02_multihead.html"
         and d.find_element("css selector", "article section > h1").text.startswith("2. Multi-head attention"))


def test_the_switch_keeps_the_section_the_reader_is_at(server, browser):
    _open(browser, server, "book/05_positional.html")
    section = browser.execute_script("return document.querySelectorAll('article section section[id]')[1].id;")
    browser.get(f"{server}/book/05_positional.html#{section}")
    browser.find_element("css selector", "a.language-switch").click()
    wait(browser, lambda d: d.current_url == f"{server}/{ZH}book/05_positional.html#{section}")
    assert browser.find_elements("id", section), f"the Chinese page has no section {section}"
    browser.find_element("css selector", "a.language-switch").click()
    wait(browser, lambda d: d.current_url == f"{server}/book/05_positional.html#{section}")


def test_the_switch_shows_on_a_phone(server, browser):
    with viewport(browser, PHONE):
        _open(browser, server, f"{ZH}book/intro.html")
        switch = browser.find_element("css selector", "a.language-switch")
        box = browser.execute_script(
            "const r = arguments[0].getBoundingClientRect(); return [r.left, r.right, r.width];", switch)
    assert switch.is_displayed() and box[2] > 0 and 0 <= box[0] and box[1] <= PHONE, f"switch at {box}"


# Glyphs of the CJK text of an element (its own text nodes), and the platform fonts Chromium drew them with.
_OWN_TEXT = "return Array.from(arguments[0].childNodes).filter(n => n.nodeType === 3).map(n => n.textContent).join('');"


def _cjk_glyphs_drawn(browser, selector: str) -> tuple[int, int]:
    """(CJK characters in the element's own text, glyphs drawn from a CJK font there)."""
    element = browser.find_element("css selector", selector)
    wanted = len(CJK.findall(browser.execute_script(_OWN_TEXT, element)))
    browser.execute_cdp_cmd("DOM.enable", {})
    browser.execute_cdp_cmd("CSS.enable", {})
    root = browser.execute_cdp_cmd("DOM.getDocument", {"depth": 0})["root"]["nodeId"]
    node = browser.execute_cdp_cmd("DOM.querySelector", {"nodeId": root, "selector": selector})["nodeId"]
    fonts = browser.execute_cdp_cmd("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]
    return wanted, sum(font["glyphCount"] for font in fonts if "CJK" in font["familyName"])


@pytest.mark.parametrize("page", TRANSLATED)
def test_translated_pages_render_chinese_in_a_cjk_font_with_math_and_no_errors(page, server, browser):
    _open(browser, server, ZH + page)
    assert browser.execute_script("return document.documentElement.lang") == "zh-CN"
    for selector in ("article section > h1", "article section > p"):
        wanted, drawn = _cjk_glyphs_drawn(browser, selector)
        assert wanted and drawn >= wanted, f"{page}, {selector}: {drawn} of {wanted} CJK characters drawn in a CJK font"
    if 'class="math' in (SITE / ZH / page).read_text(encoding="utf-8"):
        wait(browser, lambda d: d.find_elements("css selector", "mjx-container"))
        assert not browser.find_elements("css selector", "mjx-merror"), f"{page}: MathJax could not typeset"
    wait(browser, lambda d: d.execute_script("return Array.from(document.images).every(i => i.complete);"))
    assert browser.execute_script("return Array.from(document.images).every(i => i.naturalWidth > 0);"), \
        f"{page}: images that did not load"
    severe = [entry["message"] for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert not severe, f"{page}: JavaScript console errors: {severe}"
    assert not browser.find_elements("css selector", ".untranslated"), f"{page} says it is not translated"


@pytest.mark.parametrize("page", [page for page in PAGES if page not in TRANSLATED])
def test_pages_not_yet_translated_say_so(page):
    assert re.search(r'class="[^"]*\buntranslated\b', (SITE / ZH / page).read_text(encoding="utf-8"))


_SECTION_LINK = re.compile(r'<a class="reference internal" href="([\w./]+)\.html#([\w-]+)"><span class="std std-ref">(.*?)</span>')


def _heading(page_html: str, anchor: str) -> str:
    """The text of the heading of the section ``anchor`` of a page, without its permalink."""
    found = re.search(rf'<section id="{re.escape(anchor)}">\s*<h\d>(.*?)<a class="headerlink"', page_html, re.DOTALL)
    assert found, f"no section {anchor}"
    return re.sub(r"<[^>]+>", "", found.group(1)).strip()


def test_a_link_to_a_section_shows_its_title_in_the_editions_language():
    page = SITE / ZH / "book" / "notes_map.html"
    links = _SECTION_LINK.findall(page.read_text(encoding="utf-8"))
    assert len(links) > 20  # the notes map links most sections of the book
    for target, anchor, text in links:
        title = _heading((page.parent / f"{target}.html").read_text(encoding="utf-8"), anchor)
        if CJK.search(title):  # a heading of code alone, say, reads the same in both editions
            assert text == title, f"the link to {target}#{anchor} reads {text!r}, its section {title!r}"


def test_the_site_s_own_words_speak_chinese():
    page = (SITE / ZH / "book" / "01_attention.html").read_text(encoding="utf-8")
    shown, hidden = (re.search(rf"let {name} = '([^']*)'", page).group(1) for name in ("toggleHintShow", "toggleHintHide"))
    assert CJK.search(shown) and CJK.search(hidden), (shown, hidden)  # the erratum boxes' toggles
    author = re.search(r'<p class="component-author">(.*?)</p>', page, re.DOTALL).group(1)
    assert CJK.search(re.sub(r"<[^>]+>", "", author).replace("作者", "")), author


_DIAGRAMS = """
return Array.from(document.querySelectorAll('figure.diagram')).map(figure => {
  const svg = figure.querySelector('svg');
  return {labels: Array.from(svg.querySelectorAll('text')).map(t => t.textContent), alt: svg.getAttribute('aria-label'),
          width: svg.getBoundingClientRect().width, room: figure.getBoundingClientRect().width};
});
"""


@pytest.mark.parametrize("page", [p for p in TRANSLATED if 'class="diagram' in (SITE / p).read_text(encoding="utf-8")])
def test_diagrams_of_translated_pages_speak_chinese_and_fit_a_phone(page, server, browser):
    with viewport(browser, PHONE):
        _open(browser, server, ZH + page)
        diagrams = browser.execute_script(_DIAGRAMS)
    assert diagrams, f"{page}: no diagram"
    for diagram in diagrams:
        assert CJK.search(diagram["alt"]), f"{page}: alt text not translated: {diagram['alt'][:60]}"
        assert any(CJK.search(label) for label in diagram["labels"]), f"{page}: labels not translated"
        assert diagram["width"] <= diagram["room"] + 0.5, f"{page}: {diagram['width']} px in {diagram['room']} px"


@pytest.mark.parametrize("query, page", [("注意力", "book/01_attention.html"), ("掩码", "book/03_masking.html")])
def test_chinese_search_finds_pages(query, page, server, browser):
    browser.get(f"{server}/{ZH}search.html?q={quote(query)}")
    results = wait(browser, lambda d: d.find_elements("css selector", "#search-results ul.search li"), timeout=30)
    linked = " ".join(r.find_element("css selector", "a").get_attribute("href") for r in results)
    assert len(results) >= 2 and page in linked, f"search for {query} found {len(results)} pages: {linked}"


# ------------------------------------------------------------------ launch buttons

# What publishing serves besides the site: _build/colab, pushed to the branch the Colab buttons open
# (.github/workflows/book.yml, _ext/book_site.py's colab_branch).
PUBLISHED, NOTEBOOKS_BRANCH = SITE.parent / "colab", "notebooks"
BOOK = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
REPOSITORY = BOOK["repository"]
GITHUB = urlsplit(REPOSITORY["url"]).path.strip("/")  # owner/name
HUB = (os.environ.get("BOOK_JUPYTERHUB_URL", "").strip() or BOOK["launch_buttons"]["jupyterhub_url"]).rstrip("/")
_NOT_PROSE = re.compile(r"`[^`]*`|\$\$[\s\S]*?\$\$|\$[^$\n]*\$|\]\([^)]*\)|^\s*(```|:::).*$|^\s*:[\w-]+:.*$", re.M)
_LATIN_WORD = re.compile(r"[A-Za-z]+")


def _launchers(page_html: str) -> dict[str, str]:
    """The page's launch buttons: name → URL."""
    found = {}
    for url in map(html.unescape, re.findall(r'href="(https://[^"]+)"', page_html)):
        if url.startswith("https://mybinder.org/v2/"):
            found["Binder"] = url
        elif url.startswith("https://colab.research.google.com/"):
            found["Colab"] = url
        elif "/hub/user-redirect/" in url:
            found["JupyterHub"] = url
    return found


def _query(url: str) -> dict[str, str]:
    return {key: values[0] for key, values in parse_qs(urlsplit(url).query).items()}


def _published_path(name: str, url: str) -> str | None:
    """The path in the published notebooks (the notebooks branch) that a launch button opens, or None when it
    opens something else."""
    if name == "Colab":
        found = re.fullmatch(rf"https://colab\.research\.google\.com/github/{GITHUB}/blob/{NOTEBOOKS_BRANCH}/(.+)", url)
        return found and found[1]
    if name == "Binder":  # the environment of the sources' branch, and nbgitpuller's git-pull into it
        if url.split("?")[0] != f"https://mybinder.org/v2/gh/{GITHUB}/{REPOSITORY['branch']}":
            return None
        url = _query(url).get("urlpath", "")
        if not url.startswith("git-pull?"):
            return None
    elif not url.startswith(f"{HUB}/hub/user-redirect/git-pull?"):
        return None
    pull = _query(url)
    if pull.get("repo") != REPOSITORY["url"] or pull.get("branch") != NOTEBOOKS_BRANCH or not pull.get("targetpath"):
        return None
    opened = pull.get("urlpath", "")
    prefix = f"lab/tree/{pull['targetpath']}/"
    return opened[len(prefix):] if opened.startswith(prefix) else None


def _notebook(path: Path) -> dict:
    assert path.is_file(), f"{path} is not published"
    return json.loads(path.read_text(encoding="utf-8"))


def _markdown(notebook: dict) -> str:
    return "\n\n".join("".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "markdown")


def _code(notebook: dict) -> list[str]:
    return ["".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code"]


def _chinese_per_english_word(markdown: str) -> float:
    """CJK characters per Latin word in the prose (code, math, link targets and directives' markup aside): a
    Chinese word is one or two characters, so above 2 the prose holds more Chinese words than English ones."""
    prose = _NOT_PROSE.sub(" ", markdown)
    return len(CJK.findall(prose)) / max(len(_LATIN_WORD.findall(prose)), 1)


def _title(markdown: str) -> str:
    """A page's title as it reads: its first `# ` heading, markdown's escapes and emphasis aside."""
    found = re.search(r"^# (.+)$", markdown, re.M)
    assert found, "no title"
    return re.sub(r"\\(?=[^\w\s])|[*`]", "", found[1]).strip()


def _page_title(page_html: str) -> str:
    found = re.search(r"<h1>([^<]*(?:<(?!/?h1|a class=\"headerlink\")[^<]*)*)<a class=\"headerlink\"", page_html)
    return html.unescape(re.sub(r"<[^>]+>", "", found[1])).strip()


def _assert_chinese_page(notebook: dict, page: str, where: str) -> None:
    chinese_html = (SITE / ZH / page).read_text(encoding="utf-8")
    markdown = _markdown(notebook)
    assert _title(markdown) == _page_title(chinese_html), f"{where}: its title is not the Chinese page's"
    if page in TRANSLATED:
        ratio = _chinese_per_english_word(markdown)
        assert ratio > 2, f"{where}: its prose is not Chinese ({ratio:.1f} CJK characters per English word)"


@pytest.mark.parametrize("page", PAGES)
def test_a_chinese_pages_launch_buttons_open_its_chinese_notebook_where_it_is_published(page):
    chinese = (SITE / ZH / page).read_text(encoding="utf-8")
    launchers = _launchers(chinese)
    if not shows_code(chinese):
        assert not launchers, f"{page}: launch buttons on a page that runs nothing"
        return
    assert {"Binder", "Colab"} <= set(launchers) and ("JupyterHub" in launchers) == bool(HUB), launchers
    notebook = Path(page).with_suffix(".ipynb").as_posix()
    english = _notebook(PUBLISHED / notebook)
    for name, url in launchers.items():
        path = _published_path(name, url)
        assert path == ZH + notebook, f"zh/{page}: {name} opens {url}, not the published {ZH + notebook}"
        published = _notebook(PUBLISHED / path)
        _assert_chinese_page(published, page, f"{name} of zh/{page} opens {path}")
        assert _code(published) == _code(english), f"{path}: its code is not the English page's"
        code = [c for c in published["cells"] if c["cell_type"] == "code"]
        assert not code or any(c.get("outputs") for c in code), f"{path} was not executed"


@pytest.mark.parametrize("page", [page for page in PAGES if shows_code((SITE / ZH / page).read_text(encoding="utf-8"))])
def test_a_chinese_pages_download_button_offers_the_chinese_page(page):
    here = (SITE / ZH / page).parent
    offered = {(here / href).resolve() for href in re.findall(r'href="([^"]*_sources/[^"]+)"',
                                                                (SITE / ZH / page).read_text(encoding="utf-8"))}
    sources = SITE / ZH / "_sources" / Path(page).with_suffix("")
    assert {sources.with_suffix(".ipynb").resolve(), sources.with_suffix(".md").resolve()} <= offered, offered
    _assert_chinese_page(_notebook(sources.with_suffix(".ipynb")), page, f"zh/_sources/{page} (.ipynb)")
    # The MyST source, still a notebook: its prose in Chinese, its code the English page's.
    markdown = jupytext.reads(sources.with_suffix(".md").read_text(encoding="utf-8"), fmt="md:myst")
    _assert_chinese_page(markdown, page, f"zh/_sources/{page} (.md)")
    assert _code(markdown) == _code(jupytext.read(ROOT / Path(page).with_suffix(".md"), fmt="md:myst"))


@pytest.mark.parametrize("page", PAGES)
def test_an_english_pages_launch_buttons_open_the_english_source_as_before(page):
    english = (SITE / page).read_text(encoding="utf-8")
    if not shows_code(english):
        pytest.skip(f"{page} shows no code, so it has no launch buttons")
    launchers, source = _launchers(english), Path(page).with_suffix(".md").as_posix()
    notebook, branch, name = Path(page).with_suffix(".ipynb").as_posix(), REPOSITORY["branch"], GITHUB.split("/")[1]
    expected = {"Binder": f"https://mybinder.org/v2/gh/{GITHUB}/{branch}?urlpath=lab/tree/{source}",
                "Colab": f"https://colab.research.google.com/github/{GITHUB}/blob/{NOTEBOOKS_BRANCH}/{notebook}"}
    if HUB:
        expected["JupyterHub"] = (f"{HUB}/hub/user-redirect/git-pull?repo={quote(REPOSITORY['url'], safe='/')}"
                                  f"&urlpath=lab/tree/{name}/{source}&branch={branch}")
    assert launchers == expected
    published = _markdown(_notebook(PUBLISHED / notebook))
    assert _title(published) == _title((ROOT / source).read_text(encoding="utf-8")), f"{notebook}: not the English page"
    assert _chinese_per_english_word(published) < 0.5, f"{notebook}: its prose is not English"
