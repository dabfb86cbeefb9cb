"""Near copies: a solution cell that is (almost) a piece of tfm_ref's source, or another student's same cell.

A flag for the instructor, never a score. Cells become winnowed fingerprints (Schleimer, Wilkerson and Aiken
2003) of normalised tokens, less the released stub's; with ``MIN_FINGERPRINTS`` left, ``OVERLAP`` with a
tfm_ref function or class (either way round) flags ``similar-to:tfm_ref.<module>.<name>``, Jaccard ``OVERLAP``
with another student's cell ``similar-to:<student_id>@<grade_id>``. A likeness the instructor's own solutions
share counts only beyond theirs by ``MARGIN``.
"""
from __future__ import annotations

import ast
import io
import keyword
import tokenize
import zlib
from collections.abc import Iterator
from pathlib import Path

from editions.assignments import ROOT

from .audit import MAX_AUDITED_CHARS

__all__ = ["fingerprints", "similarity_flags", "similar_to", "is_similarity", "K", "WINDOW", "MIN_FINGERPRINTS", "OVERLAP",
           "MARGIN", "MAX_LINE_CHARS"]

K = 7  # tokens per k-gram
WINDOW = 4  # k-grams per winnowing window
MIN_FINGERPRINTS = 25
OVERLAP = 0.8
PREFIX = "similar-to:"
MARGIN = 0.1  # how much closer to a piece of tfm_ref than the instructor's own solution a cell must come
TFM_REF = ROOT / "tfm_ref"
MAX_LINE_CHARS = 1_000  # longer lines are left out: Python's tokenizer takes time quadratic in a line's length
_SKIP = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING,
         tokenize.ENDMARKER}


def _tokens(source: str) -> list[str]:
    tokens: list[str] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type in _SKIP:
                continue
            if token.type == tokenize.NAME:
                after_dot = bool(tokens) and tokens[-1] == "."
                tokens.append(token.string if after_dot or keyword.iskeyword(token.string) else "v")
            elif token.type == tokenize.STRING:
                tokens.append("s")
            elif token.type == tokenize.NUMBER:
                tokens.append("0")
            else:
                tokens.append(token.string)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass  # a cell that does not tokenize to the end is fingerprinted as far as it goes
    return tokens


def fingerprints(source: str) -> set[int]:
    """The winnowed fingerprints of ``source`` (lines over `MAX_LINE_CHARS` left out); none if too large to audit."""
    if len(source) > MAX_AUDITED_CHARS:
        return set()
    tokens = _tokens("\n".join(line if len(line) <= MAX_LINE_CHARS else "" for line in source.split("\n")))
    hashes = [zlib.crc32(" ".join(tokens[i:i + K]).encode()) for i in range(len(tokens) - K + 1)]
    if len(hashes) <= WINDOW:
        return set(hashes)
    return {min(hashes[i:i + WINDOW]) for i in range(len(hashes) - WINDOW + 1)}


def _tfm_ref_pieces(package: Path) -> Iterator[tuple[str, set[int]]]:
    """(``tfm_ref.module.Name``, fingerprints) for every top-level function and class of tfm_ref."""
    for path in sorted(package.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        module = ".".join(path.relative_to(package.parent).with_suffix("").parts)
        for node in ast.parse(source).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                yield f"{module}.{node.name}", fingerprints(ast.get_source_segment(source, node) or "")


def similarity_flags(rows: list[dict], stubs: dict[tuple[str, str], str], package: Path = TFM_REF,
                     solutions: dict[tuple[str, str], str] | None = None) -> list[set[str]]:
    """The similarity flags of each row (``code``: grade_id → the student's solution), the released ``stubs``
    subtracted; ``solutions`` (the instructor's cells) tell which pieces of tfm_ref say little about a cell."""
    pieces = list(_tfm_ref_pieces(package))
    stub_prints = {cell: fingerprints(stub) for cell, stub in stubs.items()}  # once, not once per student

    def evidence(code: str, cell: tuple[str, str]) -> set[int]:
        found = fingerprints(code) - stub_prints.get(cell, set())
        return found if len(found) >= MIN_FINGERPRINTS else set()

    def likeness(mine: set[int]) -> dict[str, float]:
        """The pieces ``mine`` resembles (its share in theirs or theirs in it) where that reaches `OVERLAP`."""
        found: dict[str, float] = {}
        if not mine:  # too short to say anything (`evidence`)
            return found
        for name, theirs in pieces:
            shared = len(mine & theirs)
            share = max(shared / len(mine), shared / len(theirs) if len(theirs) >= MIN_FINGERPRINTS else 0.0)
            if share >= OVERLAP:
                found[name] = share
        return found

    natural: dict[str, dict[str, float]] = {}  # assignment → the pieces its solutions resemble, and how much
    for (assignment, grade_id), code in (solutions or {}).items():
        course = natural.setdefault(assignment, {})
        for name, share in likeness(evidence(code, (assignment, grade_id))).items():
            course[name] = max(share, course.get(name, 0.0))

    def like(mine: set[int], assignment: str) -> set[str]:
        """The pieces ``mine`` resembles more than the instructor's solutions do, by `MARGIN`."""
        course = natural.get(assignment, {})
        return {name for name, share in likeness(mine).items() if name not in course or share > course[name] + MARGIN}
    prints: list[dict[str, set[int]]] = []
    for row in rows:
        cells = {grade_id: evidence(code, (row["assignment"], grade_id)) for grade_id, code in row.get("code", {}).items()}
        prints.append({grade_id: found for grade_id, found in cells.items() if found})
    flags: list[set[str]] = [set() for _ in rows]
    for i, row in enumerate(rows):
        for grade_id, mine in prints[i].items():
            flags[i] |= {f"{PREFIX}{name}" for name in like(mine, row["assignment"])}
            for j in range(i + 1, len(rows)):
                other = prints[j].get(grade_id)
                if other and rows[j]["assignment"] == row["assignment"] \
                        and len(mine & other) >= OVERLAP * len(mine | other):
                    flags[i].add(f"{PREFIX}{rows[j]['student_id']}@{grade_id}")
                    flags[j].add(f"{PREFIX}{row['student_id']}@{grade_id}")
    return flags



def is_similarity(flag: str) -> bool:
    """Is ``flag`` one of `similarity_flags`' (which a grading run computes again for the whole class)?"""
    return flag.startswith(PREFIX)


def similar_to(flag: str, cells: set[str] | frozenset[str] = frozenset()) -> tuple[str, str | None]:
    """What a ``similar-to:`` flag names: (``tfm_ref.<module>.<name>`` or the other student, the cell or None).
    A student id may hold ``@``: the cell is after the last ``@`` where ``cells`` has it (or, without ``cells``,
    wherever there is one); an old ``similar-to:<student>`` flag has no cell."""
    if not is_similarity(flag):
        raise ValueError(f"{flag!r} is not a similarity flag")
    who = flag[len(PREFIX):]
    if who.startswith("tfm_ref."):
        return who, None
    student, at, cell = who.rpartition("@")
    if at and student and (cell in cells if cells else True):
        return student, cell
    return who, None
