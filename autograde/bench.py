"""``python -m autograde bench``: grading throughput, seconds per notebook with 1 and 2 jobs.

Grades a generated class (`autograde.classroom.make_class`) twice, and reports the wall time
per notebook, worker start-up included.
"""
from __future__ import annotations

import tempfile
import time
from pathlib import Path

from .course import assignment_ids
from .classroom import make_class, make_course
from .grade import grade
from .release import release

__all__ = ["bench"]


def bench(n_students: int = 8, jobs: tuple[int, ...] = (1, 2), assignments: list[str] | None = None) -> dict[int, float]:
    """Seconds per notebook for each number of jobs."""
    assignments = assignments or assignment_ids()
    with tempfile.TemporaryDirectory() as tmp:
        course = make_course(Path(tmp) / "course", assignments)
        release(assignments, root=course)
        notebooks = make_class(Path(tmp) / "class", n_students, assignments, course)
        timings = {}
        for n_jobs in jobs:
            started = time.perf_counter()
            grade(Path(tmp) / "class", Path(tmp) / f"out{n_jobs}", jobs=n_jobs, root=course, progress=False)
            timings[n_jobs] = (time.perf_counter() - started) / len(notebooks)
            print(f"{len(notebooks)} notebooks, {n_jobs} job(s): {timings[n_jobs]:.2f} s per notebook")
    return timings
