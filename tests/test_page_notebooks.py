"""_ext/page_notebooks.py: a page's MyST source and notebook translated block by block from its catalogue,
as the gettext builder extracts the messages. The book's translated notebooks: test_site_zh.py."""
from __future__ import annotations

import nbformat
import pytest
from myst_parser.config.main import MdParserConfig
from page_notebooks import markdown_parser, translate_markdown, translate_notebook

PARSER = markdown_parser(MdParserConfig(enable_extensions={"amsmath", "dollarmath", "colon_fence", "deflist"}))
CHINESE = {
    "1. Attention": "1\\. 注意力",
    "Attention lets every token gather information, in proportions the model computes.": "注意力让每个词元收集信息。",
    "A query $q_i$: what token $i$ looks for;": "查询 $q_i$：词元 $i$ 在找什么；",
    "Erratum — a box": "勘误 — 一个框",
    "A boxed text, on two lines.": "框中的文字。",
    "Why a softmax?": "为什么用 softmax？",
    "Because weights sum to 1.": "因为权重之和为 1。",
    "A key and a token.": "一个键和一个词元。",
    "The caption.": "图注。",
    "term": "术语",
    "Its definition.": "它的定义。",
    "English": "英文",
    "a word": "一个词",
    "Quoted prose.": "引用的文字。",
}
SOURCE = """---
kernelspec:
  name: python3
---

# 1. Attention

Attention lets every token gather information,
in proportions the model computes.

- A query $q_i$:
  what token $i$ looks for;
- untranslated item.

$$
\\mathrm{softmax}(s) \\quad \\text{A boxed text, on two lines.}
$$

```{code-cell} ipython3
print("Why a softmax?")
```

```{admonition} Erratum — a box
:class: erratum dropdown
A boxed text,
on two lines.
```

````{dropdown} Why a softmax?
Because weights sum to 1.

```python
# The caption.
```
````

:::{diagram} one.svg
:alt: A key and a token.
:name: fig-one

The caption.
:::

term
: Its definition.

| English | 中文 |
|---|---|
| a word | 一个词 |

> Quoted prose.

```text
The caption.
```
"""


def _translate(text: str) -> str:
    return CHINESE.get(text, text)


def test_every_block_of_prose_is_translated_on_one_line_after_its_marker():
    translated = translate_markdown(SOURCE, _translate, PARSER)
    for expected in ("# 1\\. 注意力", "注意力让每个词元收集信息。", "- 查询 $q_i$：词元 $i$ 在找什么；", "- untranslated item.",
                     "```{admonition} 勘误 — 一个框", "框中的文字。", "````{dropdown} 为什么用 softmax？", "因为权重之和为 1。",
                     ":alt: 一个键和一个词元。", ":name: fig-one", "术语", ": 它的定义。", "| 英文 | 中文 |", "| 一个词 | 一个词 |",
                     "> 引用的文字。"):
        assert expected in translated.split("\n"), f"no line {expected!r} in\n{translated}"
    assert "图注。" in translated.split(":::{diagram} one.svg")[1]


def test_code_math_front_matter_and_options_stay_as_they_are():
    translated = translate_markdown(SOURCE, _translate, PARSER)
    assert translated.startswith("---\nkernelspec:\n  name: python3\n---\n")
    assert 'print("Why a softmax?")' in translated  # a code cell
    assert "\\text{A boxed text, on two lines.}" in translated  # math
    assert "```python\n# The caption.\n```" in translated and "```text\nThe caption.\n```" in translated  # code blocks
    assert ":class: erratum dropdown" in translated


def test_a_source_without_translations_is_unchanged():
    assert translate_markdown(SOURCE, str, PARSER) == SOURCE


def test_a_translation_that_changes_the_markdown_is_refused():
    with pytest.raises(ValueError, match="structure"):
        translate_markdown("Attention.\n", lambda text: "1. 注意力" if text == "Attention." else text, PARSER)


def test_a_notebook_keeps_its_code_outputs_and_metadata():
    notebook = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3"}})
    notebook.cells = [nbformat.v4.new_markdown_cell("# 1. Attention"),
                      nbformat.v4.new_code_cell("print('term')", outputs=[
                          nbformat.v4.new_output("stream", name="stdout", text="term\n")])]
    translated = translate_notebook(notebook, _translate, PARSER)
    assert translated.cells[0].source == "# 1\\. 注意力"
    assert translated.cells[1] == notebook.cells[1] and translated.metadata == notebook.metadata
    assert notebook.cells[0].source == "# 1. Attention"  # a copy: the original is untouched


def test_a_page_and_an_exercise_notebook_share_one_translator():
    from editions import markdown

    assert translate_markdown is markdown.translate_markdown


def test_a_directive_is_a_directive_on_a_page_and_code_in_jupyterlab():
    from editions.markdown import JUPYTER

    fence = "```{admonition} Erratum — a box\nA boxed text,\non two lines.\n```"
    assert translate_markdown(fence, _translate, PARSER) == "```{admonition} 勘误 — 一个框\n框中的文字。\n```"
    assert translate_markdown(fence, _translate, JUPYTER) == fence  # JupyterLab shows it as a code block


def test_a_table_in_a_list_item_keeps_its_indentation_and_its_escaped_pipes():
    source = "- a list:\n\n  | English | a \\| b |\n  |---|---|\n  | a word | x |"
    lines = translate_markdown(source, _translate, PARSER).split("\n")
    assert lines[2] == "  | 英文 | a \\| b |" and lines[4] == "  | 一个词 | x |"


def test_a_text_without_words_is_translated_where_the_catalogue_has_it():
    cells = "| $n$ ($a$, $b$) | — |\n|---|---|\n| x | y |"
    chinese = {"$n$ ($a$, $b$)": "$n$（$a$、$b$）", "—": "——"}
    assert translate_markdown(cells, lambda text: chinese.get(text, text), PARSER).split("\n")[0] == \
        "| $n$（$a$、$b$） | —— |"
