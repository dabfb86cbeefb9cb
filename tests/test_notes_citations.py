"""The book's citations of the study notes: every quoted phrase occurs in the notes it names,
readers never see the notes' file names, and the notes map covers every section of every note.

A quotation “…” belongs to the nearest source cited before it in its block — a {note} role (then
it must occur in that note, verbatim up to spacing and markup) or a {cite} (the paper). A block is
a paragraph, a table row, or the part of a box before or after its **Correct:** / **In context:**.
A Chinese quotation from the notes with no source before it is an error.
"""
from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
SEEDS = ROOT.parent / "shared" / "seeds"


def _load_study_notes():
    # _ext/ holds Sphinx extensions, not a package: load the module by path.
    spec = importlib.util.spec_from_file_location("study_notes", ROOT / "_ext" / "study_notes.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


NOTES = _load_study_notes().NOTES
needs_notes = pytest.mark.skipif(not SEEDS.is_dir(), reason="the notes (shared/seeds) are not beside the repository")

_CODE_FENCE = re.compile(r"^(`{3,}|~{3,})(.*)$")
_TOKEN = re.compile(r"\{note\}`(?:[^`<]*<)?(?P<note>[\w-]+)>?`|\{cite\}`[^`]*`|“(?P<quote>[^”]*)”")
_CJK = re.compile(r"[\u4e00-\u9fff]")
_BLOCK_BREAK = re.compile(r"\n\s*\n|\n(?=\|)|(?=\*\*(?:Correct|In context):\*\*)")


def squash(text: str) -> str:
    """Text without spacing, math, emphasis, code or quote marks; K^{T} becomes Kᵀ and Z_{1} Z₁, as the book writes them."""
    plain = re.sub(r"[\s$*`{}‘’“”\"]+", "", text).replace("^T", "ᵀ")
    return re.sub(r"_(\d)", lambda digit: chr(0x2080 + int(digit.group(1))), plain)


def prose(page: str) -> str:
    """The page without its front matter and code (code cells and code blocks); directives such as boxes stay."""
    lines = page.split("\n")
    if lines and lines[0] == "---":
        lines = lines[lines.index("---", 1) + 1:]
    kept, directives, code = [], [], None  # fences of the open directives, and of the open code block
    for line in lines:
        stripped = line.strip()
        if code:
            code = None if stripped == code else code
            continue
        fence = _CODE_FENCE.match(stripped)
        if directives and stripped == directives[-1]:
            directives.pop()
        elif fence and fence.group(2).startswith("{") and not fence.group(2).startswith("{code-cell}"):
            directives.append(fence.group(1))
        elif fence:
            code = fence.group(1)
            continue
        kept.append(line)
    return "\n".join(kept)


def quote_problems(page: str, notes: dict[str, str]) -> tuple[list[str], int]:
    """(what is wrong, how many quotations of the notes were checked) for one page's text."""
    problems, checked = [], 0
    for block in _BLOCK_BREAK.split(prose(page)):
        source = None  # a note's key, "cite", or None before any citation
        for token in _TOKEN.finditer(block):
            if token.group("note") is not None:
                source = token.group("note")
                if source not in notes:
                    problems.append(f"unknown note {source!r}")
                continue
            if token.group("quote") is None:
                source = "cite"
                continue
            for fragment in filter(None, (part.strip() for part in re.split(r"…|\.\.\.", token.group("quote")))):
                if source in notes:
                    checked += 1
                    if squash(fragment) not in notes[source]:
                        problems.append(f"“{fragment}” is not in {NOTES[source].name} ({source})")
                elif source is None and _CJK.search(fragment) and any(squash(fragment) in text for text in notes.values()):
                    problems.append(f"“{fragment}” quotes the notes without naming them")
    return problems, checked


@pytest.fixture(scope="module")
def notes() -> dict[str, str]:
    return {key: squash((SEEDS / note.file).read_text(encoding="utf-8")) for key, note in NOTES.items()}


@needs_notes
def test_every_quotation_of_the_notes_is_in_the_note_it_names(notes):
    problems, checked = [], 0
    for page in sorted(BOOK.glob("*.md")):
        found, count = quote_problems(page.read_text(encoding="utf-8"), notes)
        problems += [f"{page.name}: {problem}" for problem in found]
        checked += count
    assert not problems, "\n".join(problems)
    assert checked >= 50, f"only {checked} quotations of the notes were checked"


@needs_notes
def test_the_check_catches_a_quote_given_to_the_wrong_note_or_to_none(notes):
    right = "{note}`components` say the mask ensures “第t个位置只能看到1...t-1的信息”."
    assert quote_problems(right, notes) == ([], 2)
    wrong_note, _ = quote_problems(right.replace("components", "overview"), notes)
    uncited, _ = quote_problems("The notes say “第t个位置只能看到1...t-1的信息”.", notes)
    altered, _ = quote_problems(right.replace("1...t-1", "1...t"), notes)
    paper = "The paper {cite}`vaswani2017attention` found “nearly identical results”."
    assert wrong_note and uncited and altered
    assert quote_problems(paper, notes) == ([], 0)


def test_a_correction_starts_a_new_block_and_code_is_not_prose():
    page = ("---\nkernelspec: {}\n---\n\n```{admonition} Erratum — x\n:class: erratum dropdown\n"
            "**Note:** {note}`overview` say “计算复杂度高”.\n\n**Correct:** “Die Katze” is German.\n```\n\n"
            "```{code-cell} ipython3\nprint(“未引用”)\n```\n")
    assert quote_problems(page, {"overview": squash("计算复杂度高，训练时间长")}) == ([], 1)


def test_no_page_shows_a_note_file_name():
    file_name = re.compile(r"\b\d{3}_[0-9a-f]{16}\.txt\b")
    shown = {page.name: file_name.findall(page.read_text(encoding="utf-8")) for page in BOOK.glob("*.md")}
    assert not {page: names for page, names in shown.items() if names}


# The map lists each note's sections down to this heading level; the worked-example notes go one
# level deeper only for the numbered steps inside their examples.
_MAP_DEPTH = {"worked-examples": 3}


def _headings(note_text: str, depth: int) -> list[str]:
    found = re.findall(r"^(#{1,6})\s+(.+?)\s*$", note_text, re.M)
    # A heading may be a link, [text](url); the map gives its text.
    return [re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text) for hashes, text in found if len(hashes) <= depth]


def _map_rows() -> dict[str, list[str]]:
    """The first cell of every row of the notes map, by the note whose section it is in."""
    rows, key = {}, None
    for line in (BOOK / "notes_map.md").read_text(encoding="utf-8").splitlines():
        label = re.match(r"^\(notes-(?P<key>[\w-]+)\)=$", line)
        if label:
            key = label.group("key")
            rows[key] = []
        elif key and line.startswith("| ") and not line.startswith("| section of the notes"):
            rows[key].append(line.split("|")[1].strip())
    return rows


@needs_notes
def test_the_notes_map_lists_every_section_of_every_note_and_nothing_else():
    rows = _map_rows()
    assert set(rows) == set(NOTES)
    for key, note in NOTES.items():
        headings = _headings((SEEDS / note.file).read_text(encoding="utf-8"), _MAP_DEPTH.get(key, 6))
        assert [squash(row) for row in rows[key]] == [squash(heading) for heading in headings], key
