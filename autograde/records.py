"""The class's records in OUT, which every grading run merges into: a run's rows replace those submissions'
rows in grades.csv, checks.csv and grader-errors.log, and every row's ``similar-to:`` flags are computed
again from `RECORD` (the students' code: instructor only). README: "Grading again".
"""
from __future__ import annotations

import csv
import json
import os
import re
import sys
from pathlib import Path

from intake.collection import shown

from .similarity import is_similarity

__all__ = ["CSV_COLUMNS", "CHECK_COLUMNS", "ERRORS_LOG", "RECORD", "ClassRecords", "write_csv", "refresh_scores",
           "write_errors", "as_written", "unescaped", "write_atomically"]

CSV_COLUMNS = ["student_id", "assignment", "notebook", "score", "max_score", "late_penalty", "flags", "cells"]
"""grades.csv: the score after the late penalty, and the points the penalty took off (their sum is
nbgrader's score, before the penalty); empty in a row graded before this column was written."""
CHECK_COLUMNS = ["student_id", "assignment", "cell", "exercise", "hidden", "passed", "mistake", "delegated",
                 "stopped"]
"""checks.csv: each check of each notebook (its test cell's grade id, the exercise key, visible or hidden), whether it
passed, the catalogued mistake its failure named (empty: none named), the forbidden operators that ran, and whether
it failed because a cell stopped (`autograde.session`; empty in a row graded before this column was written)."""
ERRORS_LOG = "grader-errors.log"
RECORD = "grading-record.json"
RECORD_VERSION = 1

_CELL_START = r"(?:^|(?<=[;,\r\n]))"  # where a spreadsheet may start a cell: the start, after ; , or a line break
_FORMULA = r"(?=[=+\-@\t\r])"  # before a character that starts a formula
_FORMULA_START = re.compile(_CELL_START + _FORMULA)
_QUOTED_FORMULA = re.compile(_CELL_START + "'" + _FORMULA)


def _cell(value: object) -> object:
    """A CSV value a spreadsheet shows as text: a formula's first character (``=+-@``, tab, CR) gets a quote, at the
    start and after each ``;``, ``,`` or line break, where a reader may start a cell. Idempotent."""
    return _FORMULA_START.sub("'", value) if isinstance(value, str) else value


def unescaped(value: str) -> str:
    """A value `_cell` escaped, as it was before (for those who read the CSVs back: the class report)."""
    return _QUOTED_FORMULA.sub("", value)


def as_written(text: str) -> str:
    """``text`` as `write_csv` writes it: escaped (`_cell`), a lone surrogate (a non-UTF-8 name) as its code."""
    return _cell(text).encode("utf-8", "backslashreplace").decode("utf-8")


def write_atomically(path: Path, write, mode: int = 0o644) -> None:
    """Write ``path`` atomically: through ``write(file)`` into a file beside it (``mode``), then moved into place."""
    partial = path.with_name(path.name + ".partial")
    partial.unlink(missing_ok=True)  # a run that died left it, perhaps with another mode
    with open(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode), "w", newline="", encoding="utf-8",
              errors="backslashreplace") as f:
        write(f)
    partial.replace(path)


def _cells_text(scores: dict[str, float]) -> str:
    """grades.csv's ``cells``: ``grade_id=points`` for each graded cell, ``;`` between them."""
    return ";".join(f"{k}={v:g}" for k, v in scores.items())


def _cell_scores(text: str) -> dict[str, float]:
    """The scores of a ``cells`` value (`_cells_text`)."""
    return {k: float(v) for k, v in (cell.split("=", 1) for cell in text.split(";") if "=" in cell)}


def _csv_row(row: dict) -> dict:
    values = {**row, "flags": ";".join(row["flags"]), "cells": _cells_text(row["cell_scores"])}
    return {k: _cell(values[k]) for k in CSV_COLUMNS}


def _check_rows(row: dict) -> list[dict]:
    found = []
    for check in row.get("checks", ()):
        values = {"student_id": row["student_id"], "assignment": row["assignment"], **check,
                  "hidden": int(check["hidden"]), "passed": int(check["passed"]), "mistake": check["mistake"] or "",
                  "delegated": ";".join(check["delegated"]), "stopped": int(check.get("stopped", False))}
        found.append({k: _cell(values[k]) for k in CHECK_COLUMNS})
    return found


def write_csv(path: Path, rows: list[dict]) -> None:
    """``grades.csv`` of ``rows`` (as grading returns them), replacing what is there."""
    _write_dicts(path, CSV_COLUMNS, [_csv_row(row) for row in rows])


def _write_dicts(path: Path, columns: list[str], rows: list[dict]) -> None:
    def write(f):
        writer = csv.DictWriter(f, columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    write_atomically(path, write)


def refresh_scores(path: Path, db_url: str) -> int:
    """Bring ``grades.csv`` at ``path`` in step with the gradebook: each row's score (after the late penalty), the
    penalty and the cells as nbgrader holds them now, scores given by hand in formgrader included. Returns the rows
    changed."""
    from intake.collection import exportable_id
    from .gradebook import recorded

    try:
        rows = _read_dicts(path)
        graded = [(r, _cell_scores(r["cells"])) for r in rows if exportable_id(r["student_id"]) and r["assignment"]
                  and r["cells"] is not None and float(r["score"]) >= 0]  # the others never reached the gradebook
    except (UnicodeDecodeError, csv.Error, KeyError, TypeError, ValueError):
        return 0  # not a grades.csv this module wrote: the report says what is wrong with it
    held = recorded(db_url, [_submission(r) for r, _ in graded])
    changed = 0
    for row, cells in graded:
        if (entry := held.get(_submission(row))) is None:
            continue
        cells = _cells_text(entry.cell_scores(cells))
        if not (_is(row["score"], entry.final_score) and _is(row.get("late_penalty"), entry.taken_off)
                and cells == row["cells"]):
            changed += 1
            row.update(score=str(entry.final_score), late_penalty=str(entry.taken_off), cells=cells)  # 10.0, 8.5
    if changed:
        _write_dicts(path, CSV_COLUMNS, rows)
    return changed


def _is(text: str | None, value: float) -> bool:
    """Does a CSV value say ``value`` (``10`` and ``10.0`` alike; an empty or missing value says nothing)?"""
    try:
        return float(text) == value
    except (TypeError, ValueError):
        return False


def _read_dicts(path: Path) -> list[dict]:
    """The rows of a CSV this module wrote (none if there is no file)."""
    try:
        with path.open(newline="", encoding="utf-8") as f:
            return list(csv.DictReader(f))
    except FileNotFoundError:
        return []


_ERROR_HEADER = re.compile(r"^== (.*) / ([^/\n]*)\n", re.M)


def _read_errors(path: Path) -> dict[tuple[str, str], str]:
    """The sections of a grader-errors.log, by (student as shown, assignment)."""
    try:
        text = path.read_text(encoding="utf-8", errors="backslashreplace")
    except FileNotFoundError:
        return {}
    heads = list(_ERROR_HEADER.finditer(text))
    ends = [h.start() for h in heads[1:]] + [len(text)]
    return {(h[1], h[2]): text[h.start():end] for h, end in zip(heads, ends)}


class ClassRecords:
    """What OUT holds of the class, read once; `merge` puts a run's rows in and writes it all back."""

    def __init__(self, out: Path):
        self.out = out
        self.grades = _read_dicts(out / "grades.csv")
        self.checks = _read_dicts(out / "checks.csv")
        self.errors = _read_errors(out / ERRORS_LOG)
        self.record = self._read_record()

    def _read_record(self) -> dict[tuple[str, str], dict]:
        """(student_id, assignment) → {"code": grade_id → source, "flags": [...]}, as last graded."""
        try:
            data = json.loads((self.out / RECORD).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as error:
            print(f"{self.out / RECORD} cannot be read ({error}): the rows graded before compare with no one "
                  "until they are graded again", file=sys.stderr)
            return {}
        if not isinstance(data, dict) or data.get("version") != RECORD_VERSION:
            return {}
        return {(entry["student_id"], entry["assignment"]): {"code": entry.get("code", {}),
                                                             "flags": entry.get("flags", [])}
                for entry in data.get("rows", []) if isinstance(entry, dict)}

    def class_rows(self, rows: list[dict]) -> list[dict]:
        """The rows similarity is computed over: this run's ``rows`` and everyone else's latest."""
        graded = {_submission(r) for r in rows}
        kept = [{"student_id": s, "assignment": a, "code": entry["code"]}
                for (s, a), entry in self.record.items() if (s, a) not in graded]
        return [*rows, *kept]

    def merge(self, rows: list[dict], similar: dict[tuple[str, str], set[str]]) -> None:
        """Put this run's ``rows`` in, give each row its ``similar-to:`` flags from ``similar``, write OUT's files."""
        def with_similarity(flags: list[str], key: tuple[str, str]) -> list[str]:
            return sorted({*(f for f in flags if not is_similarity(f)), *similar.get(key, ())})

        graded = {_submission(r) for r in rows}
        for row in rows:
            row["flags"] = with_similarity(row["flags"], _submission(row))
            self.record[_submission(row)] = {"code": row.get("code", {}), "flags": row["flags"]}
        # everyone else's rows stay; the flags of those the record has are theirs again, with today's similarity
        for key, entry in self.record.items():
            if key not in graded and key in similar:  # (an assignment gone from the course keeps what it had)
                entry["flags"] = with_similarity(entry["flags"], key)
        written = {(as_written(s), as_written(a)) for s, a in graded}
        flags = {(as_written(s), as_written(a)): entry["flags"] for (s, a), entry in self.record.items()}
        grades = []
        for old in self.grades:
            key = _submission(old)
            if key not in written:
                grades.append({**old, "flags": _cell(";".join(flags[key]))} if key in flags else old)
        grades += [_csv_row(row) for row in rows]
        grades.sort(key=_submission)
        checks = [c for c in self.checks if _submission(c) not in written]
        checks += [check for row in rows for check in _check_rows(row)]
        checks.sort(key=_submission)  # stable: a notebook's order
        self._write_record()
        _write_dicts(self.out / "grades.csv", CSV_COLUMNS, grades)
        _write_dicts(self.out / "checks.csv", CHECK_COLUMNS, checks)
        graded_as_shown = {(shown(s), a) for s, a in graded}
        write_errors(self.out / ERRORS_LOG, rows,
                     {key: text for key, text in self.errors.items() if key not in graded_as_shown})

    def _write_record(self) -> None:
        entries = [{"student_id": s, "assignment": a, **entry} for (s, a), entry in sorted(self.record.items())]
        record = {"version": RECORD_VERSION, "rows": entries}
        # the students' code: for the instructor only
        write_atomically(self.out / RECORD, lambda f: json.dump(record, f), 0o600)


def _submission(row: dict) -> tuple[str, str]:
    """A row's (student_id, assignment): the submission whose rows a run replaces."""
    return row.get("student_id", ""), row.get("assignment", "")


def write_errors(path: Path, rows: list[dict], kept: dict[tuple[str, str], str] | None = None) -> None:
    """Write the grader's own failures, each traceback under its student and assignment (``rows``' and ``kept``)."""
    sections = dict(kept or {})
    failed = [r for r in rows if r.get("errors")]
    for r in failed:
        student, assignment = shown(r["student_id"]), r["assignment"]
        sections[(student, assignment)] = f"== {student} / {assignment}\n" + "\n".join(r["errors"]) + "\n"
    if not sections:
        path.unlink(missing_ok=True)
        return
    write_atomically(path, lambda f: f.write("".join(text for _, text in sorted(sections.items()))))
    if failed:
        notebooks = f"{len(failed)} notebook{'' if len(failed) == 1 else 's'}"
        print(f"the grader failed on {notebooks}: the tracebacks are in {path}", file=sys.stderr)
