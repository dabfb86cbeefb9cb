"""_ext/errata.py: every erratum and clarification box gets an anchor, and the errata page's tables
list the boxes of every page, in the order of the table of contents, each row linking to its box.

Each test builds a small Sphinx project with the extension and reads the HTML it writes.
"""
from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from sphinx.application import Sphinx

ROOT = Path(__file__).resolve().parents[1]

CONF = f"""
import sys
sys.path.insert(0, {str(ROOT / "_ext")!r})
extensions = ["myst_parser", "errata"]
root_doc = "index"
"""

BOX = """```{{admonition}} {title}
:class: {classes}
{name}**Note:** {{note}}`{note}` say 1.

**Correct:** 2.
```
"""

PAGES = {
    # The table of contents puts page b before page a: the tables must follow it, not the file names.
    "index.md": "# Book\n\n```{toctree}\nb_page\na_page\nnotes_map\nerrata\n```\n",
    "a_page.md": "# Page A\n\n" + BOX.format(title="Erratum — a is 2", classes="erratum dropdown", name="", note="overview")
                 + "\ntext\n\n" + BOX.format(title="Clarification — c reads two ways", classes="clarification dropdown",
                                             name="", note="components"),
    "b_page.md": "# Page B\n\n" + BOX.format(title="Erratum — b is 3", classes="erratum dropdown", name=":name: my-anchor\n",
                                             note="data-flow"),
    "notes_map.md": "# Map\n\n(notes-overview)=\n## O\n\n(notes-components)=\n## C\n\n(notes-data-flow)=\n## D\n",
    "errata.md": "# Errata\n\n```{errata-table}\n```\n\n```{errata-table}\n:kind: clarification\n```\n",
}


def build(project: Path, pages: dict[str, str], fresh: bool = True) -> tuple[Path, str]:
    """Write the pages (and conf.py), build the HTML; return the output folder and the warnings."""
    project.mkdir(exist_ok=True)
    (project / "conf.py").write_text(CONF, encoding="utf-8")
    for name, text in pages.items():
        (project / name).write_text(text, encoding="utf-8")
    warnings = io.StringIO()
    app = Sphinx(project, project, project / "_build", project / "_build" / ".doctrees", "html",
                 status=None, warning=warnings, freshenv=fresh)
    app.build()
    return project / "_build", warnings.getvalue()


def table_links(html: str) -> list[list[str]]:
    """The hrefs of the box links of each errata table, table by table."""
    tables = re.findall(r'<table class="[^"]*errata-table[^"]*".*?</table>', html, re.S)
    return [re.findall(r'<tr[^>]*>\s*<td[^>]*><p>\d+</p></td>\s*<td[^>]*><p><a[^>]*href="([^"]+)"', table) for table in tables]


def test_tables_list_every_box_in_table_of_contents_order_with_links_to_their_anchors(tmp_path):
    out, warnings = build(tmp_path / "book", PAGES)
    errata_page = (out / "errata.html").read_text(encoding="utf-8")

    assert table_links(errata_page) == [["b_page.html#my-anchor", "a_page.html#erratum-a-is-2"],
                                        ["a_page.html#clarification-c-reads-two-ways"]]
    assert "2 errata on 2 pages." in errata_page and "1 clarification on 1 page." in errata_page
    assert 'href="notes_map.html#notes-data-flow"' in errata_page  # the note a box cites
    page_a = (out / "a_page.html").read_text(encoding="utf-8")
    assert re.search(r'<div class="[^"]*erratum[^"]*dropdown[^"]*" id="erratum-a-is-2"', page_a)
    assert 'id="my-anchor"' in (out / "b_page.html").read_text(encoding="utf-8")
    assert "openTarget" in page_a  # the script that opens a box the address points at
    assert "WARNING" not in warnings, warnings


def test_the_tables_follow_a_change_to_another_page(tmp_path):
    project = tmp_path / "book"
    build(project, PAGES)
    more = PAGES["a_page.md"] + "\n" + BOX.format(title="Erratum — d is 4", classes="erratum dropdown", name="", note="overview")
    out, _ = build(project, {"a_page.md": more}, fresh=False)
    links = table_links((out / "errata.html").read_text(encoding="utf-8"))
    assert links[0] == ["b_page.html#my-anchor", "a_page.html#erratum-a-is-2", "a_page.html#erratum-d-is-4"]


@pytest.mark.parametrize(("box", "warning"), [
    ("```{admonition} Erratum — no note\n:class: erratum dropdown\n**Note:** the notes say 1.\n```\n", "cites no note"),
    ("```{admonition} Erratum — open\n:class: erratum\n**Note:** {note}`overview` say 1.\n```\n", "dropdown"),
    ("```{admonition} Wrong title\n:class: erratum dropdown\n**Note:** {note}`overview` say 1.\n```\n", "title must read"),
    ("```{admonition} Erratum — no such note\n:class: erratum dropdown\n**Note:** {note}`nowhere` say 1.\n```\n",
     "unknown note"),
])
def test_a_malformed_box_is_reported(tmp_path, box, warning):
    _, warnings = build(tmp_path / "book", {**PAGES, "a_page.md": "# Page A\n\n" + box})
    assert warning in warnings


def test_a_chinese_box_title_takes_the_editions_separator(tmp_path):
    """In the Chinese edition a title reads 勘误：… (the separator is a message of the site catalogue)."""
    project = tmp_path / "book"
    catalogue = project / "locales" / "zh_CN" / "LC_MESSAGES" / "site.po"
    catalogue.parent.mkdir(parents=True)
    catalogue.write_text('msgid ""\nmsgstr "Content-Type: text/plain; charset=UTF-8\\n"\n\n'
                         'msgid "Erratum"\nmsgstr "勘误"\n\nmsgid " — "\nmsgstr "："\n', encoding="utf-8")
    conf = CONF + ('language = "zh_CN"\nlocale_dirs = ["locales"]\n'
                   'book_editions = [["en", "", "English"], ["zh_CN", "zh", "中文"]]\n'
                   f'translated_pages = {{"zh_CN": {sorted(name[:-3] for name in PAGES)!r}}}\n'
                   f'book_site = {str(tmp_path / "site")!r}\nhtml_theme = "sphinx_book_theme"\n')
    chinese = {**PAGES, "a_page.md": "# Page A\n\n" + BOX.format(title="勘误：a 是 2", classes="erratum dropdown",
                                                                 name=":name: a-box\n", note="overview"),
               "b_page.md": "# Page B\n\n" + BOX.format(title="勘误 — b 是 3", classes="erratum dropdown",
                                                        name=":name: b-box\n", note="data-flow")}
    project.mkdir(exist_ok=True)
    (project / "conf.py").write_text(conf, encoding="utf-8")
    for name, text in chinese.items():
        (project / name).write_text(text, encoding="utf-8")
    warnings = io.StringIO()
    Sphinx(project, project, project / "_build", project / "_build" / ".doctrees", "html",
           status=None, warning=warnings, freshenv=True).build()
    assert "勘误 — b 是 3" in warnings.getvalue() and "勘误：a 是 2" not in warnings.getvalue()
    assert ">a 是 2</a>" in (project / "_build" / "errata.html").read_text(encoding="utf-8")
