"""``python -m autograde grade SUBMISSIONS --out OUT``: grade a class.

SUBMISSIONS is a folder (or a .zip of one) laid out ``<student_id>/<assignment>/<assignment>.ipynb``.
For each notebook: merge the student's code into the source notebook (`autograde.notebook`),
audit it (`autograde.audit`), execute it in a warm sandboxed worker (`autograde.sandbox`,
`autograde.executor`), score each test cell (its points if it ran without error), write the
feedback page, and record the grades in nbgrader's gradebook. Writes

    OUT/grades.csv                                   student_id, assignment, notebook, score, max_score, flags, per-cell scores
    OUT/feedback/<student_id>/<assignment>/<assignment>.html

Every submission gets a row scored against the assignment's real maximum, whatever it does:
an unreadable or missing notebook scores 0 of the maximum with a flag. ``jobs`` workers grade
in parallel; the CSV is written once, from all rows, at the end.
"""
from __future__ import annotations

import csv
import os
import queue
import tempfile
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import nbformat
from tqdm import tqdm

from .audit import audit
from .course import ROOT, assignment_ids, nbgrader_config, released_notebook
from .feedback import write_feedback
from .notebook import GradedCell, load_notebook, max_score, merge
from .release import release, source_notebook
from .sandbox import Worker

__all__ = ["Submission", "find_submissions", "grade", "CSV_COLUMNS"]

CSV_COLUMNS = ["student_id", "assignment", "notebook", "score", "max_score", "flags", "cells"]


@dataclass(frozen=True)
class Submission:
    student_id: str
    assignment: str
    path: Path | None  # None: the notebook is missing


def _extract(archive: Path, into: Path, assignments: list[str]) -> Path:
    """Unzip safely (no absolute paths, no ``..``); the folder holding the student folders."""
    with zipfile.ZipFile(archive) as zf:
        for member in zf.infolist():
            target = (into / member.filename).resolve()
            if not str(target).startswith(str(into.resolve()) + os.sep) and target != into.resolve():
                raise ValueError(f"{archive}: unsafe path in archive: {member.filename!r}")
        zf.extractall(into)
    entries = [p for p in into.iterdir() if not p.name.startswith((".", "__MACOSX"))]
    looks_like_students = any(d.is_dir() and any(a.name in assignments for a in d.iterdir() if a.is_dir())
                              for d in entries)
    return entries[0] if len(entries) == 1 and entries[0].is_dir() and not looks_like_students else into


def find_submissions(root: Path, assignments: list[str]) -> list[Submission]:
    """Every ``<student>/<assignment>/`` folder under ``root`` for a known assignment."""
    found = []
    for student in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        for folder in sorted(p for p in student.iterdir() if p.is_dir() and p.name in assignments):
            notebook = folder / f"{folder.name}.ipynb"
            if not notebook.exists():
                others = sorted(folder.glob("*.ipynb"))
                notebook = others[0] if len(others) == 1 else None
            found.append(Submission(student.name, folder.name, notebook))
    return found


@dataclass
class _Assignment:
    source: nbformat.NotebookNode
    release: nbformat.NotebookNode


def _assets(assignments: list[str], db_url: str, root: Path) -> dict[str, _Assignment]:
    """Source and released notebooks; (re)released when stale or unknown to the gradebook."""
    from .gradebook import has_assignment

    sources = {a: source_notebook(a, root / "solutions") for a in assignments}
    stale = []
    for assignment, source in sources.items():
        released = released_notebook(assignment, root)
        if not released.exists() or released.stat().st_mtime < source.stat().st_mtime or not has_assignment(db_url, assignment):
            stale.append(assignment)
    if stale:
        release(stale, db_url, root)
    return {a: _Assignment(nbformat.read(source, 4), nbformat.read(released_notebook(a, root), 4))
            for a, source in sources.items()}


RUNNABLE = ("student", "test", "locked")  # markdown and widget cells are not executed


def _job(cells: list[GradedCell], cell_timeout: float, memory_mb: int) -> dict:
    runnable = [c for c in cells if c.kind in RUNNABLE]
    return {"cells": [{"source": c.source, "kind": c.kind} for c in runnable], "cell_timeout": cell_timeout,
            "total_timeout": cell_timeout * 6, "memory_mb": memory_mb}


def _grade_one(sub: Submission, assets: _Assignment, worker: Worker, out: Path, cell_timeout: float,
               memory_mb: int) -> dict:
    flags: list[str] = []
    student, problem = (load_notebook(sub.path) if sub.path else (None, "missing notebook"))
    if problem:
        flags.append("missing-notebook" if sub.path is None else "corrupted-notebook")
    cells = merge(assets.source, assets.release, student)
    flags += audit([c.source for c in cells if c.kind == "student"])
    try:
        executed = iter(worker.run(_job(cells, cell_timeout, memory_mb)))
        results = [next(executed) if c.kind in RUNNABLE else {"status": "skipped"} for c in cells]
    except RuntimeError as error:
        flags.append("worker-failed")
        results = [{"status": "error", "stdout": "", "error": str(error)} for _ in cells]
    if not worker.sandboxed:
        flags.append("unsandboxed")
    statuses = {r["status"] for r in results}
    flags += [s for s in ("timeout", "crashed") if s in statuses]
    if any("ForbiddenCall" in r.get("error", "") for r in results):
        flags.append("forbidden-call")
    scores = {c.grade_id: (c.points if r["status"] == "ok" else 0.0) for c, r in zip(cells, results) if c.kind == "test"}
    score, maximum = sum(scores.values()), max_score(cells)
    if problem:
        results = [{**r, "error": r.get("error") or problem} for r in results]
    notebook = sub.assignment
    write_feedback(out / "feedback" / sub.student_id / sub.assignment / f"{notebook}.html",
                   f"{sub.assignment} — {sub.student_id}", cells, results, score, maximum, sorted(set(flags)))
    return {"student_id": sub.student_id, "assignment": sub.assignment, "notebook": notebook, "score": score,
            "max_score": maximum, "flags": ";".join(sorted(set(flags))), "cell_scores": scores}


def grade(submissions: Path, out: Path, jobs: int = 1, db_url: str | None = None, cell_timeout: float = 30.0,
          memory_mb: int = 2048, sandboxed: bool | None = None, root: Path = ROOT, progress: bool = True) -> list[dict]:
    """Grade every submission under ``submissions`` (folder or .zip); see the module docstring.

    Returns:
        the rows written to ``out/grades.csv``, sorted by student and assignment.
    """
    from .gradebook import record

    db_url = db_url or nbgrader_config(root=root).CourseDirectory.db_url
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        known = assignment_ids(root / "solutions")
        folder = _extract(submissions, Path(tmp), known) if submissions.suffix == ".zip" else submissions
        if not folder.is_dir():
            raise ValueError(f"{submissions} is neither a folder nor a .zip of one")
        subs = find_submissions(folder, known)
        assets = _assets(sorted({s.assignment for s in subs}), db_url, root)
        workers: queue.Queue[Worker] = queue.Queue()
        for _ in range(max(1, jobs)):
            workers.put(Worker(sandboxed))

        def one(sub: Submission) -> dict:
            worker = workers.get()
            try:
                return _grade_one(sub, assets[sub.assignment], worker, out, cell_timeout, memory_mb)
            finally:
                workers.put(worker)

        try:
            with ThreadPoolExecutor(max(1, jobs)) as pool:
                rows = list(tqdm(pool.map(one, subs), total=len(subs), desc="grading", unit="notebook",
                                 disable=not progress))
        finally:
            while not workers.empty():
                workers.get().close()
    rows.sort(key=lambda r: (r["student_id"], r["assignment"]))
    _write_csv(out / "grades.csv", rows)
    record(db_url, rows)
    return rows


def _write_csv(path: Path, rows: list[dict]) -> None:
    partial = path.with_suffix(".csv.partial")
    with partial.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, CSV_COLUMNS)
        writer.writeheader()
        for row in rows:
            cells = ";".join(f"{k}={v:g}" for k, v in row["cell_scores"].items())
            writer.writerow({**{k: row[k] for k in CSV_COLUMNS if k != "cells"}, "cells": cells})
    partial.replace(path)  # atomic: a reader never sees half a file
