"""book/glossary.md: one alphabetical table, each English and each Chinese term in it once."""
from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEADER = "| English | 中文 | where |"


def glossary_rows(page: str) -> list[tuple[str, str, str]]:
    """(English, 中文, where) of every row of the glossary's table."""
    lines = page.split(HEADER, 1)[1].splitlines()[2:]  # after the header and its |---| line
    rows = []
    for line in lines:
        if not line.startswith("|"):
            break
        english, chinese, where = (cell.strip() for cell in line.strip("|").split("|"))
        rows.append((english, chinese, where))
    return rows


def sort_key(english: str) -> str:
    """Alphabetical order of the English term: case, punctuation and brackets do not count."""
    return re.sub(r"[^0-9a-z ]", "", english.casefold())


def terms(cell: str) -> list[str]:
    """The terms of a cell: split at "/", without the glosses in brackets."""
    plain = re.sub(r"\([^)]*\)|（[^）]*）", "", cell)
    return [term.strip().casefold() for term in plain.split("/") if term.strip()]


def duplicates(rows, column: int) -> list[str]:
    counts = Counter(term for row in rows for term in terms(row[column]))
    return sorted(term for term, n in counts.items() if n > 1)


ROWS = glossary_rows((ROOT / "book" / "glossary.md").read_text(encoding="utf-8"))


def test_the_glossary_is_in_alphabetical_order():
    keys = [sort_key(english) for english, _, _ in ROWS]
    out_of_order = [(a, b) for a, b in zip(keys, keys[1:]) if a > b]
    assert len(ROWS) > 100 and not out_of_order


def test_no_term_is_listed_twice():
    assert duplicates(ROWS, 0) == [] and duplicates(ROWS, 1) == []


def test_every_row_points_to_a_page():
    assert all(where.startswith("{doc}`") for _, _, where in ROWS)


def test_the_checks_catch_a_row_out_of_order_and_a_repeated_term():
    rows = [("mask", "掩码", "x"), ("attention (the idea)", "注意力", "x"), ("bidirectional / mask", "双向 / 掩码（Mask）", "x")]
    assert sort_key(rows[0][0]) > sort_key(rows[1][0])
    assert duplicates(rows, 0) == ["mask"] and duplicates(rows, 1) == ["掩码"]
