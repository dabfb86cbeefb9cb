"""When each submission was handed in, as the late policy reads it: the instructor's record (an LMS's export,
`read_submission_times`), the times a download carries, else the student's own ``timestamp.txt``, flagged as their
claim (`settle_times`). The rules: autograde/README.md ("Submission times").
"""
from __future__ import annotations

import csv
import unicodedata
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

if TYPE_CHECKING:
    from .collection import Submission

__all__ = ["SubmissionTimes", "TimesError", "parse_time", "read_submission_times", "check_zone", "submission_key",
           "settle_times", "unmatched_times", "with_times", "nbgrader_time", "LMS_LATE"]

LMS_LATE = "lms-late"  # Canvas named the file LATE: a marker, not a time


class TimesError(ValueError):
    """The instructor's record of submission times, or a time zone, cannot be read."""


@dataclass(frozen=True)
class SubmissionTimes:
    """The instructor's record of when each submission was handed in (`read_submission_times`)."""
    source: str  # the file, as the instructor named it
    times: dict[tuple[str, str], tuple[str, int]]  # (student_id, assignment), NFC -> (nbgrader's timestamp, line)


TIME_COLUMNS = ("student_id", "assignment", "time")
# What LMS exports write besides ISO 8601: Canvas ("Nov 20, 2026 5:03pm"), Moodle ("Friday, 20 November 2026, 5:03 PM")
TIME_FORMATS = ("%b %d, %Y %I:%M%p", "%b %d, %Y %I:%M %p", "%B %d, %Y %I:%M%p", "%B %d, %Y %I:%M %p",
                "%b %d, %Y at %I:%M%p", "%b %d, %Y at %I:%M %p", "%A, %d %B %Y, %I:%M %p", "%d %B %Y, %I:%M %p",
                "%A, %d %B %Y, %H:%M", "%d %B %Y, %H:%M")
NBGRADER_TIME = "%Y-%m-%d %H:%M:%S.%f UTC"  # what nbgrader's submit writes, and parse_utc reads back


def parse_time(text: str, zone: str = "UTC") -> datetime:
    """``text`` as an aware datetime: ISO 8601 (nbgrader's ``... UTC`` too) or one of `TIME_FORMATS`; a time
    without a zone is in ``zone``. Raises ValueError if it is none of these or has no time of day."""
    text = " ".join(text.split())
    given = text[:-4] + "+00:00" if text.endswith((" UTC", " GMT")) else text
    try:
        when = datetime.fromisoformat(given)
    except ValueError:
        when = None
        for form in TIME_FORMATS:
            try:
                when = datetime.strptime(given, form)
                break
            except ValueError:
                continue
    if when is None or ":" not in given:  # a date alone is no time: "2026-11-20" would be midnight
        raise ValueError(f"cannot read {text!r} as a time (ISO 8601 such as 2026-11-20 17:03:00 or "
                         "2026-11-20T17:03:00Z, or as Canvas or Moodle write it: Nov 20, 2026 5:03pm)")
    return when if when.tzinfo else when.replace(tzinfo=ZoneInfo(zone))


def nbgrader_time(when: datetime) -> str:
    """An aware ``when`` as nbgrader's submit writes a time, in UTC (its ``parse_utc`` reads it back)."""
    return when.astimezone(timezone.utc).strftime(NBGRADER_TIME)


def read_submission_times(path: Path, zone: str = "UTC") -> SubmissionTimes:
    """The instructor's ``student_id, assignment, time`` file (header row; extra columns ignored; a blank time is
    none). Raises TimesError, naming the line, for anything it cannot read or two times for one submission."""
    check_zone(zone)
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:  # utf-8-sig: Excel's "CSV UTF-8" starts with a BOM
            rows = list(csv.reader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        why = getattr(error, "strerror", None) or error
        raise TimesError(f"cannot read the submission times {path}: {why}") from None
    header = [cell.strip().lower() for cell in rows[0]] if rows else []
    if missing := [c for c in TIME_COLUMNS if c not in header]:
        raise TimesError(f"{path} line 1: no column {', '.join(missing)} (the header must name "
                         f"{', '.join(TIME_COLUMNS)}; it names {', '.join(header) or 'nothing'})")
    student_at, assignment_at, time_at = (header.index(c) for c in TIME_COLUMNS)
    times: dict[tuple[str, str], tuple[str, int]] = {}
    for line, row in enumerate(rows[1:], start=2):
        cells = [*row, *[""] * len(header)]
        key, text = submission_key(cells[student_at].strip(), cells[assignment_at].strip()), cells[time_at].strip()
        if not text:  # a blank line, or no time for it
            continue
        if not all(key):
            raise TimesError(f"{path} line {line}: no student_id or assignment")
        try:
            stamp = nbgrader_time(parse_time(text, zone))
        except ValueError as error:
            raise TimesError(f"{path} line {line}: {error}") from None
        if key in times and times[key][0] != stamp:
            raise TimesError(f"{path} line {line}: a second time for {key[0]}, {key[1]} (line {times[key][1]} "
                             "has another): keep the one that counts")
        times.setdefault(key, (stamp, line))
    return SubmissionTimes(str(path), times)


def check_zone(zone: str) -> None:
    """Raises TimesError, saying what a zone's name looks like, if ``zone`` names none."""
    try:
        ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        raise TimesError(f"unknown time zone {zone!r} (a name such as UTC or Europe/Berlin)") from None


def submission_key(student: str, assignment: str) -> tuple[str, str]:
    """A submission as the record names it, in NFC: macOS unpacks ``ë`` as NFD, an LMS's export writes NFC."""
    return unicodedata.normalize("NFC", student), unicodedata.normalize("NFC", assignment)


def settle_times(submissions: list[Submission], record: SubmissionTimes | None) -> list[Submission]:
    """Each submission with the time its late penalty uses and a flag saying whose: the instructor's ``record``
    (a missing one: ``no-timestamp``), else the student's, flagged ``time-unverified`` (or ``no-timestamp``).
    A time from the record settles Canvas's LATE marker: the late policy decides with it (flag ``late``)."""
    settled = []
    for sub in submissions:
        flags = list(sub.flags)
        if record is not None:
            stamp = record.times.get(submission_key(sub.student_id, sub.assignment), (None, 0))[0]
            flags = [f for f in flags if f != "bad-timestamp" and not (stamp and f == LMS_LATE)]
            settled.append(replace(sub, timestamp=stamp, flags=tuple(flags if stamp else [*flags, "no-timestamp"])))
        elif sub.timestamp:
            settled.append(replace(sub, flags=(*flags, "time-unverified")))
        else:
            settled.append(replace(sub, flags=tuple(flags if "bad-timestamp" in flags else [*flags, "no-timestamp"])))
    return settled


def unmatched_times(submissions: list[Submission], record: SubmissionTimes) -> list[tuple[str, str, int]]:
    """The record's (student_id, assignment, line) that no submission has (line 0: the download's own time)."""
    found = {submission_key(s.student_id, s.assignment) for s in submissions}
    return sorted((*key, line) for key, (_, line) in record.times.items() if key not in found and line)


def with_times(record: SubmissionTimes | None, times: dict[tuple[str, str], str],
               source: str) -> SubmissionTimes | None:
    """The instructor's ``record`` with the times an LMS download recorded (Blackboard's); the record's win."""
    if not times:
        return record
    given = {submission_key(*key): (stamp, 0) for key, stamp in times.items()}
    return SubmissionTimes(record.source if record else source, {**given, **(record.times if record else {})})
