"""``python -m autograde``: release | grade | bench | audit (the instructor's commands; the class report is
``python -m class_report``)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .course import course_options, default_root


def _positive(kind: type):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive, got {text}")
        return value
    return parse


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograde", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    course = course_options()

    rel = commands.add_parser("release", parents=[course],
                              help="generate release/<id>/<id>.ipynb from solutions/<id>/<id>.md")
    rel.add_argument("assignments", nargs="*", help="assignment ids (default: all)")

    grd = commands.add_parser("grade", parents=[course],
                              help="grade a class: nbgrader's submitted/<student>/<assignment>/<assignment>.ipynb, or "
                              "a Canvas, Moodle or Blackboard download (folder or .zip)",
                              description="Grade every submission in SUBMISSIONS and merge the rows into the class's "
                              "records in OUT (a student or assignment graded again replaces only its own rows).")
    grd.add_argument("submissions", type=Path, metavar="SUBMISSIONS",
                     help="a folder or a .zip: nbgrader's <student>/<assignment>/<assignment>.ipynb, or an LMS's "
                     "download (see --layout)")
    grd.add_argument("--out", type=Path, help="writes OUT/grades.csv, OUT/checks.csv, OUT/autograded/ and "
                     "OUT/feedback/ (default: the course root, where formgrader and nbgrader release_feedback look). "
                     "The scores still go to the course's gradebook unless --db names another")
    grd.add_argument("--layout", choices=["auto", "nbgrader", "canvas", "moodle", "blackboard"], default="auto",
                     help="how SUBMISSIONS is laid out: nbgrader's folders; Canvas's "
                     "<name>_<userid>_<submissionid>_<file>; Moodle's <Full Name>_<id>_assignsubmission_file_/<file>; "
                     "Blackboard's <assignment>_<user>_attempt_<time>_<file>; auto: as the names show "
                     "(default: %(default)s)")
    grd.add_argument("--mapping", type=Path, metavar="MAPPING.csv",
                     help="columns lms_name, student_id: the student id to grade each LMS name (or LMS user number) "
                     "under (default: none; an id is made from the LMS's name)")
    grd.add_argument("--jobs", type=_positive(int), default=1,
                     help="notebooks graded in parallel, one core each (default: %(default)s)")
    grd.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                     help="grade on the workers of this Dask scheduler instead (each worker thread a slot; --jobs "
                     "is unused): they must see the course root and OUT at the same paths and reach the gradebook "
                     "(autograde/README.md, \"More than one machine\"; default: none, this machine's --jobs)")
    grd.add_argument("--cell-timeout", type=_positive(float), default=30.0,
                     help="seconds a cell may run; a notebook, six times that (default: %(default)g). The nbgrader "
                     "config's c.Execute.timeout is not used: grading runs no kernel")
    grd.add_argument("--memory-mb", type=_positive(int), default=2048,
                     help="memory a notebook may allocate, in MB (default: %(default)s)")
    grd.add_argument("--processes", type=_positive(int), default=64,
                     help="threads a notebook may run at once; it may start no process (default: %(default)s)")
    grd.add_argument("--tmp-mb", type=_positive(int), default=64,
                     help="size of a notebook's /tmp, in MB (default: %(default)s)")
    grd.add_argument("--max-notebook-mb", type=_positive(float), default=20.0,
                     help="larger submitted notebooks are not read, flag notebook-too-large (default: %(default)g)")
    grd.add_argument("--max-submission-mb", type=_positive(float), default=100.0,
                     help="a student's notebooks together, all assignments (unpacked, from a zip): over it, none "
                     "of that student's is read (flag submission-too-large); everyone else is graded "
                     "(default: %(default)g)")
    grd.add_argument("--submitted-at", type=Path, metavar="TIMES.csv",
                     help="when each submission was handed in, from a record the students cannot write (your LMS's "
                     "export): columns student_id, assignment, time (ISO 8601, or as Canvas and Moodle write it). "
                     "The late policy uses it, before a time the download's names give (Blackboard's); a submission "
                     "without a time is flagged no-timestamp. Without either, a student's own timestamp.txt is used "
                     "and flagged time-unverified (default: none)")
    grd.add_argument("--timezone", default="UTC",
                     help="the time zone of a time in TIMES.csv that names none, and of Blackboard's attempt times, "
                     "e.g. Europe/Berlin (default: %(default)s, as nbgrader reads a due date without one)")

    bch = commands.add_parser("bench", help="grading throughput on a generated class")
    bch.add_argument("--students", type=_positive(int), default=8)
    bch.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                     help="measure a Dask cluster's workers instead: notebooks per second per worker")
    bch.add_argument("--dir", type=Path, help="where the generated course and class are written: with --scheduler, "
                     "a folder every worker sees at the same path (default: a temporary folder)")

    aud = commands.add_parser("audit", help="static audit flags of notebooks' code cells")
    aud.add_argument("notebooks", nargs="+", type=Path)

    args = parser.parse_args(argv)
    if args.command in ("release", "grade"):
        args.root = (args.root or default_root()).resolve()
    try:
        if args.command == "release":
            from .release import release

            for path in release(args.assignments or None, args.db, args.root):
                print(path)
        elif args.command == "grade":
            from .grade import before_grading, grade, summary
            from notebook_sandbox.container import Limits

            limits = Limits(cell_timeout=args.cell_timeout, memory_mb=args.memory_mb, processes=args.processes,
                            tmp_mb=args.tmp_mb, notebook_mb=args.max_notebook_mb)
            out = args.out or args.root
            rows = grade(args.submissions, out, jobs=args.jobs, db_url=args.db, limits=limits, root=args.root,
                         submitted_at=args.submitted_at, timezone=args.timezone,
                         max_submission_mb=args.max_submission_mb, layout=args.layout, mapping=args.mapping,
                         notes=before_grading(args.root, args.db, out, limits), scheduler=args.scheduler)
            print(summary(rows, out, args.root, args.db))
        elif args.command == "bench":
            from .bench import bench

            bench(args.students, scheduler=args.scheduler, where=args.dir)
        else:
            from .audit import audit
            from .notebook import load_notebook

            for path in args.notebooks:
                nb, problem = load_notebook(path)
                sources = [c.source for c in nb.cells if c.cell_type == "code"] if nb else []
                print(f"{path}: {', '.join(audit(sources)) or problem or 'clean'}")
    except (ValueError, RuntimeError) as error:  # GradingError, unknown assignments: one line, not a traceback
        parser.exit(2, f"{parser.prog} {args.command}: error: {error}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
