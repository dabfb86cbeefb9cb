"""Course roots for the tests that release and grade: `autograde.classroom.make_course`, with what those tests add.

Releasing takes seconds (nbgrader's generate_assignment), copying a released course milliseconds: `ReleasedCourses`
releases each kind of course once and hands out fresh copies, since grading writes into its course root
(gradebook.db, grades.csv, autograded/) and no two tests may share one. tests/conftest.py serves it as the
``released_course`` fixture.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

from nbgrader.api import Gradebook

from autograde.classroom import make_course
from editions.assignments import ROOT
from autograde.course import CONFIG_NAME
from editions.notebooks import CATALOGUES
from autograde.release import release

__all__ = ["DUE", "LANGUAGE", "new_course", "set_due", "ReleasedCourses", "run_cli"]

DUE = datetime(2026, 11, 20, 17, 0)  # UTC, as nbgrader keeps a due date
LANGUAGE = "zh_CN"


def new_course(folder: Path, assignments: list[str], *, late_penalty: str | None = None,
               chinese: bool = False) -> Path:
    """`make_course`, with nbgrader's ``LateSubmissionPlugin.penalty_method`` set to ``late_penalty`` ("zero" scores
    a late submission 0) and the Chinese notebook catalogues (release then writes the Chinese notebooks) where asked."""
    root = make_course(folder, assignments)
    if late_penalty is not None:
        with (root / "autograde" / CONFIG_NAME).open("a") as config:
            config.write(f'\nc.LateSubmissionPlugin.penalty_method = "{late_penalty}"\n')
    if chinese:
        catalogues = Path("locales") / LANGUAGE / "LC_MESSAGES" / CATALOGUES
        shutil.copytree(ROOT / catalogues, root / catalogues)
    return root


def set_due(root: Path, assignment: str, due: datetime = DUE) -> None:
    """Give ``assignment`` a due date in the course's gradebook, as ``nbgrader db assignment add --duedate`` does."""
    with Gradebook(f"sqlite:///{root}/gradebook.db") as gb:
        gb.update_or_create_assignment(assignment, duedate=due)


class ReleasedCourses:
    """Released courses kept in ``store``, one for each set of `new_course`'s options, copied on demand."""

    def __init__(self, store: Path):
        self.store = store
        self.made: dict[tuple, Path] = {}

    def __call__(self, folder: Path, assignments: list[str], *, late_penalty: str | None = None,
                 chinese: bool = False, due: Iterable[str] = ()) -> Path:
        """A course of its own at ``folder`` (which must not exist): `new_course`'s, with ``assignments`` released
        and each assignment in ``due`` due at `DUE`."""
        key = (tuple(assignments), late_penalty, chinese)
        if key not in self.made:
            made = new_course(self.store / f"course{len(self.made)}", assignments, late_penalty=late_penalty,
                              chinese=chinese)
            release(list(assignments), root=made)
            self.made[key] = made
        root = Path(shutil.copytree(self.made[key], folder))  # copy2: the mtimes that say the release is current
        for assignment in due:
            set_due(root, assignment)
        return root


def run_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """``python -m autograde ARGS`` as an instructor runs it, its output captured."""
    return subprocess.run([sys.executable, "-m", "autograde", *args], capture_output=True, text=True, env=env,
                          timeout=600)
