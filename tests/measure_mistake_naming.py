"""How often the checks name a student's mistake, in each language, and how long each check takes beside busy work.

Reads a folder of wrong solution cells kept outside the repository: Python files, each with
``MISTAKES = [(exercise key, one-line description, code of the solution cell), ...]``. Each cell runs in the
namespace of its chapter's instructor notebook (the setup cell and every correct solution cell, from solutions/),
then the exercise's visible check and its hidden check run on the name the notebook's test cell checks, as a
notebook's first run of them does (`measure_check_times.timed_check`), with two busy processes beside, in English and
in every language the checks speak. A mistake counts as named in a language when the first check that fails it names
a catalogued mistake in that language (the visible check, else the hidden one); one that passes both is listed. A
measurement to run by hand, not a test:

    .venv/bin/python tests/measure_mistake_naming.py /path/to/mistakes             # every mistake, both languages
    .venv/bin/python tests/measure_mistake_naming.py /path/to/mistakes --only ch09 --why   # and what unnamed ones say
"""
from __future__ import annotations

import argparse
import runpy
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat

from autograde.messages import ENGLISH, languages, speaking, translations
from autograde.spec import get_exercise
from autograde.testcells import parse_test_cell
from measure_check_times import busy_processes, timed_check

SOLUTIONS = Path(__file__).resolve().parent.parent / "solutions"


@dataclass(frozen=True)
class Result:
    """One check of one mistake: its seconds, whether it failed, and the catalogued mistake it named, if any."""

    seconds: float
    failed: bool
    named: str | None
    said: str  # the first line of the message: what a student reads when nothing is named

    def cell(self) -> str:
        what = f"named: {self.named}" if self.named else ("failed, no name" if self.failed else "passed")
        return f"{self.seconds:5.2f} s {what}"


def load_mistakes(folder: Path) -> list[tuple[str, str, str]]:
    """(exercise key, description, code) of every mistake in the folder's Python files, in file order."""
    files = sorted(folder.glob("*.py"))
    if not files:
        raise SystemExit(f"{folder}: no Python file holding MISTAKES")
    found = []
    for path in files:
        for entry in runpy.run_path(str(path)).get("MISTAKES", ()):
            if not (isinstance(entry, tuple) and len(entry) == 3 and all(isinstance(part, str) for part in entry)):
                raise SystemExit(f"{path}: an entry of MISTAKES is not (exercise key, description, code): {entry!r:.80}")
            found.append(entry)
    return found


def notebook(chapter: str) -> tuple[dict, dict[str, str]]:
    """The namespace of ``chapter``'s instructor notebook after its setup and solution cells, and, for each exercise
    key, the name its visible test cell checks."""
    path = SOLUTIONS / chapter / f"{chapter}.ipynb"
    if not path.is_file():
        raise SystemExit(f"no instructor notebook {path}")
    namespace: dict = {"__name__": "__main__"}
    checked: dict[str, str] = {}
    for cell in nbformat.read(path, as_version=4).cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code":
            continue
        if meta.get("grade_id") == "setup" or meta.get("solution"):
            exec(compile(cell.source, f"{chapter}:{meta.get('grade_id')}", "exec"), namespace)
        elif meta.get("grade") and "check(" in cell.source:
            for call in parse_test_cell(cell.source):
                checked.setdefault(call.key.rpartition(".")[2], call.name)
    return namespace, checked


def run_one(key: str, code: str, namespaces: dict, seed: int, language: str) -> tuple[Result, Result]:
    """The visible and the hidden check of one wrong cell, in ``language``."""
    chapter, _, name = key.rpartition(".")
    if chapter not in namespaces:
        namespaces[chapter] = notebook(chapter)
    base, checked = namespaces[chapter]
    if name not in checked:
        raise SystemExit(f"{key}: the notebook has no test cell checking it")
    namespace = dict(base)
    try:
        exec(compile(code, f"<mistake {key}>", "exec"), namespace)
    except Exception as error:  # a cell of the kept set that does not even run is the set's mistake, not the check's
        raise SystemExit(f"{key}: its cell does not run: {type(error).__name__}: {error}") from error
    exercise, impl = get_exercise(key), namespace[checked[name]]
    results = []
    with speaking(language):
        for hidden in (False, True):
            seconds, report = timed_check(exercise, impl, seed, hidden)
            shown = report.mistake if report.mistake and (
                language == ENGLISH or report.mistake in translations(language)) else None
            said = report.message.strip().splitlines()[0] if report.message.strip() else ""
            results.append(Result(seconds, not report.passed, shown, said))
    return results[0], results[1]


def first_failure(visible: Result, hidden: Result) -> Result | None:
    """What the student learns first: the visible check's failure, else the hidden one's, else None (passed)."""
    return visible if visible.failed else hidden if hidden.failed else None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="the folder of mistakes (Python files with MISTAKES)")
    parser.add_argument("--only", default="", help="only the exercise keys starting with this")
    parser.add_argument("--quiet", action="store_true", help="no busy processes beside the checks")
    parser.add_argument("--why", action="store_true", help="print what an unnamed failure says")
    parser.add_argument("--seed", type=int, default=2000, help="the first check's seed (each check gets its own)")
    args = parser.parse_args(argv)
    mistakes = [m for m in load_mistakes(args.folder) if m[0].startswith(args.only)]
    if not mistakes:
        raise SystemExit(f"no mistake in {args.folder} is of an exercise whose key starts with {args.only!r}")
    spoken = [ENGLISH, *languages()]
    namespaces: dict = {}
    named = {language: 0 for language in spoken}
    passing, slowest = [], (0.0, "")
    with busy_processes(0 if args.quiet else 2):
        print(f"{len(mistakes)} mistakes, languages {', '.join(spoken)}, {0 if args.quiet else 2} busy processes "
              f"beside; columns: visible check, hidden check")
        for i, (key, description, code) in enumerate(mistakes):
            for j, language in enumerate(spoken):
                visible, hidden = run_one(key, code, namespaces, args.seed + 2 * i + j, language)
                first = first_failure(visible, hidden)
                named[language] += bool(first and first.named)
                print(f"{language:5} {visible.cell():60.60} | {hidden.cell():60.60} | {key}: {description}",
                      flush=True)
                if args.why and first and not first.named:
                    print(f"      says: {first.said[:200]}")
                if first is None and j == 0:
                    passing.append(f"{key}: {description}")
                for result, which in ((visible, "visible"), (hidden, "hidden")):
                    if result.seconds > slowest[0]:
                        slowest = (result.seconds, f"{key} {which}, {language}: {description}")
    for language in spoken:
        print(f"named ({language}): {named[language]} of {len(mistakes)} = {named[language] / len(mistakes):.1%}")
    print(f"passing both checks: {len(passing)}" + "".join(f"\n  {p}" for p in passing))
    print(f"slowest check: {slowest[0]:.2f} s ({slowest[1]})")


if __name__ == "__main__":
    sys.exit(main())
