"""_ext/translation.py (with _ext/diagrams.py, which uses it): what the catalogues hold and how the
editions apply them, on small projects — the messages extracted by the gettext builder, then the
Chinese build from a catalogue filled from them. The real book: test_site_zh.py."""
from __future__ import annotations

import io
import json
import re
from pathlib import Path

from babel.messages.pofile import read_po, write_po
from sphinx import locale
from sphinx.application import Sphinx
from sphinx.util.docutils import docutils_namespace
from sphinx_intl.basic import update

CONF = """
extensions = ["myst_nb", "translation", "diagrams"]
source_suffix = {".rst": "restructuredtext"}  # myst-nb adds to it: not to Sphinx's default, shared by the process
root_doc = "index"
exclude_patterns = ["_build"]
html_theme = "sphinx_book_theme"
html_title = "A small book"
locale_dirs = ["locales"]
gettext_compact = False
nb_execution_mode = "off"
myst_enable_extensions = ["dollarmath"]
myst_heading_anchors = 2
book_editions = [["en", "", "English"], ["zh_CN", "zh", "中文"]]
translated_pages = {"zh_CN": ["index"]}
"""
SVG = ('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 90 20">'
       '<text x="1" y="9">key</text><text x="50" y="9">x1</text></svg>')
# The book's pages are MyST notebooks (myst-nb parses them, and so their translated messages too).
NOTEBOOK_HEADER = """---
jupytext:
  text_representation:
    format_name: myst
kernelspec:
  name: python3
  display_name: Python 3
---
"""
INDEX = NOTEBOOK_HEADER + """# 1. Attention

Scores become weights.

$$
\\softmax(s)_j = e^{s_j} / \\sum_l e^{s_l}
$$

```{admonition} Erratum — a box
A boxed text.
```

```{diagram} one.svg
:alt: A key and a token.

The caption.
```

```{toctree}
other
cells
```
"""
OTHER = "# Other\n\nSee [the scores](index.md#1-attention).\n"
NOTEBOOK = {"cells": [{"cell_type": "markdown", "id": "m", "metadata": {}, "source": "# Cells\n\nA cell prints."},
                      {"cell_type": "code", "id": "c", "execution_count": 1, "metadata": {},
                       "source": "print('printed text')",
                       "outputs": [{"name": "stdout", "output_type": "stream", "text": "printed text\n"}]}],
            "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
            "nbformat": 4, "nbformat_minor": 5}
CHINESE = {"1. Attention": "1\\. 注意力", "Scores become weights.": "分数变成权重。", "key": "键",
           "A key and a token.": "一个键和一个词元。", "The caption.": "图注。", "Other": "其他",
           "See [the scores](index.md#1-attention).": "见[分数](index.md#1-attention)。", "Cells": "单元格",
           "A cell prints.": "一个单元格打印输出。", "Erratum — a box": "勘误 — 一个框",
           "A boxed text.": "框中的文字。"}


def _project(root: Path) -> Path:
    root.mkdir()
    for name, text in {"conf.py": CONF, "index.md": INDEX, "other.md": OTHER, "one.svg": SVG,
                       "cells.ipynb": json.dumps(NOTEBOOK)}.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


def _build(project: Path, builder: str, language: str = "en") -> tuple[Path, str]:
    warnings = io.StringIO()
    out = project / "_build" / f"{builder}-{language}"
    locale.translators.clear()  # Sphinx keeps a page's catalogue for the process: this project's are new
    with docutils_namespace():  # each build registers its nodes and directives afresh
        app = Sphinx(project, project, out, project / "_build" / f".doctrees-{builder}-{language}", builder,
                     confoverrides={"language": language, "book_site": str(project / "_build" / "html-en")},
                     status=None, warning=warnings, freshenv=True)
        app.build()
    return out, warnings.getvalue()


def _warnings_about(project: Path, warnings: str) -> list[str]:
    """The warnings about the project's pages (builds earlier in the process may leave warnings of their own)."""
    return [line for line in warnings.splitlines() if str(project) in line]


def _messages(pot_dir: Path, domain: str) -> list[str]:
    with (pot_dir / f"{domain}.pot").open("rb") as file:
        return [m.id for m in read_po(file) if m.id]


def _translate(project: Path, pot_dir: Path, translations: dict[str, str]) -> None:
    update(str(project / "locales"), str(pot_dir), ["zh_CN"])
    for path in (project / "locales" / "zh_CN" / "LC_MESSAGES").glob("*.po"):
        with path.open("rb") as file:
            catalogue = read_po(file)
        for message in catalogue:
            message.string = translations.get(message.id, "")
        with path.open("wb") as file:
            write_po(file, catalogue)


def test_catalogues_hold_the_prose_and_the_diagrams_words_not_math_code_or_outputs(tmp_path):
    pot_dir, _ = _build(_project(tmp_path / "book"), "gettext")
    assert _messages(pot_dir, "index") == ["A key and a token.", "key", "1. Attention", "Scores become weights.",
                                           "Erratum — a box", "A boxed text.", "The caption."]
    assert _messages(pot_dir, "cells") == ["Cells", "A cell prints."]
    site = _messages(pot_dir, "site")  # the words of every extension in _ext/, and the site's title
    assert {"Erratum", "This page is not translated yet: it is shown in English.", "A small book"} <= set(site)


def test_the_chinese_build_translates_prose_and_diagram_words_and_keeps_heading_anchors(tmp_path):
    project = _project(tmp_path / "book")
    pot_dir, _ = _build(project, "gettext")
    _translate(project, pot_dir, CHINESE)
    out, warnings = _build(project, "html", "zh_CN")
    assert not _warnings_about(project, warnings)  # the link to the heading resolves, the box's title aside
    index = (out / "index.html").read_text(encoding="utf-8")
    assert "1. 注意力" in index and "分数变成权重。" in index
    assert '<text x="1" y="9">键</text>' in index and 'aria-label="一个键和一个词元。"' in index
    assert '<text x="50" y="9">x1</text>' in index  # no words: not a message
    assert 'href="index.html#attention"' in (out / "other.html").read_text(encoding="utf-8")
    assert "untranslated" not in index and "untranslated" in (out / "other.html").read_text(encoding="utf-8")
    assert re.search(r'class="btn btn-sm language-switch" href="\.\./index\.html" hreflang="en"', index)


def test_a_translation_sphinx_cannot_use_is_a_warning(tmp_path):
    project = _project(tmp_path / "book")
    pot_dir, _ = _build(project, "gettext")
    _translate(project, pot_dir, {**CHINESE, "1. Attention": "1. 注意力"})  # Markdown reads a list
    _, warnings = _build(project, "html", "zh_CN")
    found = _warnings_about(project, warnings)
    assert len(found) == 1 and "WARNING: the translation of '1. Attention' is not used" in found[0], found


def test_an_edition_links_the_exercise_notebook_released_in_its_language(tmp_path):
    project = tmp_path / "book"
    notebooks = {"release/one": "English one", "release/two": "English two", "release/zh_CN/one": "中文 one"}
    for folder, text in notebooks.items():
        (project / folder).mkdir(parents=True)
        (project / folder / f"{Path(folder).name}.ipynb").write_text(text, encoding="utf-8")
    (project / "conf.py").write_text(CONF.replace('["_build"]', '["_build", "release"]'), encoding="utf-8")
    (project / "index.md").write_text("# Exercises\n\nThe {download}`first <release/one/one.ipynb>` and the "
                                      "{download}`second <release/two/two.ipynb>`.\n", encoding="utf-8")
    for language, expected in (("en", ["English one", "English two"]), ("zh_CN", ["中文 one", "English two"])):
        out, _ = _build(project, "html", language)
        links = re.findall(r'href="(_downloads/[^"]+)"', (out / "index.html").read_text(encoding="utf-8"))
        assert [(out / link).read_text(encoding="utf-8") for link in links] == expected, language
