"""The Chinese edition writes each term one way: the glossary's table of the edition's terms
(book/glossary.md, "The terms of the Chinese edition") is the single source, and no catalogue of the
edition uses a wording that table rejects.

A rejected wording counts outside code, formulas and quotations “…” (the notes are quoted as they
are written), and outside the edition's own term (the dash —— contains the rejected lone —). A message
kept in English on purpose (its translation is its original) and the glossary's own catalogue, which lists
the notes' wordings, are left out.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from babel.messages.pofile import read_po

ROOT = Path(__file__).resolve().parents[1]
GLOSSARY = ROOT / "book" / "glossary.md"
LOCALES = ROOT / "locales"
SECTION = "## The terms of the Chinese edition"
# What a rejected wording may appear in: inline code, math, and quotations of the notes.
_NOT_PROSE = re.compile(r"``[^`]*``|`[^`]*`|\$\$.*?\$\$|\$[^$]*\$|“[^”]*”", re.S)


def edition_terms(glossary: str) -> list[tuple[str, list[str], list[str]]]:
    """(English, the edition's terms, the rejected wordings) of each row of the glossary's table."""
    section = glossary.split(SECTION, 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 3 or cells[0] in ("English", "") or set(cells[0]) <= {"-"}:
            continue
        english, chinese, rejected = cells
        rows.append((english, [t.strip() for t in chinese.split(" / ")], [r.strip() for r in rejected.split(";")]))
    return rows


def catalogues() -> list[Path]:
    """Every catalogue of every translated edition, the glossary's aside."""
    return sorted(path for path in LOCALES.glob("*/LC_MESSAGES/**/*.po") if path.stem != "glossary")


def prose(translation: str) -> str:
    return _NOT_PROSE.sub(" ", translation)


def misused_terms(translation: str, terms: list[tuple[str, list[str], list[str]]]) -> list[str]:
    """The rejected wordings in one translation, each with the term the edition writes instead."""
    text, found = prose(translation), []
    for english, chinese, rejected in terms:
        plain = text
        for term in chinese:  # the edition's own term may contain a rejected wording
            plain = plain.replace(term, " ")
        found += [f"{wording!r} (write {' / '.join(chinese)} for {english})" for wording in rejected if wording in plain]
    return found


TERMS = edition_terms(GLOSSARY.read_text(encoding="utf-8"))


def test_the_glossary_table_names_every_term_with_its_rejected_wordings():
    assert len(TERMS) >= 8, f"the glossary's table of the edition's terms has {len(TERMS)} rows"
    for english, chinese, rejected in TERMS:
        assert chinese and all(chinese), f"{english}: no Chinese term"
        assert rejected and all(rejected), f"{english}: no rejected wording"
        assert not set(chinese) & set(rejected), f"{english}: a term is both written and rejected"


def test_a_rejected_wording_is_found_in_prose_and_not_in_code_math_or_quotations():
    terms = [("memory", ["编码器输出 C"], ["编码信息矩阵"]), ("dash", ["——"], ["—"])]
    assert misused_terms("键和值来自编码信息矩阵 C", terms)
    assert misused_terms("注意力 — 一种平均", terms)
    assert not misused_terms("笔记称之为“编码信息矩阵 C”；`编码信息矩阵` $a — b$", terms)
    assert not misused_terms("注意力——一种平均，来自编码器输出 C", terms)


@pytest.mark.parametrize("catalogue", catalogues(), ids=lambda path: str(path.relative_to(LOCALES)))
def test_the_catalogue_writes_the_glossarys_terms(catalogue):
    with catalogue.open("rb") as file:
        messages = [message for message in read_po(file) if message.id and message.string]
    problems = []
    for message in messages:
        strings = [message.string] if isinstance(message.string, str) else list(message.string)
        for string in strings:
            if string == message.id:  # kept in English on purpose
                continue
            problems += [f"{misused}\n    in: {string[:120]!r}" for misused in misused_terms(string, TERMS)]
    assert not problems, f"{catalogue.relative_to(ROOT)}:\n" + "\n".join(problems)
