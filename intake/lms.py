"""Reading the names an LMS gives the files of a download: who handed in what, and when.

As nbgrader's ``zip_collect``, one pattern of named groups per LMS (`PATTERNS`: Canvas, Moodle, Blackboard).
Canvas's LATE carries no time (flag ``lms-late``); Blackboard's attempt time is the LMS's, used by the late
policy. The layouts and how the assignment is told: autograde/README.md ("An LMS's download").
"""
from __future__ import annotations

import csv
import re
import unicodedata
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

__all__ = ["LAYOUTS", "Found", "parse", "assignment_of", "read_mapping", "mapped", "EXPECTED", "MappingError"]

LAYOUTS = ("nbgrader", "canvas", "moodle", "blackboard")
LMS_LAYOUTS = ("blackboard", "moodle", "canvas")  # as a name is tried: those whose names say so before Canvas's

PATTERNS = {
    "blackboard": re.compile(r"^(?P<hint>.+?)_(?P<name>[^_/]+)_attempt_(?P<time>\d{4}(?:-\d{2}){5})(?:_(?P<file>[^/]+))?$"),
    "moodle": re.compile(r"^(?P<name>[^/]+?)_(?P<number>\d+)_assignsubmission_file_(?:/(?:[^/]+/)*)?(?P<file>[^/]+)$"),
    "canvas": re.compile(r"^(?P<name>[^_/]+)_(?:(?P<late>late)_)?(?P<number>\d+)_(?P<submission>\d+)_(?P<file>[^/]+)$",
                         re.IGNORECASE),
}
"""Each LMS's names, as this module reads them (a path in the download, ``/`` between folders)."""

EXPECTED = {
    "nbgrader": "<student>/<assignment>/<assignment>.ipynb (nbgrader's submitted/)",
    "canvas": "<name>_<userid>_<submissionid>_<file>.ipynb (Canvas)",
    "moodle": "<Full Name>_<id>_assignsubmission_file_/<file>.ipynb (Moodle)",
    "blackboard": "<assignment>_<user>_attempt_<YYYY-MM-DD-HH-MM-SS>_<file>.ipynb (Blackboard)",
}
"""What each layout looks like, for the line that says a download is laid out otherwise."""

BLACKBOARD_TIME = "%Y-%m-%d-%H-%M-%S"


class MappingError(ValueError):
    """The ``--mapping`` file cannot be read."""


@dataclass(frozen=True)
class Found:
    """One notebook of an LMS download, as its name tells."""
    path: str  # within the download
    layout: str
    name: str  # the student as the LMS names them: Canvas's "doejane", Moodle's "Jane Doe", Blackboard's user
    number: str  # the LMS's number for them ("" for Blackboard): Canvas's user id, Moodle's participant id
    file: str  # the name the student gave the file
    hint: str = ""  # the LMS's name for the assignment (Blackboard's)
    time: datetime | None = None  # naive: in the download's time zone (Blackboard's attempt)
    late: bool = False  # Canvas's LATE marker

    @property
    def copy(self) -> int:
        """Canvas renames a student's second upload of a name ``name-1.ipynb``: the later, the higher."""
        match = re.search(r"-(\d+)\.ipynb$", self.file)
        return int(match.group(1)) if match else 0


def parse(layout: str, path: str) -> Found | None:
    """``path`` (a notebook in a download) read as ``layout`` names it; None if it is not so named."""
    match = PATTERNS[layout].match(path)
    if not match or not match.group("file") or not match.group("file").lower().endswith(".ipynb"):
        return None
    groups = match.groupdict()
    time = None
    if groups.get("time"):
        try:
            time = datetime.strptime(groups["time"], BLACKBOARD_TIME)
        except ValueError:  # 2026-13-45-…: not a time, so not Blackboard's name
            return None
    return Found(path, layout, groups["name"].strip(), groups.get("number") or "", groups["file"],
                 groups.get("hint") or "", time, bool(groups.get("late")))


_COPY_SUFFIX = re.compile(r"(?:-\d+|\s*\(\d+\))+$")  # Canvas's "-1", a browser's " (1)"
_CHAPTER = re.compile(r"(?:^|[^a-z0-9])ch(?:apter)?[\s_-]*0*(\d{1,2})(?![0-9])")


def assignment_of(file: str, hint: str, known: list[str]) -> str | None:
    """The assignment a notebook named ``file`` is for: the longest known id in its name (case and Canvas's
    or a browser's copy number aside), else the one assignment of the chapter its name or ``hint`` names."""
    stem = _COPY_SUFFIX.sub("", re.sub(r"\.ipynb$", "", file, flags=re.IGNORECASE)).lower()
    named = [a for a in known if a.lower() in stem]
    if named:
        return max(named, key=len)
    for text in (stem, hint.lower()):
        match = _CHAPTER.search(text)
        if match:
            of_chapter = [a for a in known if a.lower().startswith(f"ch{int(match.group(1)):02d}_")]
            if len(of_chapter) == 1:
                return of_chapter[0]
    return None


def read_mapping(path: Path) -> dict[str, str]:
    """The instructor's ``lms_name, student_id`` file: the student id each LMS name (or number) is graded under.
    Raises MappingError, naming the line, if it cannot be read, lacks a column or maps a name to two ids."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            rows = list(csv.reader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise MappingError(f"cannot read the mapping {path}: {getattr(error, 'strerror', None) or error}") from None
    header = [cell.strip().lower() for cell in rows[0]] if rows else []
    if "lms_name" not in header or "student_id" not in header:
        raise MappingError(f"{path} line 1: the header must name the columns lms_name, student_id "
                           f"(it names {', '.join(header) or 'nothing'})")
    name_at, id_at = header.index("lms_name"), header.index("student_id")
    mapping: dict[str, tuple[str, int]] = {}
    for line, row in enumerate(rows[1:], start=2):
        cells = [*row, *[""] * len(header)]
        name, student = _nfc(cells[name_at]), _nfc(cells[id_at])
        if not name and not student:
            continue
        if not name or not student:
            raise MappingError(f"{path} line {line}: an lms_name without a student_id, or a student_id without one")
        if name in mapping and mapping[name][0] != student:
            raise MappingError(f"{path} line {line}: {name} is mapped to {mapping[name][0]} on line "
                               f"{mapping[name][1]} already")
        mapping.setdefault(name, (student, line))
    return {name: student for name, (student, _) in mapping.items()}


def _nfc(text: str) -> str:
    return unicodedata.normalize("NFC", " ".join(text.split()))


def mapped(mapping: dict[str, str], name: str, number: str = "") -> str | None:
    """The student id ``mapping`` gives the LMS's ``name`` (or its ``number``), case aside; None if none."""
    for key in (_nfc(name), number):
        if key and key in mapping:
            return mapping[key]
    folded = {k.casefold(): v for k, v in mapping.items()}
    return folded.get(_nfc(name).casefold())
