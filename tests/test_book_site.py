"""_ext/book_site.py's settings: the JupyterHub button, the header's search field, book/matplotlibrc, the
launch buttons' targets in each edition. Their effect on the built pages: test_site_pages.py, test_site_zh.py."""
from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import parse_qs, urlsplit

import matplotlib

ROOT = Path(__file__).resolve().parents[1]


def _load_extension():
    spec = importlib.util.spec_from_file_location("book_site", ROOT / "_ext" / "book_site.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


book_site = _load_extension()


def _config(jupyterhub_url: str = "") -> SimpleNamespace:
    """The part of Sphinx's config that _config.yml's launch_buttons become."""
    return SimpleNamespace(html_theme_options={"launch_buttons": {"binderhub_url": "https://mybinder.org",
                                                                  "jupyterhub_url": jupyterhub_url}})


def test_jupyterhub_button_is_off_until_a_hub_is_named(monkeypatch):
    monkeypatch.delenv(book_site.HUB_VARIABLE, raising=False)
    config = _config()
    book_site._configure_theme(None, config)
    assert config.html_theme_options["launch_buttons"]["jupyterhub_url"] == ""


def test_the_build_environment_names_the_hub(monkeypatch):
    monkeypatch.setenv(book_site.HUB_VARIABLE, "https://hub.example.org")
    config = _config()
    book_site._configure_theme(None, config)
    assert config.html_theme_options["launch_buttons"]["jupyterhub_url"] == "https://hub.example.org"


def test_a_hub_in_the_config_stays_when_the_environment_names_none(monkeypatch):
    monkeypatch.delenv(book_site.HUB_VARIABLE, raising=False)
    config = _config("https://hub.example.org")
    book_site._configure_theme(None, config)
    assert config.html_theme_options["launch_buttons"]["jupyterhub_url"] == "https://hub.example.org"


def test_the_header_gets_no_second_search_field():
    config = _config()
    book_site._configure_theme(None, config)
    assert config.html_theme_options["navbar_persistent"] == []


def test_the_build_draws_with_the_books_matplotlib_settings():
    book_rc = matplotlib.rc_params_from_file(ROOT / "book" / "matplotlibrc", use_default_template=False)
    with matplotlib.rc_context():  # restores this process's settings afterwards
        matplotlib.rcdefaults()
        assert matplotlib.rcParams["font.family"] != book_rc["font.family"]
        book_site._matplotlib_settings(SimpleNamespace(confdir=str(ROOT)), None)
        assert matplotlib.rcParams["font.family"] == book_rc["font.family"]


# The launch buttons as sphinx-book-theme makes them for book/01_attention.md (_config.yml's launch_buttons).
GITHUB = "transformer-piece-by-piece/course"
REPOSITORY = f"https://github.com/{GITHUB}"
THEMES_BUTTONS = {
    "Binder": f"https://mybinder.org/v2/gh/{GITHUB}/main?urlpath=lab/tree/book/01_attention.md",
    "JupyterHub": f"https://hub.example.org/hub/user-redirect/git-pull?repo=https%3A//github.com/{GITHUB}"
                  "&urlpath=lab/tree/course/book/01_attention.md&branch=main",
    "Colab": f"https://colab.research.google.com/github/{GITHUB}/blob/main/book/01_attention.md",
}


def _launch_buttons(language: str) -> dict[str, str]:
    """The page's launch buttons, after book_site's handler, in the edition of ``language``."""
    config = SimpleNamespace(
        language=language, book_editions=[["en", "", "English"], ["zh_CN", "zh", "中文"]], colab_branch="notebooks",
        html_theme_options={"repository_url": REPOSITORY, "launch_buttons": {"notebook_interface": "jupyterlab"}})
    context = {"header_buttons": [{"label": "launch-buttons", "buttons": [
        {"text": text, "url": url} for text, url in THEMES_BUTTONS.items()]}]}
    book_site._launch_links_to_published_notebooks(SimpleNamespace(config=config), "book/01_attention", "page.html",
                                                   context, None)
    return {button["text"]: button["url"] for button in context["header_buttons"][0]["buttons"]}


def test_the_sources_edition_launches_the_sources_and_colab_the_published_notebook():
    buttons = _launch_buttons("en")
    assert buttons["Binder"] == THEMES_BUTTONS["Binder"] and buttons["JupyterHub"] == THEMES_BUTTONS["JupyterHub"]
    assert buttons["Colab"] == f"https://colab.research.google.com/github/{GITHUB}/blob/notebooks/book/01_attention.ipynb"


def _pulled(url: str) -> dict[str, str]:
    return {key: value for key, [value] in parse_qs(urlsplit(url).query).items()}


def test_an_edition_launches_its_published_notebook_everywhere():
    buttons = _launch_buttons("zh_CN")
    assert buttons["Colab"] == (f"https://colab.research.google.com/github/{GITHUB}/blob/notebooks/"
                                "zh/book/01_attention.ipynb")
    expected = {"repo": REPOSITORY, "branch": "notebooks", "targetpath": "course-notebooks",
                "urlpath": "lab/tree/course-notebooks/zh/book/01_attention.ipynb"}
    # Binder builds the environment of the sources' branch, then nbgitpuller pulls the notebooks into it.
    binder = urlsplit(buttons["Binder"])
    assert f"{binder.scheme}://{binder.netloc}{binder.path}" == f"https://mybinder.org/v2/gh/{GITHUB}/main"
    git_pull = _pulled(buttons["Binder"])["urlpath"]
    assert git_pull.startswith("git-pull?") and _pulled(git_pull) == expected
    hub = urlsplit(buttons["JupyterHub"])
    assert f"{hub.scheme}://{hub.netloc}{hub.path}" == "https://hub.example.org/hub/user-redirect/git-pull"
    assert _pulled(buttons["JupyterHub"]) == expected


def _extension(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "_ext" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_figures_are_numbered_per_chapter_in_the_books_order():
    figure_numbers = _extension("figure_numbers")
    sphinx_numbers = {"book/intro": {"figure": {"a": (1,)}},
                      "book/01_attention": {"figure": {"b": (3,), "c": (2,)}, "table": {"t": (1,)}},
                      "book/08_encoder_decoder": {"figure": {"d": (4,)}},
                      "book/08b_decoding": {"figure": {"e": (5,)}},
                      "book/glossary": {"figure": {"f": (6,)}}}
    assert figure_numbers.number_per_chapter(sphinx_numbers) == {
        "book/intro": {"figure": {"a": (1,)}},
        "book/01_attention": {"figure": {"c": (1, 1), "b": (1, 2)}, "table": {"t": (1, 1)}},
        "book/08_encoder_decoder": {"figure": {"d": (8, 1)}},
        "book/08b_decoding": {"figure": {"e": (8, 2)}},  # a chapter in two pages: one count
        "book/glossary": {"figure": {"f": (2,)}}}


def test_an_edition_links_to_the_roots_identical_static_files(tmp_path):
    languages = _extension("languages")
    root_static, edition = tmp_path / "_static", tmp_path / "zh"
    for static in (root_static, edition / "_static"):
        (static / "scripts").mkdir(parents=True)
        (static / "scripts" / "theme.js").write_text("same")
    (root_static / "documentation_options.js").write_text("LANGUAGE: 'en'")
    (edition / "_static" / "documentation_options.js").write_text("LANGUAGE: 'zh_CN'")
    (edition / "book").mkdir()
    (edition / "book" / "page.html").write_text(
        '<script src="../_static/scripts/theme.js?v=1"></script><script src="../_static/documentation_options.js">'
        '</script><p>_static/scripts/theme.js is named in the text</p>')
    (edition / "index.html").write_text('<link href="_static/scripts/theme.js"/>')
    for static in (root_static, edition / "_static"):  # a style sheet of its own that loads a shared font
        (static / "fonts").mkdir()
        (static / "fonts" / "icons.woff").write_bytes(b"font")
    (root_static / "scripts" / "theme.css").write_text("root's")
    (edition / "_static" / "scripts" / "theme.css").write_text(
        '@font-face{src:url(../fonts/icons.woff?v=2) format("woff"),url("data:font/woff;base64,AA")}')
    assert languages.share_static(edition, root_static, depth=1) == ["fonts/icons.woff", "scripts/theme.js"]
    assert (edition / "_static" / "scripts" / "theme.css").read_text() == (
        '@font-face{src:url(../../../_static/fonts/icons.woff?v=2) format("woff"),url("data:font/woff;base64,AA")}')
    assert (edition / "book" / "page.html").read_text() == (
        '<script src="../../_static/scripts/theme.js?v=1"></script><script src="../_static/documentation_options.js">'
        '</script><p>_static/scripts/theme.js is named in the text</p>')
    assert (edition / "index.html").read_text() == '<link href="../_static/scripts/theme.js"/>'
    assert sorted(p.relative_to(edition / "_static").as_posix() for p in (edition / "_static").rglob("*")) == [
        "documentation_options.js", "scripts", "scripts/theme.css"]


def test_the_icons_a_site_shows_are_those_its_pages_and_style_sheets_name():
    page_weight = _extension("page_weight")
    stylesheet = ('.fa-github:before{content:"\\f09b"}.fa-bars:before,.fa-navicon:before{content:"\\f0c9"}'
                  '.fa-sun:before{content:"\\f185"}html{--pst-icon-note:"\\f05a";--pst-icon-tip:"\uf0eb"}')
    pages = ['<i class="fa-brands fa-github"></i>', 'button.innerHTML = "<i class=\\"fa-solid fa-navicon\\">"']
    assert page_weight.icon_codepoints(stylesheet, pages) == {0xF09B, 0xF0C9, 0xF05A, 0xF0EB}


def test_a_purged_style_sheet_keeps_the_rules_that_can_apply():
    page_weight = _extension("page_weight")
    css = (".used{a:1}.unused{b:2}.used .unused{c:3}p:not(.unused){d:4}.bs-tooltip-top{e:5}"
           "@media (min-width:10px){.unused{f:6}.used>p{g:7}}@media print{.unused{h:8}}"
           "@font-face{font-family:X}html[data-theme=dark]{i:9}.used,.unused{j:10}")
    purged = page_weight.purge_stylesheet(css, ['<p class="used">', 'el.classList.add("also")'])
    assert purged == (".used{a:1}p:not(.unused){d:4}.bs-tooltip-top{e:5}@media (min-width:10px){.used>p{g:7}}"
                      "@font-face{font-family:X}html[data-theme=dark]{i:9}.used,.unused{j:10}")
