"""python -m class_report [OUT]: bring OUT/grades.csv in step with the scores given by hand in formgrader since
grading, then write the class report, OUT/report.html."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from autograde.course import course_options, default_root, nbgrader_config
from autograde.gradebook import GradebookError
from autograde.records import refresh_scores

from .report import write_report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m class_report", description=__doc__, parents=[course_options()])
    parser.add_argument("results", nargs="?", type=Path, metavar="OUT",
                        help="where `python -m autograde grade` wrote grades.csv and checks.csv (default: the course "
                        "root)")
    parser.add_argument("--out", type=Path, dest="page", help="the page to write (default: OUT/report.html)")
    parser.add_argument("--lang", default="en", help="the page's language: en (default) or zh_CN")
    args = parser.parse_args(argv)
    root = (args.root or default_root()).resolve()
    results = args.results or root
    try:
        try:  # scores given by hand in formgrader since grading
            db_url = nbgrader_config(args.db, root).CourseDirectory.db_url
            changed = refresh_scores(results / "grades.csv", db_url) if (results / "grades.csv").is_file() else 0
        except (ValueError, GradebookError) as error:
            print(f"grades.csv not compared with a gradebook ({error})", file=sys.stderr)
        else:
            if changed:
                rows = "1 row" if changed == 1 else f"{changed} rows"
                print(f"grades.csv: {rows} brought in step with the gradebook's scores")
        print(f"class report → {write_report(results, args.page, args.lang)}")
    except (ValueError, RuntimeError) as error:  # ReportError: one line, not a traceback
        parser.exit(2, f"{parser.prog}: error: {error}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
