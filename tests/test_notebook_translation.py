"""editions/notebooks.py: the prose of an exercise notebook as messages, block by block, and the
notebook translated from them — code, math and nbgrader's metadata untouched, the checksums of the locked
cells right — on a small notebook; and the course's catalogues keep what a translation must keep."""
from __future__ import annotations

import copy
import re

import nbformat
import pytest
from markdown_it import MarkdownIt
from nbgrader.utils import compute_checksum

from editions.assignments import ROOT
from editions.notebooks import CATALOGUES, messages, read_translations, template, translate_notebook

INTRO = """# Chapter 1 exercises — attention

You build the pieces of
attention:

| # | function | points |
|---|---|---|
| 1 | `softmax` | 3 |
| 2 | `attention` with a mask | 4 |

    code = "an indented code block"

1. project the inputs;
2. attend, with `mask`
   (True = may attend).

$$\\mathrm{softmax}(x)_i = e^{x_i}$$"""
HINT = """<details><summary>Hint 1</summary>

Subtract the **maximum** of the row.
</details>"""
CHINESE = {
    "Chapter 1 exercises — attention": "第 1 章练习——注意力",
    "You build the pieces of attention:": "你将实现注意力的各个部分：",
    "function": "函数", "points": "分值", "`attention` with a mask": "带掩码的 `attention`",
    "project the inputs;": "投影输入；",
    "attend, with `mask` (True = may attend).": "做注意力，带上 `mask`（True 表示可以关注）。",
    "Hint 1": "提示 1", "Subtract the **maximum** of the row.": "减去这一行的**最大值**。",
}


def _locked(cell: nbformat.NotebookNode, grade_id: str) -> nbformat.NotebookNode:
    cell.metadata["nbgrader"] = {"grade": False, "grade_id": grade_id, "locked": True, "schema_version": 3,
                                 "solution": False, "task": False}
    cell.metadata.nbgrader.checksum = compute_checksum(cell)
    return cell


def _notebook() -> nbformat.NotebookNode:
    answer = nbformat.v4.new_markdown_cell("An answer: the student's own words.")
    answer.metadata["nbgrader"] = {"grade": True, "grade_id": "essay", "locked": False, "points": 1,
                                   "schema_version": 3, "solution": True, "task": False}
    return nbformat.v4.new_notebook(cells=[
        _locked(nbformat.v4.new_markdown_cell(INTRO), "intro"),
        _locked(nbformat.v4.new_code_cell("import torch  # Not a message: code."), "setup"),
        _locked(nbformat.v4.new_markdown_cell(HINT), "hint"),
        answer,
    ])


def test_the_messages_are_the_prose_of_each_block_on_one_line():
    assert messages(_notebook()) == list(CHINESE)  # no code, math, numbers or code-only cells; not the answer
    assert [m.id for m in template(_notebook(), "ch01_attention") if m.id] == list(CHINESE)


def test_a_translated_notebook_keeps_its_structure_its_code_and_its_metadata():
    english = _notebook()
    snapshot = copy.deepcopy(english)
    chinese = translate_notebook(english, CHINESE)
    assert chinese.cells[0].source == """# 第 1 章练习——注意力

你将实现注意力的各个部分：

| # | 函数 | 分值 |
|---|---|---|
| 1 | `softmax` | 3 |
| 2 | 带掩码的 `attention` | 4 |

    code = "an indented code block"

1. 投影输入；
2. 做注意力，带上 `mask`（True 表示可以关注）。

$$\\mathrm{softmax}(x)_i = e^{x_i}$$"""
    assert chinese.cells[2].source == "<details><summary>提示 1</summary>\n\n减去这一行的**最大值**。\n</details>"
    assert chinese.cells[1] == english.cells[1] and chinese.cells[3] == english.cells[3]
    for before, after in zip(english.cells, chinese.cells):
        assert after.id == before.id
        assert {**after.metadata.nbgrader, "checksum": None} == {**before.metadata.nbgrader, "checksum": None}
    assert english == snapshot, "the English notebook is left as it was"


def test_the_locked_cells_checksums_are_those_nbgrader_validate_computes():
    english, chinese = _notebook(), translate_notebook(_notebook(), CHINESE)
    for before, after in zip(english.cells, chinese.cells):
        if "checksum" in after.metadata.nbgrader:
            assert after.metadata.nbgrader.checksum == compute_checksum(after)
    assert chinese.cells[0].metadata.nbgrader.checksum != english.cells[0].metadata.nbgrader.checksum


def test_a_notebook_with_a_message_left_to_translate_is_not_translated():
    with pytest.raises(ValueError, match=r"1 messages have no translation, e.g. 'Hint 1'"):
        translate_notebook(_notebook(), {m: t for m, t in CHINESE.items() if m != "Hint 1"})


def test_a_fuzzy_translation_is_not_used(tmp_path):
    from babel.messages.pofile import write_po

    catalogue = template(_notebook(), "ch01_attention")
    for message in catalogue:
        if message.id:
            message.string = CHINESE[message.id]
    catalogue["Hint 1"].flags.add("fuzzy")  # its English changed since it was translated
    with (tmp_path / "ch01_attention.po").open("wb") as file:
        write_po(file, catalogue)
    translations = read_translations(tmp_path / "ch01_attention.po")
    assert "Hint 1" not in translations and translations["function"] == "函数"
    with pytest.raises(ValueError, match="Hint 1"):
        translate_notebook(_notebook(), translations)


def test_a_translation_that_does_not_read_as_its_block_is_refused():
    broken = {**CHINESE, "You build the pieces of attention:": "1. 你将实现注意力的各个部分："}  # a list
    with pytest.raises(ValueError, match=r"changes the structure .* write '1\\\. '"):
        translate_notebook(_notebook(), broken)
    assert translate_notebook(_notebook(), {**broken, "You build the pieces of attention:": "1\\. 你将实现……"})


_KEPT = {"code spans": r"`[^`]*`", "math": r"\$\$.*?\$\$|\$[^$]*\$"}
_MARKDOWN = MarkdownIt("commonmark")


def _numbers(text: str) -> list[str]:
    return sorted(re.findall(r"\d+", re.sub("|".join(_KEPT.values()), " ", text)))


def _inline_markup(text: str) -> list[str]:
    return sorted(child.type for token in _MARKDOWN.parse(text) if token.type == "inline" for child in token.children
                  if child.type in ("strong_open", "em_open", "code_inline", "link_open"))


@pytest.mark.parametrize("path", sorted((ROOT / "locales").glob(f"*/LC_MESSAGES/{CATALOGUES}/*.po")),
                         ids=lambda path: path.stem)
def test_every_translation_keeps_the_code_math_numbers_and_emphasis_of_its_english(path):
    for english, translated in read_translations(path).items():
        for what, pattern in _KEPT.items():
            assert sorted(re.findall(pattern, translated)) == sorted(re.findall(pattern, english)), (what, english)
        assert _numbers(translated) == _numbers(english), ("numbers", english)
        # CommonMark reads `**粗体。**然后` as plain text: the marks must still pair up in the translation.
        assert _inline_markup(translated) == _inline_markup(english), ("emphasis or code", english)


def test_a_text_without_words_is_no_message():
    from editions.markdown import has_words

    assert not any(has_words(text) for text in ("`softmax`", "$QK^\\top$", "<br>", "3.", "— 1 —"))
    assert all(has_words(text) for text in ("a `mask` of", "$x$ is", "<b>Hint</b>"))
    assert "1" not in messages(_notebook()) and "`softmax`" not in messages(_notebook())


def test_the_notebook_translator_imports_no_book_build():
    import subprocess
    import sys

    script = ("import sys, editions.notebooks; "
              "print(sorted(m for m in sys.modules if m.split('.')[0] in ('sphinx', 'myst_parser', 'page_notebooks')))")
    assert subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout == "[]\n"
