"""Finding the submissions to grade: nbgrader's layout, in a folder or a .zip, or an LMS's download. What a
student hands in costs only that student's row when refused (when each was handed in: `autograde.submission_times`);
the rules: autograde/README.md ("Collection", "Student ids").
"""
from __future__ import annotations

import os
import posixpath
import shutil
import stat
import unicodedata
import zipfile
import zlib
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path

from .submission_times import LMS_LATE, NBGRADER_TIME, check_zone

__all__ = ["Submission", "find_submissions", "extract_zip", "CollectionError", "exportable_id", "collect", "Collected"]


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
ENTRY_BYTES = 4096  # what each folder, link or file unpacked from a zip costs its student besides its bytes: a block
TOO_LARGE = "submission-too-large"


def _not_a_student(name: str) -> bool:
    """A hidden folder, or exactly ``__MACOSX`` (macOS's resource forks in a zip): no student's."""
    return name.startswith(".") or name == MACOS_FORKS


def _inside(path: Path, folder: Path) -> bool:
    """Does ``path``, with every symlink followed, stay under ``folder`` (taken literally)?"""
    return os.path.realpath(path).startswith(str(folder) + os.sep)


def find_submissions(root: Path, assignments: list[str], max_bytes: int, flags: dict[str, list[str]] | None = None,
                     max_student_bytes: int | None = None) -> list[Submission]:
    """Every ``<student>/<assignment>/`` folder under ``root`` for a known assignment, with ``flags`` (by student)
    from extraction; a student over ``max_student_bytes`` has none read (``submission-too-large``)."""
    base = Path(os.path.realpath(root))
    flags = flags or {}
    budget = None if max_student_bytes is None else max(max_student_bytes, max_bytes)
    found = []
    for student in _student_folders(base):
        folders = sorted(p for p in student.iterdir() if p.name in assignments)
        own = flags.get(student.name, [])
        if TOO_LARGE not in own and budget is not None and _notebook_bytes(base / student.name, folders) > budget:
            own = [*own, TOO_LARGE]
        for assignment in folders:
            if TOO_LARGE in own:
                found.append(Submission(student.name, assignment.name, None, tuple(own)))
            else:
                found.append(_submission(base / student.name, assignment, own, max_bytes))
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


def shown(name: str) -> str:
    """A folder's name as it may reach a terminal or a log: each unprintable character written as its code."""
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in name)


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
    if not notebook.exists() and not notebook.is_symlink():
        others = sorted(assignment_dir.glob("*.ipynb"))
        notebook = others[0] if len(others) == 1 else None
    if notebook is None:
        return Submission(student, assignment, None, (*flags, "missing-notebook"))
    if not _inside(notebook, folder):
        return Submission(student, assignment, None, (*flags, "symlink-outside"))
    if notebook.stat().st_size > max_bytes:
        return Submission(student, assignment, None, (*flags, "notebook-too-large"))
    timestamp, secret = (_small_text(assignment_dir / name, folder) for name in EXCHANGE_FILES)
    if timestamp is not None and not _is_timestamp(timestamp):
        flags, timestamp = [*flags, "bad-timestamp"], None
    return Submission(student, assignment, notebook, tuple(flags), timestamp, secret)


SMALL_TEXT_BYTES = 256


def _small_text(path: Path, folder: Path) -> str | None:
    """The stripped text of a small regular file in ``folder``; "" if it is something else, None if absent."""
    if not path.exists() and not path.is_symlink():
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
                max_student_bytes: int = int(MAX_STUDENT_MB * 2**20)) -> tuple[Path, dict[str, list[str]]]:
    """Unzip what is safe: the folder holding the student folders, and flags by student.

    Only what grading reads is unpacked; an unsafe member (absolute or ``..`` path, through or over a link or
    an earlier member, unreadable, a link out of its student's folder, too large) is skipped, flagged. A student
    over ``max_student_bytes`` (each entry `ENTRY_BYTES` plus its bytes, counted while unpacking) keeps only empty
    assignment folders, flagged ``submission-too-large``. Raises CollectionError if the archive cannot be read."""
    try:
        zf = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError, ValueError) as error:  # ValueError: a name that is not UTF-8
        raise CollectionError(f"{archive} is not a readable zip archive ({error})") from None
    into = Path(os.path.realpath(into))
    flags: dict[str, list[str]] = {}
    budget = max(max_student_bytes, max_bytes)
    spent: dict[str, int] = {}
    handed_in: dict[str, set[str]] = {}  # student -> the known assignments they have a member in
    with zf:
        members = zf.infolist()
        top = _common_top(members, assignments)
        for member in members:
            name = member.filename
            parts = [p for p in name.split("/") if p not in ("", ".")]
            student = parts[len(top)] if len(parts) > len(top) else ""
            if len(parts) > len(top) + 1 and parts[len(top) + 1] in assignments and ".." not in parts:
                handed_in.setdefault(student, set()).add(parts[len(top) + 1])
            if TOO_LARGE in flags.get(student, ()):
                continue  # over budget: nothing more of theirs is unpacked
            target = into.joinpath(*parts)
            if name.startswith("/") or ".." in parts or not parts or _unsafe_target(target, into, member.is_dir()):
                flags.setdefault(student, []).append("unsafe-zip-member")
                continue
            left = budget - spent.get(student, 0) - ENTRY_BYTES  # for its contents, once its own entry is paid
            link = zf.read(member).decode(errors="replace") if stat.S_ISLNK(member.external_attr >> 16) else None
            kept = member.is_dir() or len(parts) == len(top) + 3 and (parts[-1].endswith(".ipynb")
                                                                       or parts[-1] in EXCHANGE_FILES)
            if link is not None:
                resolved = posixpath.normpath(posixpath.join(posixpath.dirname("/".join(parts)), link))
                if link.startswith("/") or not resolved.startswith("/".join(parts[:len(top) + 1]) + "/"):
                    flags.setdefault(student, []).append("symlink-outside")
                    continue
            elif not kept:
                continue
            if left < 0:
                flags.setdefault(student, []).append(TOO_LARGE)
                continue
            if link is not None:
                target.parent.mkdir(parents=True, exist_ok=True)
                os.symlink(link, target)
                spent[student] = spent.get(student, 0) + ENTRY_BYTES
            elif member.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                spent[student] = spent.get(student, 0) + ENTRY_BYTES
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                try:
                    if parts[-1].endswith(".ipynb"):
                        written = _copy_at_most(zf, member, target, min(max_bytes, left))
                        problem = None if written is not None else TOO_LARGE if left < max_bytes else "file-too-large"
                    else:  # read only when small (`_small_text`): no more of it is unpacked than tells it is not
                        written = _copy_at_most(zf, member, target, SMALL_TEXT_BYTES + 1, cut=True)
                        problem = TOO_LARGE if written > left else None
                except (zipfile.BadZipFile, NotImplementedError, RuntimeError, OSError, EOFError, zlib.error):
                    written, problem = None, "unsafe-zip-member"  # a corrupt, encrypted or oddly compressed member
                if problem:
                    target.unlink(missing_ok=True)
                    flags.setdefault(student, []).append(problem)
                    continue
                spent[student] = spent.get(student, 0) + ENTRY_BYTES + written
    folder = into.joinpath(*top)
    for student, found in flags.items():
        if student and TOO_LARGE in found:
            _keep_only_assignment_folders(folder / student, handed_in.get(student, set()))
    return folder, {s: f for s, f in flags.items() if s}


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


def _common_top(members: list[zipfile.ZipInfo], assignments: list[str]) -> list[str]:
    """``["class"]`` when every member sits in one wrapper folder around the student folders."""
    parts = [[p for p in m.filename.split("/") if p not in ("", ".")]
             for m in members if not m.filename.startswith("/")]
    parts = [p for p in parts if p and ".." not in p and not _not_a_student(p[0])]
    firsts = {p[0] for p in parts}
    if len(firsts) != 1:
        return []
    # One top folder: a student folder itself (its children are assignments), or a wrapper.
    seconds = {p[1] for p in parts if len(p) > 1}
    return [] if seconds & set(assignments) else [next(iter(firsts))]


# ---------------------------------------------------------------- student ids

ID_PUNCTUATION = "._-@+"
FORMULA_START = "=+-@"


def exportable_id(name: str) -> bool:
    """May ``name`` reach nbgrader's gradebook? An allow-list: letters of any script, digits, ``._-@+``, a
    combining mark after the first character; never ``=``, ``+``, ``-`` or ``@`` first (README: "Student ids")."""
    if not name or name[0] in FORMULA_START:
        return False
    for index, char in enumerate(name):
        category = unicodedata.category(char)
        mark = index > 0 and category in ("Mn", "Mc")
        if not (category[0] == "L" or category == "Nd" or char in ID_PUNCTUATION or mark):
            return False
    return True


# ---------------------------------------------------------------- layouts: nbgrader's, and LMS downloads

@dataclass(frozen=True)
class Collected:
    """What `collect` found: submissions, the download's own UTC times, notes for the instructor, the layout."""
    submissions: list[Submission]
    times: dict[tuple[str, str], str]
    notes: list[str]
    layout: str


def collect(source: Path, into: Path, assignments: list[str], max_bytes: int,
            max_student_bytes: int = int(MAX_STUDENT_MB * 2**20), layout: str = "auto",
            mapping: dict[str, str] | None = None, zone: str = "UTC") -> Collected:
    """The submissions in ``source`` (a folder or a .zip), nbgrader's layout or an LMS's (``layout``; ``auto``: as
    the names show), unpacked into ``into``; ``mapping`` names LMS names' ids. Raises CollectionError, in one line
    saying what was expected and found: nothing to grade, mixed layouts, an unnamed notebook, a mapping clash."""
    from . import lms

    check_zone(zone)
    if source.suffix.lower() == ".zip" and source.is_file():
        try:
            with zipfile.ZipFile(source) as zf:
                entries = [m.filename for m in zf.infolist()]
        except (zipfile.BadZipFile, OSError, ValueError) as error:
            raise CollectionError(f"{source} is not a readable zip archive ({error})") from None
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
    found = [name for name in lms.LAYOUTS if (seen.students if name == "nbgrader" else seen.lms.get(name))]
    if layout != "auto":
        found = [name for name in found if name == layout]
    if len(found) > 1:
        raise CollectionError(f"{source} mixes layouts ({', '.join(found)}): grade each apart, or name one with "
                              "--layout")
    if not found:
        raise CollectionError(f"no submission in {source}: expected {wanted}; found {seen.describe()}")
    if found[0] == "nbgrader":
        return _collect_nbgrader(source, seen.top, into, assignments, max_bytes, max_student_bytes, mapping or {},
                                 wanted)
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
    lms: dict[str, list]  # layout -> the notebooks named as it names them (`autograde.lms.Found`)
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
    """What ``entries`` hold, inside the one folder around them all if ``unwrap`` and it is no student's."""
    from . import lms

    paths = []
    for entry in entries:
        parts = [p for p in entry.split("/") if p not in ("", ".")]
        if entry.startswith("/") or ".." in parts or not parts or _not_a_student(parts[0]):
            continue
        paths.append((parts, entry.endswith("/")))
    top: list[str] = []
    firsts = {parts[0] for parts, _ in paths}
    if unwrap and len(firsts) == 1 and all(len(parts) > 1 or folder for parts, folder in paths):
        first = next(iter(firsts))
        inner = {parts[1] for parts, _ in paths if len(parts) > 1}
        if not inner & set(assignments) and not lms.PATTERNS["moodle"].match(f"{first}/x.ipynb"):
            top = [first]
            paths = [(parts[1:], folder) for parts, folder in paths if len(parts) > 1]
    survey = _Survey(top, set(), {}, [], [])
    layouts = lms.LMS_LAYOUTS if layout == "auto" else (layout,) if layout != "nbgrader" else ()
    for parts, folder in paths:
        if len(parts) > 1 and parts[1] in assignments:
            survey.students.add(parts[0])
            continue
        notebook = not folder and parts[-1].lower().endswith(".ipynb")
        read = next((f for f in (lms.parse(name, "/".join(parts)) for name in layouts) if f), None) if notebook \
            else None
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
                      max_student_bytes: int, mapping: dict[str, str], wanted: str) -> Collected:
    from .lms import mapped

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
        renamed = [replace(s, student_id=mapped(mapping, s.student_id) or s.student_id) for s in subs]
        folders: dict[tuple[str, str], list[str]] = {}
        for new, old in zip(renamed, subs):
            folders.setdefault((new.student_id, new.assignment), []).append(old.student_id)
        for (student, assignment), names in folders.items():
            if len(names) > 1:
                raise CollectionError(f"the mapping gives {shown(student)} two submissions of {assignment} "
                                      f"(the folders {', '.join(shown(n) for n in names)})")
        subs = renamed
    return Collected(subs, {}, notes, "nbgrader")


def _collect_lms(source: Path, top: list[str], found: list, into: Path, assignments: list[str], max_bytes: int,
                 max_student_bytes: int, mapping: dict[str, str] | None, zone: str) -> Collected:
    from zoneinfo import ZoneInfo

    from . import lms

    notes: list[str] = []
    layout = found[0].layout
    # who: the mapping's id, else one from the LMS's name (two people of one name told apart by the LMS's number)
    identities: dict[str, set[tuple[str, str]]] = {}
    ids = {}
    for f in found:
        given = lms.mapped(mapping, f.name, f.number) if mapping else None
        if mapping and given is None:
            notes.append(f"not in the mapping: {shown(f.name)}{f' ({f.number})' if f.number else ''}, graded as "
                         f"{shown(lms.default_id(f.name, f.number))}")
        ids[f.path] = (given or lms.default_id(f.name, f.number), given is not None)
        identities.setdefault(ids[f.path][0], set()).add((f.name, f.number))
    for student, who in identities.items():
        if len(who) > 1 and len({n for _, n in who}) == len(who) and not any(
                ids[f.path][1] for f in found if ids[f.path][0] == student):
            notes.append(f"{len(who)} students are named {shown(student)} in the download: graded as "
                         f"{', '.join(f'{shown(student)}_{n}' for _, n in sorted(who))} (a --mapping names them)")
            for f in found:
                if ids[f.path][0] == student:
                    ids[f.path] = (f"{student}_{f.number}", False)
    notes = list(dict.fromkeys(notes))
    # what: the assignment the file's name names; in a download of one assignment, that one
    named = {f.path: lms.assignment_of(f.file, f.hint, assignments) for f in found}
    only = {a for a in named.values() if a}
    chosen: dict[tuple[str, str], object] = {}
    for f in found:
        assignment = named[f.path] or (next(iter(only)) if len(only) == 1 else None)
        if assignment is None:
            notes.append(f"not graded: {shown(f.path)} names no assignment ({', '.join(assignments)})")
            continue
        key = (ids[f.path][0], assignment)
        rank = (f.time or datetime.min, f.copy, f.file.lower() == f"{assignment}.ipynb", f.path)
        if key not in chosen or rank > chosen[key][0]:  # the latest attempt, upload
            chosen[key] = (rank, f)
    # the notebooks themselves, each bounded as in a class zip: a notebook by max_bytes, a student by their budget
    budget, spent, over, subs, times = max(max_student_bytes, max_bytes), {}, set(), {}, {}
    archive = zipfile.ZipFile(source) if source.is_file() else None
    try:
        members = {"/".join(p for p in m.filename.split("/") if p not in ("", ".")): m
                   for m in archive.infolist()} if archive else {}
        for number, ((student, assignment), (_, f)) in enumerate(sorted(chosen.items())):
            flags = [LMS_LATE] if f.late else []
            if f.time is not None:
                times[(student, assignment)] = (f.time.replace(tzinfo=ZoneInfo(zone)).astimezone(timezone.utc)
                                                .strftime(NBGRADER_TIME))
            if student in over:
                subs[(student, assignment)] = Submission(student, assignment, None, tuple(flags))
                continue
            name = "/".join([*top, f.path])
            path, problem, size = _lms_notebook(source / name if archive is None else members[name], archive,
                                                into / "lms" / f"{number}.ipynb", max_bytes,
                                                budget - spent.get(student, 0))
            if problem == TOO_LARGE:
                over.add(student)  # nothing more of theirs is read, and none of what was is graded
            spent[student] = spent.get(student, 0) + size
            subs[(student, assignment)] = Submission(student, assignment, path,
                                                     (*flags, problem) if problem else tuple(flags))
    finally:
        if archive is not None:
            archive.close()
    for (student, assignment), sub in subs.items():
        if student in over:
            kept = [f for f in sub.flags if f == LMS_LATE]
            subs[(student, assignment)] = replace(sub, path=None, flags=(*kept, TOO_LARGE))
    if not subs:
        raise CollectionError(f"no submission in {source}: its {layout} notebooks name no assignment "
                              f"({', '.join(assignments)})")
    return Collected([subs[key] for key in sorted(subs)], times, notes, layout)


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
    except (zipfile.BadZipFile, NotImplementedError, RuntimeError, OSError, EOFError, zlib.error):
        target.unlink(missing_ok=True)
        return None, "unsafe-zip-member", 0
    if written is None:
        target.unlink(missing_ok=True)
        return None, TOO_LARGE if left < max_bytes else "notebook-too-large", 0
    return target, None, written
