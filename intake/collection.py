"""Finding the submissions to grade: nbgrader's layout, in a folder or a .zip, or an LMS's download. What a
student hands in costs only that student's row when refused (when each was handed in: `intake.submission_times`);
the rules: autograde/README.md ("Collection", "Student ids").
"""
from __future__ import annotations

import contextlib
import os
import posixpath
import shutil
import stat
import unicodedata
import zipfile
import zlib
from dataclasses import dataclass, field, replace
from datetime import datetime
from itertools import dropwhile
from pathlib import Path
from zoneinfo import ZoneInfo

from . import lms
from .submission_times import LMS_LATE, nbgrader_time

__all__ = ["Submission", "find_submissions", "extract_zip", "CollectionError", "exportable_id", "default_id",
           "collect", "Collected"]


class CollectionError(ValueError):
    """The submissions cannot be read at all (not a folder, not a zip)."""


@dataclass(frozen=True)
class Submission:
    student_id: str
    assignment: str
    path: Path | None  # None: no notebook to grade (missing, refused or too large)
    flags: tuple[str, ...] = field(default=())
    timestamp: str | None = None  # when it was handed in, as nbgrader reads it (see `settle_times` for whose)
    secret: str | None = None  # submission_secret.txt


MACOS_FORKS = "__MACOSX"
EXCHANGE_FILES = ("timestamp.txt", "submission_secret.txt")  # what nbgrader's exchange adds beside a notebook
MAX_STUDENT_MB = 100.0  # a student's files together, all assignments (--max-submission-mb)
MAX_STUDENT_BYTES = int(MAX_STUDENT_MB * 2**20)
ENTRY_BYTES = 4096  # what each folder, link or file unpacked from a zip costs its student besides its bytes: a block
SMALL_TEXT_BYTES = 256  # the most of timestamp.txt or submission_secret.txt that is read
TOO_LARGE = "submission-too-large"
UNREADABLE = (zipfile.BadZipFile, NotImplementedError, RuntimeError, OSError, EOFError, zlib.error, ValueError)
"""What unpacking a corrupt, encrypted or oddly compressed zip member raises (ValueError: a link's target with a
NUL byte)."""


def _parts(name: str) -> list[str]:
    """A path in a zip or a download (``/`` between folders) as its parts, without empty and ``.`` ones."""
    return [p for p in name.split("/") if p not in ("", ".")]


def _not_a_student(name: str) -> bool:
    """A hidden folder, or exactly ``__MACOSX`` (macOS's resource forks in a zip): no student's."""
    return name.startswith(".") or name == MACOS_FORKS


def _inside(path: Path, folder: Path) -> bool:
    """Does ``path``, with every symlink followed, stay under ``folder`` (taken literally)?"""
    return os.path.realpath(path).startswith(str(folder) + os.sep)


def shown(name: str) -> str:
    """A folder's name as it may reach a terminal or a log: each unprintable character written as its code."""
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in name)


def _open_zip(archive: Path) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError, ValueError) as error:  # ValueError: a name that is not UTF-8
        raise CollectionError(f"{archive} is not a readable zip archive ({error})") from None


def find_submissions(root: Path, assignments: list[str], max_bytes: int, flags: dict[str, list[str]] | None = None,
                     max_student_bytes: int = MAX_STUDENT_BYTES) -> list[Submission]:
    """Every ``<student>/<assignment>/`` folder under ``root`` for a known assignment, with ``flags`` (by student)
    from extraction; a student over ``max_student_bytes`` has none read (``submission-too-large``)."""
    budget = max(max_student_bytes, max_bytes)
    found = []
    for student in _student_folders(Path(os.path.realpath(root))):
        folders = sorted(p for p in student.iterdir() if p.name in assignments)
        own = (flags or {}).get(student.name, [])
        if TOO_LARGE not in own and _notebook_bytes(student, folders) > budget:
            own = [*own, TOO_LARGE]
        found += [Submission(student.name, folder.name, None, tuple(own)) if TOO_LARGE in own
                  else _submission(student, folder, own, max_bytes) for folder in folders]
    return found


def _notebook_bytes(folder: Path, assignments: list[Path]) -> int:
    """The bytes of the notebooks directly in ``folder``'s real assignment folders, links not followed."""
    if folder.is_symlink():
        return 0
    total = 0
    for assignment in assignments:
        if assignment.is_symlink() or not assignment.is_dir():
            continue
        for entry in os.scandir(assignment):
            if entry.name.endswith(".ipynb") and entry.is_file(follow_symlinks=False):
                total += entry.stat(follow_symlinks=False).st_size
    return total


def without_assignments(root: Path, assignments: list[str]) -> list[str]:
    """The student folders under ``root`` that hold no assignment folder: no row comes from them."""
    return [student.name for student in _student_folders(Path(os.path.realpath(root)))
            if not any(child.name in assignments for child in student.iterdir())]


def _student_folders(base: Path) -> list[Path]:
    """The folders under ``base`` that are students' (a symlinked one is refused later, by `_submission`)."""
    return sorted(p for p in base.iterdir() if not _not_a_student(p.name) and p.is_dir())


def _submission(folder: Path, assignment_dir: Path, flags: list[str], max_bytes: int) -> Submission:
    student, assignment = folder.name, assignment_dir.name
    if not _inside(assignment_dir, folder) or not assignment_dir.is_dir():
        return Submission(student, assignment, None, (*flags, "symlink-outside"))
    notebook = assignment_dir / f"{assignment}.ipynb"
    if not os.path.lexists(notebook):
        others = sorted(assignment_dir.glob("*.ipynb"))
        notebook = others[0] if len(others) == 1 else None
    if notebook is None:
        return Submission(student, assignment, None, (*flags, "missing-notebook"))
    if not _inside(notebook, folder):
        return Submission(student, assignment, None, (*flags, "symlink-outside"))
    if not notebook.is_file():  # a folder, or a pipe or device that reading would wait on or never finish
        return Submission(student, assignment, None, (*flags, "missing-notebook"))
    if notebook.stat().st_size > max_bytes:
        return Submission(student, assignment, None, (*flags, "notebook-too-large"))
    timestamp, secret = (_small_text(assignment_dir / name, folder) for name in EXCHANGE_FILES)
    if timestamp is not None and not _is_timestamp(timestamp):
        flags, timestamp = [*flags, "bad-timestamp"], None
    return Submission(student, assignment, notebook, tuple(flags), timestamp, secret)


def _small_text(path: Path, folder: Path) -> str | None:
    """The stripped text of a small regular file in ``folder``; "" if it is something else, None if absent."""
    if not os.path.lexists(path):
        return None
    if not _inside(path, folder) or not path.is_file():
        return ""
    with path.open("rb") as f:
        data = f.read(SMALL_TEXT_BYTES + 1)
    try:
        return data.decode().strip() if len(data) <= SMALL_TEXT_BYTES else ""
    except UnicodeDecodeError:
        return ""


def _is_timestamp(text: str) -> bool:
    from nbgrader.utils import parse_utc

    try:
        parse_utc(text)
    except Exception:  # whatever dateutil raises on text a student wrote
        return False
    return bool(text)


def extract_zip(archive: Path, into: Path, assignments: list[str], max_bytes: int,
                max_student_bytes: int = MAX_STUDENT_BYTES) -> tuple[Path, dict[str, list[str]]]:
    """Unzip what is safe: the folder holding the student folders, and flags by student.

    Only what grading reads is unpacked; an unsafe member (absolute or ``..`` path, through or over a link or
    an earlier member, unreadable, a link out of its student's folder, too large) is skipped, flagged. A student
    over ``max_student_bytes`` (each entry `ENTRY_BYTES` plus its bytes, counted while unpacking) keeps only empty
    assignment folders, flagged ``submission-too-large``. Raises CollectionError if the archive cannot be read."""
    into = Path(os.path.realpath(into))
    budget = max(max_student_bytes, max_bytes)
    flags: dict[str, list[str]] = {}
    spent: dict[str, int] = {}
    handed_in: dict[str, set[str]] = {}  # student -> the known assignments they have a member in
    with _open_zip(archive) as zf:
        top = _wrapper([m.filename for m in zf.infolist()], assignments)
        for member in zf.infolist():
            parts = _parts(member.filename)
            inner = parts[len(top):]  # within the wrapper: student, assignment, file
            student = inner[0] if inner else ""
            if len(inner) > 1 and inner[1] in assignments and ".." not in parts:
                handed_in.setdefault(student, set()).add(inner[1])
            if TOO_LARGE in flags.get(student, ()):
                continue  # over budget: nothing more of theirs is unpacked
            target = into.joinpath(*parts)
            outside = member.filename.startswith("/") or ".." in parts or not parts
            if outside or _unsafe_target(target, into, member.is_dir()):
                problem, cost = "unsafe-zip-member", 0
            else:
                read = len(inner) == 3 and (inner[2].endswith(".ipynb") or inner[2] in EXCHANGE_FILES)
                problem, cost = _unpack(zf, member, target, read, "/".join(parts[:len(top) + 1]),
                                        budget - spent.get(student, 0), max_bytes)
            if problem:
                flags.setdefault(student, []).append(problem)
            spent[student] = spent.get(student, 0) + cost
    folder = into.joinpath(*top)
    for student, found in flags.items():
        if student and TOO_LARGE in found:
            _keep_only_assignment_folders(folder / student, handed_in.get(student, set()))
    return folder, {s: f for s, f in flags.items() if s}


def _unpack(zf: zipfile.ZipFile, member: zipfile.ZipInfo, target: Path, read: bool, home: str, left: int,
            max_bytes: int) -> tuple[str | None, int]:
    """Unpack ``member`` (its path safe) to ``target`` if it is a folder, a link, or a file grading reads (``read``):
    (what went wrong, what it cost of the ``left`` bytes of its student's budget). A link must stay in its
    student's folder ``home``; a notebook over ``max_bytes`` is refused whole."""
    link = stat.S_ISLNK(member.external_attr >> 16)
    if not (link or read or member.is_dir()):
        return None, 0
    left -= ENTRY_BYTES  # for its contents, once its own entry is paid
    written, problem = 0, None
    try:
        if link:
            with zf.open(member) as source:  # a link longer than a path may be: os.symlink refuses it
                to = source.read(ENTRY_BYTES + 1).decode(errors="replace")
            resolved = posixpath.normpath(posixpath.join(posixpath.dirname(member.filename), to))
            if to.startswith("/") or not resolved.startswith(home + "/"):
                return "symlink-outside", 0
        if left < 0:
            return TOO_LARGE, 0
        target.parent.mkdir(parents=True, exist_ok=True)
        if link:
            os.symlink(to, target)
        elif member.is_dir():
            target.mkdir(exist_ok=True)
        elif target.name.endswith(".ipynb"):
            written = _copy_at_most(zf, member, target, min(max_bytes, left))
            problem = None if written is not None else TOO_LARGE if left < max_bytes else "file-too-large"
        else:  # read only when small (`_small_text`): no more of it is unpacked than tells it is not
            written = _copy_at_most(zf, member, target, SMALL_TEXT_BYTES + 1, cut=True)
            problem = TOO_LARGE if written > left else None
    except UNREADABLE:
        problem = "unsafe-zip-member"
    if problem:
        if os.path.lexists(target):
            target.unlink()
        return problem, 0
    return None, ENTRY_BYTES + written


def _keep_only_assignment_folders(student: Path, assignments: set[str]) -> None:
    """Empty an over-budget student's folder, leaving an empty folder per assignment they handed in."""
    if student.is_symlink():
        student.unlink()
    elif student.exists():
        shutil.rmtree(student)
    student.mkdir(parents=True)
    for assignment in assignments:
        (student / assignment).mkdir()


def _unsafe_target(target: Path, into: Path, folder: bool) -> bool:
    """Would writing ``target`` go through a symlink, onto one, or onto a file already there? An earlier link
    member may point anywhere once followed, so every folder on the way must be a real one."""
    parent = target.parent
    while parent != into and not os.path.lexists(parent):
        parent = parent.parent
    if os.path.realpath(parent) != str(parent) or os.path.islink(target):
        return True
    return os.path.lexists(target) and not (folder and target.is_dir())


def _copy_at_most(zf: zipfile.ZipFile, member: zipfile.ZipInfo, target: Path, max_bytes: int,
                  cut: bool = False) -> int | None:
    """Unpack ``member`` to ``target``: the bytes written, or None past ``max_bytes`` (counted while unpacking,
    whatever the header claims); with ``cut``, its first ``max_bytes``."""
    written = 0
    with zf.open(member) as source, open(target, "wb") as sink:
        while chunk := source.read(min(1 << 20, max_bytes + 1 - written)):
            written += len(chunk)
            if written > max_bytes:
                if cut:
                    sink.write(chunk[:len(chunk) - (written - max_bytes)])
                    return max_bytes
                return None
            sink.write(chunk)
    return written


def _student_paths(names: list[str]) -> list[tuple[list[str], bool]]:
    """The paths among ``names`` (a zip's members, a folder's `_listing`) that may be a student's, as parts, each
    with whether it is a folder's: none absolute, through ``..``, hidden or macOS's."""
    paths = [(_parts(name), name.endswith("/")) for name in names if not name.startswith("/")]
    return [(parts, folder) for parts, folder in paths if parts and ".." not in parts and not _not_a_student(parts[0])]


def _wrapper(names: list[str], assignments: list[str]) -> list[str]:
    """``[folder]`` when every path in ``names`` that may be a student's is in that one folder, and it is neither
    a student's (no folder in it is named after an assignment) nor a Moodle submission's; else ``[]``."""
    paths = [parts for parts, _ in _student_paths(names)]
    firsts = {parts[0] for parts in paths}
    if len(firsts) != 1:
        return []
    (first,) = firsts
    inner = {parts[1] for parts in paths if len(parts) > 1}
    return [] if inner & set(assignments) or lms.PATTERNS["moodle"].match(f"{first}/x.ipynb") else [first]


# ---------------------------------------------------------------- student ids

ID_PUNCTUATION = "._-@+"
FORMULA_START = "=+-@"


def _combining(char: str) -> bool:
    return unicodedata.category(char) in ("Mn", "Mc")


def _id_char(char: str) -> bool:
    """A letter of any script, a digit, ``._-@+`` or a combining mark."""
    category = unicodedata.category(char)
    return category[0] == "L" or category in ("Nd", "Mn", "Mc") or char in ID_PUNCTUATION


def exportable_id(name: str) -> bool:
    """May ``name`` reach nbgrader's gradebook? An allow-list: letters of any script, digits, ``._-@+``, a
    combining mark after the first character; never ``=``, ``+``, ``-`` or ``@`` first (README: "Student ids")."""
    return bool(name) and name[0] not in FORMULA_START and not _combining(name[0]) and all(map(_id_char, name))


def default_id(name: str, number: str = "") -> str:
    """A student id from an LMS's name for a student when no mapping gives one: spaces become ``_``, what is not
    exportable goes ("Seán O'Brien" → ``Seán_OBrien``); the LMS's ``number`` for them when nothing is left."""
    kept = "".join(filter(_id_char, "_".join(unicodedata.normalize("NFC", name).split())))
    return "".join(dropwhile(lambda c: c in FORMULA_START or _combining(c), kept)) or number


# ---------------------------------------------------------------- layouts: nbgrader's, and LMS downloads

@dataclass(frozen=True)
class Collected:
    """What `collect` found: submissions, the download's own UTC times, notes for the instructor, the layout."""
    submissions: list[Submission]
    times: dict[tuple[str, str], str]
    notes: list[str]
    layout: str


def collect(source: Path, into: Path, assignments: list[str], max_bytes: int,
            max_student_bytes: int = MAX_STUDENT_BYTES, layout: str = "auto",
            mapping: dict[str, str] | None = None, zone: str = "UTC") -> Collected:
    """The submissions in ``source`` (a folder or a .zip), nbgrader's layout or an LMS's (``layout``; ``auto``: as
    the names show), unpacked into ``into``; ``mapping`` names LMS names' ids, ``zone`` (checked by the caller) is
    the download's times'. Raises CollectionError, in one line saying what was expected and found: nothing to
    grade, mixed layouts, an unnamed notebook, a mapping clash."""
    if source.suffix.lower() == ".zip" and source.is_file():
        with _open_zip(source) as zf:
            entries = [m.filename for m in zf.infolist()]
    elif source.is_dir():
        entries = _listing(source)
    else:
        raise CollectionError(f"{source} is neither a folder nor a .zip of one")
    seen = _survey(entries, assignments, layout)
    expected = lms.LAYOUTS if layout == "auto" else (layout,)
    wanted = " or ".join(lms.EXPECTED[name] for name in expected)
    if seen.unmatched:
        more = f" (and {len(seen.unmatched) - 1} more)" if len(seen.unmatched) > 1 else ""
        raise CollectionError(f"{source}: cannot tell whose notebook {shown(seen.unmatched[0])}{more} is: expected "
                              f"{wanted}")
    found = [name for name in expected if (seen.students if name == "nbgrader" else seen.lms.get(name))]
    if len(found) > 1:
        raise CollectionError(f"{source} mixes layouts ({', '.join(found)}): grade each apart, or name one with "
                              "--layout")
    if not found:
        raise CollectionError(f"no submission in {source}: expected {wanted}; found {seen.describe()}")
    if found[0] == "nbgrader":
        return _collect_nbgrader(source, seen.top, into, assignments, max_bytes, max_student_bytes, mapping, wanted)
    return _collect_lms(source, seen.top, seen.lms[found[0]], into, assignments, max_bytes, max_student_bytes,
                        mapping, zone)


MAX_LISTED = 100_000  # entries of a folder looked at to tell its layout


def _listing(folder: Path) -> list[str]:
    """The paths under ``folder`` as a zip lists them (``/`` after a folder's name); links not followed."""
    entries: list[str] = []
    for parent, folders, files in os.walk(folder):
        relative = Path(parent).relative_to(folder)
        depth = len(relative.parts)
        prefix = "" if not depth else relative.as_posix() + "/"
        entries += [f"{prefix}{name}/" for name in folders] + [f"{prefix}{name}" for name in files]
        if depth >= 3 or len(entries) > MAX_LISTED:
            folders.clear()
    return entries


@dataclass
class _Survey:
    top: list[str]  # the one folder everything is in, if any (a zip of "submitted/")
    students: set[str]  # nbgrader's: folders holding an assignment's folder
    lms: dict[str, list[lms.Found]]  # layout -> the notebooks named as it names them
    unmatched: list[str]  # notebooks at the top named as no layout names them
    others: list[str]  # what else is at the top

    def describe(self) -> str:
        folders = sorted({o for o in self.others if o.endswith("/")})
        files = sorted({o for o in self.others if not o.endswith("/")})
        students = sorted(f"{s}/" for s in self.students)
        said = [f"{len(items)} {kind}{'s' if len(items) > 1 else ''} ({', '.join(shown(i) for i in items[:3])}"
                f"{', …' if len(items) > 3 else ''}){why}"
                for items, kind, why in ((students, "student folder", " in nbgrader's layout"),
                                         (folders, "folder", " holding no folder named after an assignment"),
                                         (files, "other file", "")) if items]
        return " and ".join(said) or "nothing"


def _survey(entries: list[str], assignments: list[str], layout: str, unwrap: bool = True) -> _Survey:
    """What ``entries`` hold, inside the one folder around them all (`_wrapper`) if ``unwrap``."""
    top = _wrapper(entries, assignments) if unwrap else []
    survey = _Survey(top, set(), {}, [], [])
    layouts = lms.LMS_LAYOUTS if layout == "auto" else (layout,) if layout != "nbgrader" else ()
    for parts, folder in _student_paths(entries):
        parts = parts[len(top):]
        if not parts:
            continue
        if len(parts) > 1 and parts[1] in assignments:
            survey.students.add(parts[0])
            continue
        notebook = not folder and parts[-1].lower().endswith(".ipynb")
        read = notebook and next(filter(None, (lms.parse(name, "/".join(parts)) for name in layouts)), None)
        if read:
            survey.lms.setdefault(read.layout, []).append(read)
        elif notebook and len(parts) == 1:
            survey.unmatched.append("/".join([*top, parts[0]]))
        else:
            survey.others.append(parts[0] + ("/" if len(parts) > 1 or folder else ""))
    survey.others = [o for o in survey.others if o.rstrip("/") not in survey.students]
    if top and not (survey.students or survey.lms):  # nothing in it either: say what is there, as it is
        return _survey(entries, assignments, layout, unwrap=False)
    return survey


def _collect_nbgrader(source: Path, top: list[str], into: Path, assignments: list[str], max_bytes: int,
                      max_student_bytes: int, mapping: dict[str, str] | None, wanted: str) -> Collected:
    if source.is_dir():  # (a zip's one folder around the students' is found as it is unpacked)
        folder, flags = source.joinpath(*top), {}
    else:
        folder, flags = extract_zip(source, into / "zip", assignments, max_bytes, max_student_bytes)
    subs = find_submissions(folder, assignments, max_bytes, flags, max_student_bytes)
    notes = [f"not graded: {shown(name)}/ holds no folder named after an assignment ({', '.join(assignments)})"
             for name in without_assignments(folder, assignments)]
    if not subs:
        raise CollectionError(f"no submission in {source}: expected {wanted}; found nothing of it")
    if mapping:
        folder_of: dict[tuple[str, str], str] = {}  # (id, assignment) -> the folder graded under it
        renamed = []
        for sub in subs:
            student = lms.mapped(mapping, sub.student_id) or sub.student_id
            if (student, sub.assignment) in folder_of:
                raise CollectionError(f"the mapping gives {shown(student)} two submissions of {sub.assignment} (the "
                                      f"folders {shown(folder_of[student, sub.assignment])}, {shown(sub.student_id)})")
            folder_of[student, sub.assignment] = sub.student_id
            renamed.append(replace(sub, student_id=student))
        subs = renamed
    return Collected(subs, {}, notes, "nbgrader")


def _collect_lms(source: Path, top: list[str], found: list[lms.Found], into: Path, assignments: list[str],
                 max_bytes: int, max_student_bytes: int, mapping: dict[str, str] | None, zone: str) -> Collected:
    layout = found[0].layout
    ids, notes = _lms_ids(found, mapping)
    # what: the assignment the file's name names; in a download of one assignment, that one
    named = {f.path: lms.assignment_of(f.file, f.hint, assignments) for f in found}
    only = set(named.values()) - {None}
    chosen: dict[tuple[str, str], tuple[tuple, lms.Found]] = {}
    for f in found:
        assignment = named[f.path] or (next(iter(only)) if len(only) == 1 else None)
        if assignment is None:
            notes.append(f"not graded: {shown(f.path)} names no assignment ({', '.join(assignments)})")
            continue
        key = (ids[f.path], assignment)
        rank = (f.time or datetime.min, f.copy, f.file.lower() == f"{assignment}.ipynb", f.path)
        if key not in chosen or rank > chosen[key][0]:  # the latest attempt, upload
            chosen[key] = (rank, f)
    if not chosen:
        raise CollectionError(f"no submission in {source}: its {layout} notebooks name no assignment "
                              f"({', '.join(assignments)})")
    latest = {key: f for key, (_, f) in sorted(chosen.items())}
    times = {key: nbgrader_time(f.time.replace(tzinfo=ZoneInfo(zone))) for key, f in latest.items() if f.time}
    subs = _lms_submissions(source, top, latest, into / "lms", max_bytes, max(max_student_bytes, max_bytes))
    return Collected(subs, times, notes, layout)


def _lms_ids(found: list[lms.Found], mapping: dict[str, str] | None) -> tuple[dict[str, str], list[str]]:
    """Each notebook's student id, by its path: the mapping's, else one from the LMS's name (`default_id`), with the
    LMS's number after it where two people share a name; and the notes that say so, or whom the mapping lacks."""
    notes: list[str] = []
    ids: dict[str, str] = {}
    mapped_ids: set[str] = set()
    for f in found:
        given = lms.mapped(mapping, f.name, f.number) if mapping else None
        ids[f.path] = given or default_id(f.name, f.number)
        if given is not None:
            mapped_ids.add(ids[f.path])
        elif mapping:
            notes.append(f"not in the mapping: {shown(f.name)}{f' ({f.number})' if f.number else ''}, graded as "
                         f"{shown(ids[f.path])}")
    people: dict[str, set[tuple[str, str]]] = {}  # an id made from a name -> the LMS's (name, number) under it
    for f in found:
        if ids[f.path] not in mapped_ids:
            people.setdefault(ids[f.path], set()).add((f.name, f.number))
    twins = {student for student, who in people.items() if len(who) > 1 and len({n for _, n in who}) == len(who)}
    notes += [f"{len(who)} students are named {shown(student)} in the download: graded as "
              f"{', '.join(f'{shown(student)}_{n}' for _, n in sorted(who))} (a --mapping names them)"
              for student, who in people.items() if student in twins]
    ids = {f.path: f"{ids[f.path]}_{f.number}" if ids[f.path] in twins else ids[f.path] for f in found}
    return ids, list(dict.fromkeys(notes))


def _lms_submissions(source: Path, top: list[str], latest: dict[tuple[str, str], lms.Found], into: Path,
                     max_bytes: int, budget: int) -> list[Submission]:
    """A submission for each notebook ``latest`` names (by student id and assignment), each bounded as in a class
    zip: by ``max_bytes``, and a student's together by ``budget``; one over it has none read or graded."""
    read: dict[tuple[str, str], tuple[Path | None, str | None]] = {}
    spent: dict[str, int] = {}
    over: set[str] = set()
    with (_open_zip(source) if source.is_file() else contextlib.nullcontext()) as archive:
        members = {"/".join(_parts(m.filename)): m for m in archive.infolist()} if archive else {}
        for number, ((student, assignment), f) in enumerate(latest.items()):
            if student in over:
                continue  # nothing more of theirs is read
            name = "/".join([*top, f.path])
            path, problem, size = _lms_notebook(members[name] if archive else source / name, archive,
                                                into / f"{number}.ipynb", max_bytes, budget - spent.get(student, 0))
            if problem == TOO_LARGE:
                over.add(student)
            spent[student] = spent.get(student, 0) + size
            read[student, assignment] = path, problem
    subs = []
    for (student, assignment), f in latest.items():
        path, problem = (None, TOO_LARGE) if student in over else read[student, assignment]
        flags = ((LMS_LATE,) if f.late else ()) + ((problem,) if problem else ())
        subs.append(Submission(student, assignment, path, flags))
    return subs


def _lms_notebook(entry: Path | zipfile.ZipInfo, archive: zipfile.ZipFile | None, target: Path, max_bytes: int,
                  left: int) -> tuple[Path | None, str | None, int]:
    """One notebook of an LMS download: (where to read it, what went wrong, its bytes). A folder's is read in
    place if regular; a zip's is unpacked to ``target`` within ``max_bytes`` and what is ``left`` of the budget."""
    if archive is None:
        info = os.lstat(entry)
        if stat.S_ISLNK(info.st_mode):
            return None, "symlink-outside", 0
        if not stat.S_ISREG(info.st_mode):
            return None, "missing-notebook", 0
        if info.st_size > max_bytes:
            return None, "notebook-too-large", 0
        if info.st_size > left:
            return None, TOO_LARGE, 0
        return entry, None, info.st_size
    if stat.S_ISLNK(entry.external_attr >> 16):
        return None, "unsafe-zip-member", 0
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        written = _copy_at_most(archive, entry, target, min(max_bytes, left))
    except UNREADABLE:
        target.unlink(missing_ok=True)
        return None, "unsafe-zip-member", 0
    if written is None:
        target.unlink(missing_ok=True)
        return None, TOO_LARGE if left < max_bytes else "notebook-too-large", 0
    return target, None, written
