"""``python -m autograde bench``: grading throughput, seconds per notebook with 1 and 2 jobs, or notebooks per
second per worker of a Dask cluster (``--scheduler``).

Grades a generated class (`autograde.classroom.make_class`) once per setting, and reports the wall time per
notebook, worker start-up included.
"""
from __future__ import annotations

import tempfile
import time
from pathlib import Path

from editions.assignments import assignment_ids
from .classroom import make_class, make_course
from .grade import grade
from .release import release

__all__ = ["bench"]


def bench(n_students: int = 8, jobs: tuple[int, ...] = (1, 2), assignments: list[str] | None = None,
          scheduler: str | None = None, where: Path | None = None) -> dict[int, float]:
    """Seconds per notebook for each number of jobs; with ``scheduler``, for the cluster's number of workers
    (the class is written under ``where``, which the workers must see)."""
    assignments = assignments or assignment_ids()
    if where is not None:
        where.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=where) as tmp:
        course = make_course(Path(tmp) / "course", assignments)
        release(assignments, root=course)
        notebooks = make_class(Path(tmp) / "class", n_students, assignments, course)
        timings = {}
        for n_jobs in ([0] if scheduler else jobs):  # 0: the cluster's workers
            started = time.perf_counter()
            grade(Path(tmp) / "class", Path(tmp) / f"out{n_jobs}", jobs=max(n_jobs, 1), root=course, progress=False,
                  scheduler=scheduler)
            seconds = (time.perf_counter() - started) / len(notebooks)
            if scheduler:
                from distributed import Client

                with Client(scheduler, set_as_default=False) as client:
                    threads = client.nthreads()
                n_jobs = len(threads)
                print(f"{len(notebooks)} notebooks, {n_jobs} worker(s) ({sum(threads.values())} threads): "
                      f"{1 / seconds:.2f} notebooks per second, {1 / seconds / n_jobs:.2f} per worker")
            else:
                print(f"{len(notebooks)} notebooks, {n_jobs} job(s): {seconds:.2f} s per notebook")
            timings[n_jobs] = seconds
    return timings
