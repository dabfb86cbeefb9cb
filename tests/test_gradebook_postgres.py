"""The gradebook on a real PostgreSQL server: release, grade and ``nbgrader export`` with
``--db postgresql://…``; and a gradebook that cannot be reached grades nothing, in one line. A class graded with
``--db`` is not graded again into a new SQLite gradebook (a ``--db`` forgotten), and a ``--db`` the config does
not name is said to be invisible to formgrader (which reads only the config).

The server is Debian's (``make test`` installs the ``postgresql`` package): a throwaway cluster
in a temporary folder, reached on a unix socket there only, run as the ``postgres`` user when
the tests run as root (PostgreSQL refuses root), stopped at the end."""
import csv
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from autograde.classroom import make_course, solved_notebook, untouched_notebook, write_submission
from autograde.grade import GradingError, before_grading, grade
from notebook_sandbox.container import Limits

A = "ch01_attention"
NBGRADER = str(Path(sys.executable).parent / "nbgrader")


def _postgres_bin() -> Path | None:
    """Debian keeps initdb and pg_ctl in /usr/lib/postgresql/<version>/bin, off the PATH."""
    on_path = shutil.which("pg_ctl")
    if on_path:
        return Path(on_path).resolve().parent
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"), key=lambda p: int(p.parts[-3]))
    return found[-1].parent if found else None


def _run(*command, timeout=120):
    result = subprocess.run([str(c) for c in command], capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{command}: {result.stdout}{result.stderr}"
    return result


@pytest.fixture(scope="module")
def postgres_url():
    bindir = _postgres_bin()
    if bindir is None:
        pytest.skip("needs PostgreSQL's initdb/pg_ctl (make test installs Debian's postgresql)")
    folder = Path(tempfile.mkdtemp(prefix="gradebook-pg-"))  # short: the socket's path must fit in 107 bytes
    as_server = []
    if os.geteuid() == 0:
        server = pwd.getpwnam("postgres")  # the Debian package's system user
        os.chown(folder, server.pw_uid, server.pw_gid)
        as_server = ["runuser", "-u", "postgres", "--"]
    data = folder / "data"
    _run(*as_server, bindir / "initdb", "-D", data, "-U", "grader", "-A", "trust", "--no-sync")
    _run(*as_server, bindir / "pg_ctl", "-D", data, "-l", folder / "server.log", "-w", "-t", "60", "-o",
         f"-k {folder} -c listen_addresses='' -c fsync=off", "start")
    try:
        _run(bindir / "createdb", "-h", folder, "-U", "grader", "gradebook")
        yield f"postgresql://grader@/gradebook?host={folder}"
    finally:
        subprocess.run([*as_server, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
                       capture_output=True, timeout=60)
        shutil.rmtree(folder, ignore_errors=True)


def _autograde(course, *args):
    return subprocess.run([sys.executable, "-m", "autograde", *args, "--root", str(course)], cwd=course,
                          capture_output=True, text=True, timeout=900)


@pytest.mark.slow
def test_release_grade_and_export_with_a_postgresql_gradebook(postgres_url, tmp_path):
    course = make_course(tmp_path / "course", [A])
    released = _autograde(course, "release", A, "--db", postgres_url)
    assert released.returncode == 0, released.stderr[-3000:]
    write_submission(course / "submitted", "solved", A, solved_notebook(A, root=course))
    write_submission(course / "submitted", "untouched", A, untouched_notebook(A, course))
    graded = _autograde(course, "grade", "submitted", "--db", postgres_url)
    assert graded.returncode == 0, graded.stderr[-3000:]
    export = tmp_path / "export.csv"
    exported = subprocess.run([NBGRADER, "export", f"--db={postgres_url}", f"--to={export}"], cwd=course / "autograde",
                              capture_output=True, text=True, timeout=300)
    assert exported.returncode == 0, exported.stderr
    with export.open() as f:
        scores = {row["student_id"]: (float(row["score"]), float(row["max_score"])) for row in csv.DictReader(f)}
    assert scores == {"solved": (10.0, 10.0), "untouched": (0.0, 10.0)}
    assert not (course / "gradebook.db").exists()  # nothing went to nbgrader's default SQLite file
    # graded again without --db: refused, in one line, before anything is written
    rows = (course / "grades.csv").read_bytes()
    again = _autograde(course, "grade", "submitted")
    assert again.returncode == 2 and "does not exist: grade with the --db" in again.stderr, again.stderr[-3000:]
    assert "Traceback" not in again.stderr and len(again.stderr.strip().splitlines()) == 1
    assert (course / "grades.csv").read_bytes() == rows and not (course / "gradebook.db").exists()


def test_grading_with_a_db_the_config_does_not_name_says_formgrader_will_not_see_it(tmp_path):
    course = make_course(tmp_path / "course", [A])
    url = "postgresql://grader@/course?host=/run/postgresql"
    notes = before_grading(course, url, course, Limits())
    assert any("formgrader" in note and url in note and f"sqlite:///{course}/gradebook.db" in note for note in notes)
    with (course / "autograde" / "nbgrader_config.py").open("a") as config:
        config.write(f"\nc.CourseDirectory.db_url = {url!r}\n")
    assert before_grading(course, url, course, Limits()) == before_grading(course, None, course, Limits()) == []


def test_a_class_graded_into_another_gradebook_is_not_graded_into_a_new_one(tmp_path):
    course = make_course(tmp_path / "course", [A])
    write_submission(tmp_path / "again", "solved", A, "{}")
    graded_before = f"student_id,assignment,notebook,score,max_score,flags,cells\nsolved,{A},{A},7.0,10.0,,softmax_visible=1\n"
    (course / "grades.csv").write_text(graded_before)
    with pytest.raises(GradingError, match=r"grades.csv holds 1 row graded into a gradebook, but sqlite:///"):
        grade(tmp_path / "again", root=course, progress=False)
    assert (course / "grades.csv").read_text() == graded_before
    assert sorted(p.name for p in course.iterdir()) == ["autograde", "grades.csv", "nbgrader_config.py", "solutions"]


@pytest.mark.slow
def test_a_gradebook_that_cannot_be_reached_grades_nothing_in_one_line(tmp_path):
    course = make_course(tmp_path / "course", [A])
    write_submission(course / "submitted", "solved", A, "{}")
    result = _autograde(course, "grade", "submitted", "--db", f"postgresql://grader@/gradebook?host={tmp_path}/nowhere")
    assert result.returncode == 2 and "cannot open the gradebook" in result.stderr
    assert "Traceback" not in result.stderr and not (course / "grades.csv").exists()
