"""book/errata_index.py: the errata page finds every erratum box, and each names a real note."""
from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SEEDS = ROOT.parent / "shared" / "seeds"


def _load_errata_index():
    # book/ is not a package (the pages import the module from their own folder), so load it by path.
    spec = importlib.util.spec_from_file_location("errata_index", ROOT / "book" / "errata_index.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


errata_index = _load_errata_index()

BOX = """```{{admonition}} Erratum — {title}
:class: erratum
**Note:** `{seed}` says 0.016.
**Correct:** 0.007.
```
"""


def test_finds_every_box_with_its_page_title_and_seed_file(tmp_path):
    (tmp_path / "01_a.md").write_text(
        "---\njupytext: {}\n---\n\n# Attention\n\ntext\n\n"
        + BOX.format(title="softmax of the example", seed="000_53fd03a28cfd30be.txt")
        + "\nmore\n\n"
        + BOX.format(title="Q from the wrong matrix", seed="001_157e113c0f4243ed.txt"),
        encoding="utf-8")
    (tmp_path / "02_b.md").write_text(
        "# Heads\n\n::::{admonition} Erratum – colon fence\n:class: erratum\n**Note:** `002_dd6b0fe75acbf285.txt`\n::::\n",
        encoding="utf-8")
    (tmp_path / "03_c.md").write_text("# No errata\n\n```{admonition} A plain note\nhello\n```\n", encoding="utf-8")

    errata = errata_index.find_errata(tmp_path)

    assert [(e.page, e.page_title, e.title, e.seed_files) for e in errata] == [
        ("01_a", "Attention", "softmax of the example", ("000_53fd03a28cfd30be.txt",)),
        ("01_a", "Attention", "Q from the wrong matrix", ("001_157e113c0f4243ed.txt",)),
        ("02_b", "Heads", "colon fence", ("002_dd6b0fe75acbf285.txt",)),
    ]
    html = errata_index.errata_table_html(errata)
    assert html.count("<tr><td>") == 3 and 'href="01_a.html"' in html


def test_a_box_without_the_erratum_class_is_an_error(tmp_path):
    (tmp_path / "x.md").write_text("# X\n\n```{admonition} Erratum — missing class\n**Note:** `000_53fd03a28cfd30be.txt`\n```\n",
                                   encoding="utf-8")
    with pytest.raises(ValueError, match="class: erratum"):
        errata_index.find_errata(tmp_path)


def test_an_unclosed_box_is_an_error(tmp_path):
    (tmp_path / "x.md").write_text("# X\n\n```{admonition} Erratum — open\n:class: erratum\n", encoding="utf-8")
    with pytest.raises(ValueError, match="closing"):
        errata_index.find_errata(tmp_path)


def test_every_erratum_in_the_book_names_a_note_file_that_exists():
    errata = errata_index.find_errata(ROOT / "book")
    assert errata, "the book has no erratum boxes"
    for erratum in errata:
        assert erratum.seed_files, f"{erratum.page}: erratum {erratum.title!r} names no note file"
        if SEEDS.is_dir():  # shared/ sits beside the repository on developer machines and in CI
            for seed in erratum.seed_files:
                assert (SEEDS / seed).is_file(), f"{erratum.page}: erratum {erratum.title!r} names {seed}, not in {SEEDS}"


def test_an_example_box_inside_a_code_block_is_not_counted_but_one_inside_a_directive_is(tmp_path):
    example = BOX.format(title="shown as an example", seed="000_53fd03a28cfd30be.txt")
    nested = BOX.format(title="inside a dropdown", seed="001_157e113c0f4243ed.txt")
    (tmp_path / "x.md").write_text(
        f"# X\n\n````md\n{example}````\n\n`````{{dropdown}} more\n{nested}`````\n\n```python\nprint(1)\n```\n",
        encoding="utf-8")
    assert [e.title for e in errata_index.find_errata(tmp_path)] == ["inside a dropdown"]


def _chinese_quotes(text: str) -> list[str]:
    """The fragments of “…” quotes that contain Chinese, split where the book elides with …."""
    quotes = re.findall(r"“([^”]*)”", text.split("**Correct:**")[0])
    fragments = [part.strip() for quote in quotes for part in re.split(r"…|\.\.\.", quote)]
    return [f for f in fragments if re.search(r"[\u4e00-\u9fff]", f)]


@pytest.mark.skipif(not SEEDS.is_dir(), reason="the notes (shared/seeds) are not beside the repository")
def test_every_chinese_quote_in_an_erratum_is_found_in_the_note_it_names():
    def squash(text: str) -> str:  # ignore spacing, math and bold markup; the book writes Kᵀ for K^{T}
        plain = re.sub(r"[\s$*`{}]+", "", text).replace("^T", "ᵀ")
        return re.sub(r"_(\d)", lambda digit: chr(0x2080 + int(digit.group(1))), plain)  # Z_1 → Z₁
    quoted = 0
    for erratum in errata_index.find_errata(ROOT / "book"):
        notes = squash("".join((SEEDS / seed).read_text(encoding="utf-8") for seed in erratum.seed_files))
        for fragment in _chinese_quotes(erratum.text):
            quoted += 1
            assert squash(fragment) in notes, (
                f"{erratum.page}: erratum {erratum.title!r} quotes {fragment!r}, which is not in {erratum.seed_files}")
    assert quoted, "no erratum quotes the notes"
