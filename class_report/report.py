"""``python -m class_report``: what the class got wrong, on one self-contained HTML page.

Reads what ``grade`` wrote in OUT and the mistake catalogues; writes OUT/report.html (inline SVG and CSS, no
script) in the words of ``locales/<language>/LC_MESSAGES/report.po``. Its sections: autograde/README.md.
"""
from __future__ import annotations

import csv
import gettext
import html
import io
import math
import os
import re
import statistics
import urllib.parse
import warnings
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cache, cached_property
from pathlib import Path

from autograde import messages
from autograde.autograded import ERROR_NAMES
from autograde.feedback import anchor
from autograde.records import CHECK_COLUMNS, CSV_COLUMNS, unescaped, write_atomically
from editions.assignments import ROOT
from intake.collection import shown as _shown

__all__ = ["ReportError", "Results", "Row", "Check", "read_results", "class_report", "write_report", "languages",
           "CATALOGUE", "TIME_FLAGS", "PAGE_NAME"]

PAGE_NAME = "report.html"
CATALOGUE = "report"  # locales/<language>/LC_MESSAGES/report.po: the page's words
TIME_FLAGS = frozenset({"late", "time-unverified", "no-timestamp", "bad-timestamp", "lms-late"})
# a notebook that stopped in a cell (`autograde.session`): a checks.csv graded before its `stopped` column was written
# says no more than these flags of the row, and the report then counts each unnamed failure of the row as stopped
STOPPED_FLAGS = frozenset({"timeout", "crashed", "memory-limit", "bad-reply"})
STOPPED_ERRORS = frozenset(ERROR_NAMES[status] for status in ("timeout", "crashed", "bad-reply"))
"""How the cell where a notebook stopped shows in the notebook as it ran (`autograde.autograded`)."""
# the columns of grades.csv and checks.csv (records.py) a file may lack: those the report does not read, and one an
# older grader did not write (checks.csv's "stopped")
OPTIONAL_COLUMNS = ("notebook", "late_penalty", "cells", "stopped")
# the English of the message of a check whose function is still the released stub (`autograde.verdict.failure_message`)
STUB_MESSAGE = "not written yet — it raises NotImplementedError"
LISTED = 12  # students named in a cell of a table before "and N more"
OPEN_TIME_ROWS = 30  # more rows of unverified times than this are folded


class ReportError(ValueError):
    """The results cannot be read (no grades.csv, a column missing, a value that is not a number…)."""


# --------------------------------------------------------------------------------------------- reading the results

@dataclass(frozen=True)
class Row:
    """A row of grades.csv: one notebook."""

    student: str
    assignment: str
    score: float
    max_score: float
    flags: tuple[str, ...]

    @property
    def percent(self) -> float | None:
        return 100 * self.score / self.max_score if self.max_score > 0 else None

    @property
    def kinds(self) -> set[str]:
        """What its flags are: ``similar-to`` for ``similar-to:ana``."""
        return {f.partition(":")[0] for f in self.flags}


@dataclass(frozen=True)
class Check:
    """A row of checks.csv: one check of one notebook."""

    student: str
    assignment: str
    cell: str
    exercise: str  # "ch01_attention.softmax"
    hidden: bool
    passed: bool
    mistake: str  # the catalogued mistake the failure named; "" if none
    delegated: tuple[str, ...]
    stopped: bool | None = None  # failed because a cell stopped (a hang, a crash); None: not recorded (older grader)


@dataclass
class Results:
    out: Path
    rows: list[Row]
    checks: list[Check]
    written: datetime  # when grades.csv was written


def _read_csv(path: Path, columns: list[str], what: str) -> list[tuple[int, dict[str, str]]]:
    """Each row of ``path`` (its line number, its values unescaped); ``what`` says which file it should be. A column
    of `OPTIONAL_COLUMNS` may be missing: its values are then ``""``."""
    try:
        with path.open(encoding="utf-8-sig", newline="") as f:  # -sig: a file saved again by a spreadsheet
            reader = csv.DictReader(f)
            missing = [c for c in columns if c not in (reader.fieldnames or ()) and c not in OPTIONAL_COLUMNS]
            if missing:
                raise ReportError(f"{path} lacks the column(s) {', '.join(missing)}: is it the {what} that "
                                  "`python -m autograde grade` writes?")
            return [(reader.line_num, {k: unescaped(row.get(k) or "") for k in columns}) for row in reader]
    except UnicodeDecodeError:
        raise ReportError(f"{path} is not UTF-8 text: is it the {what} that `python -m autograde grade` writes?") \
            from None
    except csv.Error as error:
        raise ReportError(f"{path}: {error}") from None
    except IsADirectoryError:
        raise ReportError(f"{path} is a folder, not the {what}") from None
    except OSError as error:
        raise ReportError(f"cannot read {path}: {error.strerror or error}") from None


def _number(path: Path, line: int, row: dict[str, str], column: str) -> float:
    try:
        value = float(row[column])
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise ReportError(f"{path} line {line}: {column} {row[column]!r} is not a number of points")
    return value


def _flag(path: Path, line: int, row: dict[str, str], column: str) -> bool:
    if row[column] not in ("0", "1"):
        raise ReportError(f"{path} line {line}: {column} is {row[column]!r}, not 0 or 1")
    return row[column] == "1"


def read_results(out: Path) -> Results:
    """grades.csv and checks.csv of a grading run's OUT, checked: `ReportError` says what is wrong."""
    grades, checks = out / "grades.csv", out / "checks.csv"
    if not grades.is_file():
        raise ReportError(f"no grades.csv in {out}: run `python -m autograde grade SUBMISSIONS --out {out}` first")
    rows, seen = [], set()
    for line, r in _read_csv(grades, CSV_COLUMNS, "grades.csv"):
        key = (r["student_id"], r["assignment"])
        if not all(key):
            raise ReportError(f"{grades} line {line}: a row without a student_id or an assignment")
        if key in seen:
            raise ReportError(f"{grades} line {line}: {_shown(key[0])}/{key[1]} has a second row")
        seen.add(key)
        rows.append(Row(*key, _number(grades, line, r, "score"), _number(grades, line, r, "max_score"),
                        tuple(f for f in r["flags"].split(";") if f)))
    if not rows:
        raise ReportError(f"{grades} has no rows: nothing was graded")
    if not checks.is_file():
        raise ReportError(f"no checks.csv in {out} beside grades.csv: grade again with this version of "
                          "`python -m autograde grade`, which writes it")
    found = []
    for line, c in _read_csv(checks, CHECK_COLUMNS, "checks.csv"):
        key = (c["student_id"], c["assignment"])
        if key not in seen:
            raise ReportError(f"{checks} line {line}: {_shown(key[0])}/{key[1]} has no row in grades.csv: the two "
                              "files are not from the same grading run (grade again)")
        found.append(Check(*key, c["cell"], c["exercise"], _flag(checks, line, c, "hidden"),
                           _flag(checks, line, c, "passed"), c["mistake"],
                           tuple(d for d in c["delegated"].split(";") if d),
                           _flag(checks, line, c, "stopped") if c["stopped"] else None))
    written = datetime.fromtimestamp(grades.stat().st_mtime, timezone.utc)
    return Results(out, rows, found, written)


# ------------------------------------------------------------------------------- the catalogues and the notebooks

@cache
def _catalogue(exercise_key: str) -> tuple[dict, tuple[str, ...]]:
    """An exercise's mistakes by name (`autograde.spec.Mistake`) and the keys of the exercises it uses; none of either
    if it is gone from the catalogue."""
    from autograde.spec import get_exercise

    chapter = exercise_key.rpartition(".")[0]
    try:
        exercise = get_exercise(exercise_key)
    except (ValueError, ImportError):
        return {}, ()
    return {m.name: m for m in exercise.mistakes}, tuple(f"{chapter}.{used.key}" for used in exercise.uses)


class _Notebooks:
    """The notebooks under OUT/autograded/, read once each and only where needed."""

    def __init__(self, out: Path):
        self.out = out
        self._read: dict[tuple[str, str], object] = {}

    def path(self, student: str, assignment: str) -> Path:
        return self.out / "autograded" / student / assignment / f"{assignment}.ipynb"

    def _notebook(self, student: str, assignment: str):
        key = (student, assignment)
        if key not in self._read:
            import nbformat

            try:
                self._read[key] = nbformat.read(self.path(student, assignment), 4)
            except Exception:  # absent (an unexportable id, a missing notebook) or unreadable: nothing to tell
                self._read[key] = None
        return self._read[key]

    def _cells(self, student: str, assignment: str):
        nb = self._notebook(student, assignment)
        for cell in nb.cells if nb else ():
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if isinstance(meta, dict) and meta.get("grade_id") and cell.get("cell_type") == "code":
                yield meta, cell

    def is_stub(self, student: str, assignment: str, grade_id: str) -> bool:
        """Whether the test cell's failure says the function is still the released stub, in any language."""
        for meta, cell in self._cells(student, assignment):
            if meta["grade_id"] == grade_id:
                return any(said in str(o.get("evalue", "")) for o in cell.get("outputs", ())
                           if o.get("output_type") == "error" for said in _stub_messages())
        return False

    def stopped_cells(self, student: str, assignment: str) -> list[str | int]:
        """The cells where the notebook stopped (timed out, crashed, replied badly): a graded cell's id, or another
        cell's number in the notebook as it ran."""
        nb = self._notebook(student, assignment)
        found: list[str | int] = []
        for number, cell in enumerate(nb.cells if nb else (), 1):
            errors = {o.get("ename") for o in cell.get("outputs", ()) if o.get("output_type") == "error"}
            if errors & STOPPED_ERRORS:
                meta = cell.get("metadata", {}).get("nbgrader", {})
                grade_id = meta.get("grade_id") if isinstance(meta, dict) else None
                found.append(grade_id if isinstance(grade_id, str) and grade_id else number)
        return found

    def solutions(self, student: str, assignment: str) -> dict[str, str]:
        return {meta["grade_id"]: str(cell.get("source", "")) for meta, cell in self._cells(student, assignment)
                if meta.get("solution")}

    def alike(self, assignment: str, one: str, other: str) -> list[str]:
        """The solution cells two students wrote alike (`autograde.similarity`); cells left as the stub are skipped."""
        from autograde.similarity import MIN_FINGERPRINTS, OVERLAP, fingerprints

        mine, theirs = self.solutions(one, assignment), self.solutions(other, assignment)
        found = []
        for grade_id, code in mine.items():
            if grade_id not in theirs or "NotImplementedError" in code + theirs[grade_id]:
                continue
            a, b = fingerprints(code), fingerprints(theirs[grade_id])
            if min(len(a), len(b)) >= MIN_FINGERPRINTS and len(a & b) >= OVERLAP * len(a | b):
                found.append(grade_id)
        return found

    def time(self, student: str, assignment: str) -> str:
        """The submission time the gradebook got (the instructor's record's, or the student's own claim), without
        the microseconds nbgrader writes (``2026-12-03 09:00:00.000000 UTC``)."""
        try:
            text = (self.path(student, assignment).parent / "timestamp.txt").read_text(encoding="utf-8").strip()[:40]
        except (OSError, UnicodeDecodeError):
            return ""
        return re.sub(r"(\d:\d\d)\.\d+", r"\1", text)


@cache
def _stub_messages() -> tuple[str, ...]:
    """What a stub's failure says after the function's name, in English and each language the checks speak."""
    said = [STUB_MESSAGE]
    for language in messages.languages():
        for english, translated in messages.translations(language).items():
            if STUB_MESSAGE in english and "{exercise}" in translated:
                said.append(translated.split("{exercise}", 1)[1].strip()[:60])
    return tuple(said)


# ---------------------------------------------------------------------------------------------------- the analysis

@dataclass
class _Exercise:
    key: str
    assignment: str
    visible: list[int] = field(default_factory=lambda: [0, 0])  # passed, made
    hidden: list[int] = field(default_factory=lambda: [0, 0])
    failing: dict[str, list[Check]] = field(default_factory=dict)  # student → their failed checks of it
    named: dict[str, set[str]] = field(default_factory=dict)  # mistake → students
    unnamed: set[str] = field(default_factory=set)  # students whose failures had no name (and who wrote something)
    stubs: set[str] = field(default_factory=set)  # students whose function was still the stub
    stopped: set[str] = field(default_factory=set)  # students whose failures, no name, a cell that stopped explains
    upstream: dict[str, set[str]] = field(default_factory=dict)  # exercise it uses → unnamed students who failed it

    @property
    def short(self) -> str:
        return self.key.rpartition(".")[2]

    @property
    def named_students(self) -> set[str]:
        return set().union(*self.named.values()) if self.named else set()

    @property
    def mostly_unnamed(self) -> bool:
        return 2 * len(self.unnamed) > len(self.unnamed) + len(self.named_students)


def _exercises(results: Results, notebooks: _Notebooks) -> list[_Exercise]:
    """Each exercise the checks made, in the order of the notebooks, with what its failures were."""
    found: dict[str, _Exercise] = {}
    for c in results.checks:
        ex = found.setdefault(c.exercise, _Exercise(c.exercise, c.assignment))
        tally = ex.hidden if c.hidden else ex.visible
        tally[0] += c.passed
        tally[1] += 1
        if not c.passed:
            ex.failing.setdefault(c.student, []).append(c)
    failed = {(c.student, c.exercise) for c in results.checks if not c.passed}
    flagged = {(r.student, r.assignment) for r in results.rows if set(r.flags) & STOPPED_FLAGS}

    def stopped(c: Check) -> bool:
        return (c.student, c.assignment) in flagged if c.stopped is None else c.stopped
    for ex in found.values():
        for student, checks in ex.failing.items():
            names = {c.mistake for c in checks if c.mistake}
            for name in names:
                ex.named.setdefault(name, set()).add(student)
            if names:
                continue
            if all(notebooks.is_stub(student, c.assignment, c.cell) for c in checks):
                ex.stubs.add(student)
                continue
            if all(stopped(c) for c in checks):  # one failure the stop does not explain is the student's own
                ex.stopped.add(student)
                continue
            ex.unnamed.add(student)
            for used in _catalogue(ex.key)[1]:
                if (student, used) in failed:
                    ex.upstream.setdefault(used, set()).add(student)
    return list(found.values())


# -------------------------------------------------------------------------------------------------------- the plots

_FG, _GRID, _A, _B = "#010203", "#040506", "#0a0b0c", "#0d0e0f"  # drawn in these, shown in the page's colours
_COLOURS = {_FG: "currentColor", _GRID: "var(--grid)", _A: "var(--plot-a)", _B: "var(--plot-b)"}
_WIDTH = 4.4  # inches: 317 units wide, a little less than a phone shows it: its text stays readable there
_RC = {"svg.fonttype": "none", "font.family": ["DejaVu Sans"], "font.size": 10, "text.color": _FG,
       "axes.edgecolor": _FG, "axes.labelcolor": _FG, "xtick.color": _FG, "ytick.color": _FG, "grid.color": _GRID,
       "axes.spines.top": False, "axes.spines.right": False}


@contextmanager
def _axes(height: float, x_label: str):
    """Axes ``height`` inches tall to plot on, in the page's style: a grid along x, no ticks along y."""
    try:
        import matplotlib
        from matplotlib.figure import Figure
    except ImportError:
        raise ReportError("the class report draws its plots with matplotlib, which is not installed here: "
                          "pip install matplotlib") from None
    with matplotlib.rc_context(_RC):
        axes = Figure(figsize=(_WIDTH, height), layout="constrained").subplots()
        yield axes
        axes.set_xlabel(x_label)
        axes.grid(axis="x", linewidth=0.6)
        axes.tick_params(axis="y", length=0)
        axes.set_axisbelow(True)


def _svg(figure, name: str, title: str) -> str:
    """The figure as SVG to put in the page: its text in the page's font and colours, its ids its own."""
    import matplotlib

    with matplotlib.rc_context({**_RC, "svg.hashsalt": name}), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # glyphs DejaVu lacks (Chinese): the browser draws the text
        buffer = io.StringIO()
        figure.savefig(buffer, format="svg", transparent=True,
                       metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    svg = buffer.getvalue()
    svg = svg[svg.index("<svg"):]
    svg = re.sub(r"<metadata>.*?</metadata>|<defs>\s*<style[^>]*>.*?</style>\s*</defs>", "", svg, flags=re.S)
    svg = re.sub(r"font-family:[^;\"]*;?\s*", "", svg)
    svg = re.sub(r'(\bid="|url\(#|href="#)([^")]+)', lambda m: f"{m[1]}{name}-{m[2]}", svg)
    for colour, shown in _COLOURS.items():
        svg = svg.replace(colour, shown)
    view_box = re.search(r'viewBox="([^"]+)"', svg)[1]
    svg = re.sub(r"<svg[^>]*>", f'<svg class="plot" viewBox="{view_box}" role="img" aria-labelledby="{name}-title">'
                 f'<title id="{name}-title">{html.escape(title)}</title>', svg, count=1)
    return svg


def _scores_plot(rows: list[Row], assignments: list[str], _) -> str:
    with _axes(0.8 + 0.5 * len(assignments), _("score (% of the points)")) as axes:
        for y, assignment in enumerate(reversed(assignments)):
            scores = [r.percent for r in rows if r.assignment == assignment and r.percent is not None]
            # equal scores (to 2 %) stacked across the row, centred: a histogram made of the notebooks themselves
            xs, ys = [], []
            for at, count in Counter(round(score / 2) for score in scores).items():
                step = min(0.13, 0.76 / count)
                xs += [2 * at] * count
                ys += [y + (i - (count - 1) / 2) * step for i in range(count)]
            axes.scatter(xs, ys, s=20, color=_A, alpha=0.75, linewidths=0, zorder=3)
            if scores:
                axes.plot([statistics.median(scores)] * 2, [y - 0.42, y + 0.42], color=_FG, linewidth=1.5,
                          alpha=0.8, zorder=4)
        axes.set_yticks(range(len(assignments)), list(reversed(assignments)))
        axes.set_xlim(-4, 104)
        axes.set_ylim(-0.6, len(assignments) - 0.4)
    return _svg(axes.figure, "scores", _("Scores of each assignment"))


def _exercise_plot(exercises: list[_Exercise], index: int, _) -> str:
    ys = list(range(len(exercises)))[::-1]
    with _axes(0.7 + 0.5 * len(exercises), _("checks passed (%)")) as axes:
        for offset, colour, tallies in ((0.19, _A, [e.visible for e in exercises]),
                                        (-0.19, _B, [e.hidden for e in exercises])):
            rates = [100 * passed / made if made else 0 for passed, made in tallies]
            axes.barh([y + offset for y in ys], rates, height=0.36, color=colour, zorder=3)
            for y, rate, (_passed, made) in zip(ys, rates, tallies):
                if made:
                    axes.text(rate + 1.5, y + offset, f"{rate:.0f}", va="center", fontsize=8)
        axes.set_yticks(ys, [e.short for e in exercises])
        axes.set_xlim(0, 112)
        axes.set_xticks(range(0, 101, 25))
    title = _("Checks passed in {assignment}").format(assignment=exercises[0].assignment)
    return _svg(axes.figure, f"exercises-{index}", title)


# --------------------------------------------------------------------------------------------------------- the page

def languages() -> list[str]:
    """The languages the page can be written in: English, and those with a report catalogue."""
    return ["en", *sorted(p.parent.parent.name for p in _locales().glob(f"*/LC_MESSAGES/{CATALOGUE}.po"))]


def _locales() -> Path:
    if (ROOT / "locales").is_dir():
        return ROOT / "locales"
    from autograde.course import default_root  # installed as a package: the course root's checkout

    return default_root() / "locales"


def _words(language: str) -> gettext.NullTranslations:
    """The page's words in ``language``: its report catalogue's (English needs none)."""
    if language == "en":
        return gettext.NullTranslations()
    path = _locales() / language / "LC_MESSAGES" / f"{CATALOGUE}.po"
    if not path.is_file():
        raise ReportError(f"no catalogue of the report's words in {language!r} (locales/{language}/LC_MESSAGES/"
                          f"{CATALOGUE}.po): choose one of {', '.join(languages())}")
    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po

    with path.open("rb") as f:
        catalogue = read_po(f, locale=language)
    compiled = io.BytesIO()
    write_mo(compiled, catalogue)  # fuzzy entries are left out: a changed message shows in English until revisited
    compiled.seek(0)
    return gettext.GNUTranslations(compiled)


def _late(row: Row) -> bool:
    """Late by the gradebook's time, or by the LMS's word (Canvas's LATE, which has no time)."""
    return "late" in row.flags or "lms-late" in row.flags


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _key(exercise: str) -> str:
    """An exercise's key, which may break after its chapter."""
    chapter, dot, name = exercise.rpartition(".")
    return f"<code>{_e(chapter)}{dot}<wbr>{_e(name)}</code>"


@cache
def _style() -> str:
    return Path(__file__).with_name("report.css").read_text(encoding="utf-8")


class _Page:
    """The report's HTML in one language. Every word goes through ``self._`` outside f-strings, where babel's
    extractor finds it (tests/test_class_report.py checks the catalogues)."""

    def __init__(self, results: Results, page: Path, language: str):
        self.results, self.page, self.language = results, page, language
        words = _words(language)
        self.plain = words.gettext  # for the plots' text
        self._ = lambda message: html.escape(words.gettext(message), quote=False)  # for the page: HTML
        self.ngettext = lambda one, many, n: html.escape(words.ngettext(one, many, n), quote=False)
        self.mistake_words = messages.translations(language)  # the checks' words in the language (none in English)
        self.untranslated = 0  # mistake names and hints shown in English on a page in another language
        self.notebooks = _Notebooks(results.out)
        self.rows = sorted(results.rows, key=lambda r: (r.student, r.assignment))
        self.assignments = sorted({r.assignment for r in self.rows})
        self.by_assignment = {a: {r.student for r in self.rows if r.assignment == a} for a in self.assignments}
        self.exercises = _exercises(results, self.notebooks)
        self.flagged_rows = [r for r in self.rows if r.kinds - TIME_FLAGS]  # a flag other than a time's
        self.late_rows = [r for r in self.rows if _late(r)]
        self.delegated: dict[tuple[str, str, str], list[Check]] = {}  # (student, assignment, exercise) → its checks
        for c in results.checks:
            if c.delegated:
                self.delegated.setdefault((c.student, c.assignment, c.exercise), []).append(c)

    # ------------------------------------------------------------------------------------------------- helpers
    def mistake_text(self, text: str) -> str:
        """A name, hint or fix of the catalogue as the checks say it in the page's language, else marked English."""
        if self.language == "en" or not text:
            return _e(text)
        translated = self.mistake_words.get(text, text)
        if translated != text:
            return _e(translated)
        self.untranslated += 1
        return f'<span lang="en">{_e(text)}</span>'

    def href(self, path: Path, cell: str = "") -> str:
        """A link from the page to ``path`` (relative: the page and OUT can be moved together), at a test cell."""
        try:
            target = urllib.parse.quote(Path(os.path.relpath(path, self.page.parent)).as_posix())
        except ValueError:  # on another drive
            target = path.resolve().as_uri()
        return _e(target + (f"#{anchor(cell)}" if cell else ""))

    def feedback(self, student: str, assignment: str) -> Path:
        return self.results.out / "feedback" / student / assignment / f"{assignment}.html"

    def links(self, student: str, assignment: str, cell: str = "") -> str:
        """Links to the row's feedback page (at ``cell``) and its notebook as it ran, those that exist."""
        feedback, notebook_word, none = self._("feedback"), self._("notebook"), self._("none written")
        parts = []
        page = self.feedback(student, assignment)
        if page.is_file():
            parts.append(f'<a href="{self.href(page, cell)}">{feedback}</a>')
        notebook = self.notebooks.path(student, assignment)
        if notebook.is_file():
            parts.append(f'<a href="{self.href(notebook)}" title="{_e(notebook)}">{notebook_word}</a>')
        return " · ".join(parts) or f'<span class="muted">{none}</span>'

    def linked(self, text: str, path: Path, cell: str = "") -> str:
        """``text``, linked to ``path`` (at a test cell) if it exists."""
        return f'<a href="{self.href(path, cell)}">{text}</a>' if path.is_file() else text

    def who(self, student: str) -> str:
        return f'<span class="id">{_e(_shown(student))}</span>'

    def some(self, items: list[str], separator: str = ", ") -> str:
        """The first `LISTED` of ``items``, and how many more."""
        more = len(items) - LISTED
        return separator.join(items[:LISTED]) + (" " + self._("and {n} more").format(n=more) if more > 0 else "")

    def students_list(self, students: set[str], exercise: _Exercise) -> str:
        """``students`` who failed ``exercise``, each linked to their feedback page at the first cell that failed."""
        return self.some([self.linked(self.who(student), self.feedback(student, exercise.assignment),
                                      exercise.failing[student][0].cell) for student in sorted(students)])

    @staticmethod
    def table(head: list[tuple[str, str]], rows: list[list[str]], stack: bool = True) -> str:
        """``head``: (label, class) per column; ``rows``: HTML cells. On a phone rows stack, or the table scrolls."""
        heads = "".join(f'<th scope="col" class="{cls}">{label}</th>' for label, cls in head)
        cells = [f' class="{cls}"' + ("" if cls == "mistake" else f' data-label="{_e(html.unescape(label))}"')
                 for label, cls in head]  # a mistake's name says what it is
        body = "".join("<tr>" + "".join(f"<td{a}>{cell}</td>" for a, cell in zip(cells, row)) + "</tr>" for row in rows)
        kind = ' class="stack"' if stack else ""
        return (f'<div class="scroll" tabindex="0"><table{kind}><thead><tr>{heads}</tr></thead>'
                f'<tbody>{body}</tbody></table></div>')

    def section(self, anchor: str, note: str, *parts: str) -> str:
        title = dict(self.titles())[anchor]
        return (f'<section id="{anchor}"><h2>{title}</h2><p class="note">{note}</p>' + "".join(parts)
                + "</section>")

    @staticmethod
    def pct(part: int, whole: int) -> str:
        return f"{part} / {whole} ({100 * part / whole:.0f} %)" if whole else "—"

    # ---------------------------------------------------------------------------------------------- sections
    def titles(self) -> list[tuple[str, str]]:
        _ = self._
        return [("scores", _("Scores")), ("exercises", _("Exercises")), ("mistakes", _("Most frequent mistakes")),
                ("unnamed", _("Where the catalogue should grow")), ("flagged", _("Flagged rows to review")),
                ("late", _("Late rows and unverified times")), ("delegations", _("Delegations"))]

    def summary(self) -> str:
        _ = self._  # a dashboard's labels: "students" above 1 as above 8
        students = {r.student for r in self.rows}
        cards = [(len(students), _("students")), (len(self.rows), _("notebooks graded")),
                 (len(self.assignments), _("assignments")), (len(self.results.checks), _("checks made")),
                 (len(self.flagged_rows), _("flagged rows to review")), (len(self.late_rows), _("late rows")),
                 (len(self.delegated), _("delegations"))]
        return ('<div class="cards">' + "".join(f'<div class="card"><b>{v}</b>{label}</div>' for v, label in cards)
                + "</div>")

    def scores(self) -> str:
        _ = self._
        body = []
        for a in self.assignments:
            rows = [r for r in self.rows if r.assignment == a]
            scores = [r.score for r in rows]
            full = sum(1 for r in rows if r.max_score and r.score >= r.max_score)
            zero = sum(1 for r in rows if r.score == 0)
            body.append([f"<code>{_e(a)}</code>", str(len(rows)), f"{max(r.max_score for r in rows):g}",
                         f"{statistics.fmean(scores):.1f}", f"{statistics.median(scores):g}",
                         f"{min(scores):g}–{max(scores):g}", str(full), str(zero)])
        head = [(_("assignment"), ""), (_("notebooks"), "num"), (_("points"), "num"), (_("mean"), "num"),
                (_("median"), "num"), (_("range"), "num"), (_("full marks"), "num"), (_("no points"), "num")]
        plot = _scores_plot(self.rows, self.assignments, self.plain)
        note = _("Each dot is a notebook, a bar the median; a score is after the late penalty, if any.")
        return self.section("scores", note,
                            f'<div class="pair"><figure>{plot}</figure>{self.table(head, body, stack=False)}</div>')

    def exercise_section(self) -> str:
        _ = self._
        note = _("The share of the checks that passed, visible and hidden. A hidden check runs the visible cases too; "
                 "a cell stops at its first failed check, so a check a notebook never reached is not counted. In the "
                 "table, the students whose failures named a catalogued mistake, had no name, came from a function "
                 "still the released stub, or came from a cell that stopped (a timeout, a crash): the checks it cut "
                 "short, and those after a cell of the student's code that never finished.")
        visible, hidden, nothing = _("visible checks"), _("hidden checks"), _("No check was made.")
        parts = ['<div class="legend">'
                 f'<span><span class="swatch" style="background:var(--plot-a)"></span>{visible}</span>'
                 f'<span><span class="swatch" style="background:var(--plot-b)"></span>{hidden}</span></div>']
        head = [(_("exercise"), ""), (_("visible passed"), "num"), (_("hidden passed"), "num"),
                (_("named mistake"), "num"), (_("no name"), "num"), (_("not written"), "num")]
        stopped = any(e.stopped for e in self.exercises)  # a column only where a notebook stopped
        head += [(_("stopped"), "num")] * stopped
        for index, assignment in enumerate(self.assignments):
            exercises = [e for e in self.exercises if e.assignment == assignment]
            parts.append(f"<h3><code>{_e(assignment)}</code></h3>")
            if not exercises:
                parts.append(f"<p class='muted'>{nothing}</p>")
                continue
            body = [[f"<code>{_e(e.short)}</code>", self.pct(*e.visible), self.pct(*e.hidden),
                     str(len(e.named_students)), str(len(e.unnamed)), str(len(e.stubs)),
                     *[str(len(e.stopped))] * stopped] for e in exercises]
            parts.append(f"<div class='pair'><figure>{_exercise_plot(exercises, index, self.plain)}</figure>"
                         f"{self.table(head, body, stack=False)}</div>")
        return self.section("exercises", note, *parts)

    def mistakes(self) -> str:
        _ = self._
        note = _("Each failure that the catalogue recognised, by how many students made it, with the hint they saw "
                 "(as the catalogue gives it now, in autograde/exercises/).")
        submitted = Counter(r.assignment for r in self.rows)
        found = sorted(((len(students), ex, name, students) for ex in self.exercises
                        for name, students in ex.named.items()), key=lambda t: (-t[0], t[1].key, t[2]))
        if not found:
            return self.section("mistakes", note, "<p>" + _("No failure named a catalogued mistake.") + "</p>")
        gone = _("This mistake is no longer in the catalogue.")
        fix_label = _("the fix (shown when the mistake comes back)")
        body = []
        for count, ex, name, students in found:
            mistake = _catalogue(ex.key)[0].get(name)
            hint = (f'<p class="hint">{self.mistake_text(mistake.hint)}</p>' if mistake
                    else f'<p class="hint muted">{gone}</p>')
            fix = (f"<details><summary>{fix_label}</summary><p class='hint'>{self.mistake_text(mistake.fix)}</p>"
                   "</details>" if mistake and mistake.fix else "")
            of = _("of {n}").format(n=submitted[ex.assignment])
            body.append([f"<b>{count}</b> <span class='muted'>{of}</span>",
                         f"<b>{self.mistake_text(name)}</b>{hint}{fix}", _key(ex.key),
                         self.students_list(students, ex)])
        head = [(_("students"), "num"), (_("mistake and the hint students saw"), "mistake"), (_("exercise"), ""),
                (_("who"), "")]
        return self.section("mistakes", note, self.table(head, body))

    def unnamed(self) -> str:
        _ = self._
        note = _("Exercises where most students who failed got no named mistake: their failures are the ones a new "
                 "catalogue entry (autograde/exercises/) would explain. A student whose function was still the "
                 "released stub did not try, and one whose failures came from a cell that stopped (a timeout, a "
                 "crash) is under Flagged rows: neither is counted, but their failures elsewhere in the notebook are. "
                 "One who also failed an exercise this one calls may have failed it there.")
        grow = sorted((e for e in self.exercises if e.unnamed and e.mostly_unnamed),
                      key=lambda e: (-len(e.unnamed), e.key))
        if not grow:
            return self.section("unnamed", note,
                                "<p>" + _("None: most failures of every exercise named a mistake.") + "</p>")
        body = []
        for e in grow:
            upstream = "<br>".join(f"<code>{_e(used.rpartition('.')[2])}</code>: {len(s)}"
                                   for used, s in sorted(e.upstream.items()))
            body.append([_key(e.key), f"<b>{len(e.unnamed)}</b>", str(len(e.unnamed) + len(e.named_students)),
                         str(len(e.named_students)), upstream or "—", str(len(e.stubs)),
                         self.students_list(e.unnamed, e)])
        head = [(_("exercise"), ""), (_("no name"), "num"), (_("failed"), "num"), (_("named"), "num"),
                (_("also failed an exercise it calls"), ""), (_("not written"), "num"),
                (_("students with no name"), "")]
        return self.section("unnamed", note, self.table(head, body))

    @cached_property
    def advice(self) -> dict[str, str]:
        """What to do about each kind of flag."""
        _ = self._
        own = _("is the work the student's own? Read the solution cells.")
        refetch = _("the notebook was not, or not all, graded: get the file again.")
        again = _("the grader's own failure: grade this notebook again (the traceback is in grader-errors.log).")
        return {
            "timeout": _("a cell ran past --cell-timeout; its message names it."),
            "crashed": _("the runner died in a cell; that cell scored 0 and its message says why."),
            "memory-limit": _("a cell went over --memory-mb; that cell scored 0."),
            "output-truncated": _("the notebook printed more than the grader keeps."),
            "bad-reply": _("the runner's reply was late, malformed or too large; code that writes to file descriptors "
                           "is worth a conversation."),
            "forbidden-call": _("the code ran a PyTorch function the exercise forbids (see Delegations); the values "
                                "decided the score."),
            "imports-reference": own, "imports-grader": own, "introspection": own, "patches-modules": own,
            "torch-internals": own, "reads-files": own, "runs-commands": own, "dynamic-code": own,
            "similar-to": _("a solution cell is nearly another student's or a piece of tfm_ref: read both."),
            "unaudited-code": _("a cell too large or too deeply nested to audit: read it yourself."),
            "syntax-error": _("a cell could not be parsed."),
            "missing-notebook": refetch, "corrupted-notebook": refetch, "notebook-too-large": refetch,
            "symlink-outside": refetch, "unsafe-zip-member": refetch, "file-too-large": refetch,
            "submission-too-large": _("the student's notebooks together were over --max-submission-mb: look at what "
                                      "they handed in, and grade again with a larger budget if it is right."),
            "grader-error": again, "grader-crashed": again, "sandbox-failed": again,
            "gradebook-error": _("nbgrader's autograde step failed on it: its grades are in grades.csv only."),
            "feedback-error": _("no feedback page was written (the traceback is in grader-errors.log)."),
            "unexportable-student-id": _("the folder's name cannot go to the gradebook: rename it to the student's id "
                                         "and grade again."),
            "late": _("handed in after the due date, by the time the gradebook has; the score is the late policy's."),
            "time-unverified": _("the time is the student's own timestamp.txt: check it against your record, or grade "
                                 "with --submitted-at."),
            "no-timestamp": _("no time for it: it counted as on time. Add it to the --submitted-at file and grade "
                              "again."),
            "bad-timestamp": _("its timestamp.txt could not be read: it counted as on time."),
            "lms-late": _("the LMS (Canvas) named the file late, with no time: give its time with --submitted-at for "
                          "the late policy to apply."),
        }

    def legend(self, rows: list[Row], kinds: set[str]) -> str:
        """Each flag of ``kinds`` that ``rows`` carry: how many rows, and what to do."""
        _ = self._
        unknown = _("a flag this report does not know: see autograde/README.md.")
        counts = Counter(kind for r in rows for kind in r.kinds & kinds)
        body = [[f"<span class='flag'>{_e(kind)}</span>", str(count), self.advice.get(kind, unknown)]
                for kind, count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
        return self.table([(_("flag"), ""), (_("rows"), "num"), (_("what to do"), "advice")], body)

    def similar(self, row: Row, named: str) -> tuple[str, str | None]:
        """What ``similar-to:<named>`` names: (another student, the cell) or (``tfm_ref.<name>``, None). A student id
        may hold ``@``: the part before the last ``@`` is a student only if the assignment has one of that name."""
        if named.startswith("tfm_ref.") or named in self.by_assignment[row.assignment]:
            return named, None
        student, at, cell = named.rpartition("@")
        return (student, cell) if at and student in self.by_assignment[row.assignment] else (named, None)

    def flag_chips(self, row: Row, kinds: set[str]) -> str:
        """The row's flags of ``kinds``; a ``similar-to:`` another student names them, linked, with the cells alike."""
        cells_word, chips = self._("cells"), []
        similar: dict[str, list[str]] = {}  # the other student → the cells
        for f in row.flags:
            kind, _colon, named = f.partition(":")
            if kind not in kinds:
                continue
            if kind == "similar-to" and named:
                other, cell = self.similar(row, named)
                if not other.startswith("tfm_ref."):
                    similar.setdefault(other, []).extend([cell] if cell else [])
                    continue
            chips.append(f"<span class='flag' title='{_e(html.unescape(self.advice.get(kind, '')))}'>"
                         f"{_e(f).replace(':', ':<wbr>')}</span>")
        if kinds & STOPPED_FLAGS & row.kinds and (cells := self.notebooks.stopped_cells(row.student, row.assignment)):
            stopped_in = self._("stopped in")
            where = ", ".join(f"<code>{_e(c)}</code>" if isinstance(c, str)
                              else _e(self._("cell {number}").format(number=c)) for c in cells)
            chips.append(f"<div>{_e(stopped_in)} {where}</div>")
        if similar:
            people = []
            for other, named_cells in similar.items():
                name = self.linked(self.who(other), self.notebooks.path(other, row.assignment))
                cells = named_cells or self.notebooks.alike(row.assignment, row.student, other)
                alike = ", ".join(f"<code>{_e(c)}</code>" for c in cells)
                people.append(f"{name} ({cells_word} {alike})" if cells else name)
            advice = _e(html.unescape(self.advice["similar-to"]))
            chips.append(f"<div><span class='flag' title='{advice}'>similar-to</span> {self.some(people, '; ')}</div>")
        return "".join(chips)

    def flagged(self) -> str:
        _ = self._
        note = _("A flag is a reason to look, never a score. Open the feedback page and the notebook as it ran "
                 "(formgrader shows it too).")
        rows = self.flagged_rows
        if not rows:
            return self.section("flagged", note, "<p>" + _("No row is flagged.") + "</p>")
        kinds = {kind for r in rows for kind in r.kinds} - TIME_FLAGS
        body = [[self.who(r.student), f"<code>{_e(r.assignment)}</code>", f"{r.score:g} / {r.max_score:g}",
                 self.flag_chips(r, kinds), self.links(r.student, r.assignment)] for r in rows]
        head = [(_("student"), ""), (_("assignment"), ""), (_("score"), "num"), (_("flags"), ""), (_("open"), "")]
        return self.section("flagged", note, self.legend(rows, kinds), self.table(head, body))

    def late(self) -> str:
        _ = self._
        note = _("Grade with --submitted-at TIMES.csv (your LMS's export) so that the late policy uses your record of "
                 "the times, not the students' own.")
        rows = [r for r in self.rows if set(r.flags) & TIME_FLAGS]
        if not rows:
            return self.section("late", note, "<p>" + _("Every row was on time, by the instructor's record.") + "</p>")

        def body(rows: list[Row]) -> list[list[str]]:
            return [[self.who(r.student), f"<code>{_e(r.assignment)}</code>",
                     "".join(f"<span class='flag'>{_e(f)}</span>" for f in r.flags if f in TIME_FLAGS),
                     _e(self.notebooks.time(r.student, r.assignment)) or "—", f"{r.score:g} / {r.max_score:g}",
                     self.links(r.student, r.assignment)] for r in rows]

        head = [(_("student"), ""), (_("assignment"), ""), (_("flags"), ""), (_("time in the gradebook"), ""),
                (_("score"), "num"), (_("open"), "")]
        rest = [r for r in rows if not _late(r)]
        parts = [self.legend(rows, TIME_FLAGS), "<h3>" + _("Late") + "</h3>",
                 self.table(head, body(self.late_rows)) if self.late_rows else "<p>" + _("No row was late.") + "</p>"]
        if rest:
            label = self.ngettext("{n} row on time, but by a time that is not the instructor's",
                                  "{n} rows on time, but by a time that is not the instructor's",
                                  len(rest)).format(n=len(rest))
            parts.append(f"<details{' open' if len(rest) <= OPEN_TIME_ROWS else ''}><summary>{label}</summary>"
                         f"{self.table(head, body(rest))}</details>")
        return self.section("late", note, *parts)

    def delegations(self) -> str:
        _ = self._
        note = _("Checks during which the code ran a PyTorch function the exercise forbids (flag forbidden-call). The "
                 "values decided the score; whether the work is the student's own is yours to judge.")
        if not self.delegated:
            return self.section("delegations", note, "<p>" + _("No check ran a forbidden function.") + "</p>")
        hidden, visible = _("hidden"), _("visible")
        body = []
        for (student, assignment, exercise), checks in sorted(self.delegated.items()):
            verdicts = ", ".join(f"{hidden if c.hidden else visible} <span class='{'ok' if c.passed else 'bad'}'>"
                                 f"{'✓' if c.passed else '✗'}</span>" for c in checks)
            ran = list(dict.fromkeys(op for c in checks for op in c.delegated))  # as the watch saw them
            body.append([self.who(student), _key(exercise), verdicts, ", ".join(f"<code>{_e(op)}</code>" for op in ran),
                         self.links(student, assignment, checks[0].cell)])
        head = [(_("student"), ""), (_("exercise"), ""), (_("checks"), ""), (_("what ran"), ""), (_("open"), "")]
        return self.section("delegations", note, self.table(head, body))

    def render(self) -> str:
        _ = self._
        sections = [self.scores(), self.exercise_section(), self.mistakes(), self.unnamed(), self.flagged(),
                    self.late(), self.delegations()]  # first: they count the mistakes left in English
        english = _("Some mistakes' names, hints or fixes have no translation in the checks' catalogue "
                    "(feedback.po) yet: they are shown in English, as the students saw them.")
        title = _("Class report")
        source = _("From {grades} and {checks} (written {time}).").format(
            grades=f"<code>{_e(self.results.out / 'grades.csv')}</code>",
            checks=f"<code>{_e(self.results.out / 'checks.csv')}</code>",
            time=_e(self.results.written.strftime("%Y-%m-%d %H:%M UTC")))
        lang = self.language.replace("_", "-")
        return "\n".join([
            f'<!DOCTYPE html><html lang="{_e(lang)}"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            '<meta name="color-scheme" content="light dark">',
            f"<title>{title}: {_e(', '.join(self.assignments))}</title><style>{_style()}</style></head><body>",
            f"<header><h1>{title}</h1><p class='muted'>{source}</p>",
            f'<p class="note">{english}</p>' if self.untranslated else "",
            "<nav><ul>" + "".join(f'<li><a href="#{k}">{label}</a></li>' for k, label in self.titles()) + "</ul></nav>",
            self.summary(), "</header><main>", *sections, "</main></body></html>"])


def class_report(out: Path, page: Path | None = None, language: str = "en") -> str:
    """The report's HTML for the run in ``out``, its links relative to ``page`` (default OUT/report.html)."""
    results = read_results(out)
    return _Page(results, (page or out / PAGE_NAME).absolute(), language).render()


def write_report(out: Path, page: Path | None = None, language: str = "en") -> Path:
    """Write the report of the grading run in ``out`` to ``page`` (default OUT/report.html); its path."""
    page = page or out / PAGE_NAME
    if page.is_dir():
        page = page / PAGE_NAME
    text = class_report(out, page, language)
    try:
        page.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(page, lambda f: f.write(text))
    except OSError as error:
        raise ReportError(f"cannot write the report to {page}: {error.strerror or error}") from None
    return page
