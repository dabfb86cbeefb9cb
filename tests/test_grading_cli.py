"""The grading command for an instructor: bad input is one line and status 2, a sandbox that cannot
start grades nothing, a grading slot that dies costs only the notebook it was on, and what one student
hands in (a forged time, a hoard of notebooks, a folder name that is a formula) costs that student only."""
import csv
import os
import threading
import time
import zipfile
from datetime import datetime

import nbformat
import pytest
from nbgrader.api import Gradebook

from courses import run_cli

from autograde.classroom import solved_notebook, write_submission
from autograde.course import nbgrader_config
from autograde.pool import SlotPool
from notebook_sandbox.container import Limits, sandbox_available

A = "ch01_attention"


@pytest.mark.parametrize(("args", "message"), [
    (["grade", "no/such/folder", "--out", "x"], "neither a folder nor a .zip"),
    (["grade", ".", "--out", "x", "--jobs", "0"], "must be positive"),
    (["grade", ".", "--out", "x", "--cell-timeout", "soon"], "is not a number"),
    (["release", "ch42_nothing"], "no assignment 'ch42_nothing'"),
])
@pytest.mark.slow
def test_bad_input_is_one_line_and_status_2(tmp_path, args, message):
    result = run_cli(*[str(tmp_path / a) if a in ("no/such/folder", "x") else a for a in args])
    assert result.returncode == 2 and message in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_an_output_folder_that_cannot_be_written_is_refused(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = run_cli("grade", str(tmp_path), "--out", str(blocker / "out"))
    assert result.returncode == 2 and "cannot write the results" in result.stderr


@pytest.mark.slow
def test_a_sandbox_that_cannot_start_grades_nothing(tmp_path, bwrap_refused, released_course):
    course = released_course(tmp_path / "course", [A])
    write_submission(tmp_path / "subs", "s1", A, solved_notebook(A, root=course))
    result = run_cli("grade", str(tmp_path / "subs"), "--root", str(course), "--out", str(tmp_path / "out"),
                  env=bwrap_refused)
    assert result.returncode == 2 and "sandbox" in result.stderr and "Permission denied" in result.stderr
    assert not (tmp_path / "out" / "grades.csv").exists()


@pytest.mark.slow
def test_a_folder_name_reaches_the_terminal_as_text_not_as_escape_sequences(tmp_path, bwrap_refused, released_course):
    """A student folder without its assignment is named on stderr (beside others' submissions, or as all there
    was); a name that clears the screen or reverses the text around it is shown with its codes instead."""
    course = released_course(tmp_path / "course", [A])
    name = "\x1b[2J\x1b[Hmallory\u202e"
    write_submission(tmp_path / "subs", name, f"{A} (1)", solved_notebook(A, root=course))
    result = run_cli("grade", str(tmp_path / "subs"), "--root", str(course), "--out", str(tmp_path / "out"),
                  env=bwrap_refused)
    assert result.returncode == 2 and "found 1 folder (\\x1b[2J\\x1b[Hmallory\\u202e/) holding no folder named " \
        "after an assignment" in result.stderr and "\x1b" not in result.stderr
    write_submission(tmp_path / "subs", "honest", A, solved_notebook(A, root=course))
    result = run_cli("grade", str(tmp_path / "subs"), "--root", str(course), "--out", str(tmp_path / "out"),
                  env=bwrap_refused)
    assert "not graded: \\x1b[2J\\x1b[Hmallory\\u202e/" in result.stderr
    assert "\x1b" not in result.stderr and "\u202e" not in result.stderr


@pytest.mark.slow
@pytest.mark.skipif(not sandbox_available(), reason="needs bubblewrap (bwrap)")
@pytest.mark.slow
def test_a_slot_that_dies_costs_one_row_and_is_started_again(tmp_path, released_course):
    course = released_course(tmp_path / "course", [A])
    tasks = []
    for i in range(3):
        path = write_submission(tmp_path / "subs", f"s{i}", A, solved_notebook(A, root=course))
        tasks.append({"student_id": f"s{i}", "assignment": A, "path": str(path), "flags": []})
    staging = tmp_path / "staging"
    config = {"root": str(course), "staging": str(staging), "out": str(course),
              "db_url": nbgrader_config(root=course).CourseDirectory.db_url, "limits": vars(Limits())}
    with SlotPool(1, config) as pool:
        first = pool.slots[0].process

        def kill_when_busy():
            while pool.slots[0].process is first and first.poll() is None:
                time.sleep(0.05)
                # the first notebook is done (staged in the slot's own folder): kill mid-run
                if os.path.exists(staging / "slot0" / "s0"):
                    first.kill()
                    return

        threading.Thread(target=kill_when_busy, daemon=True).start()
        rows = pool.grade(tasks, 300, lambda task, flag: {"student_id": task["student_id"], "flags": [flag]},
                          progress=False)
    assert len(rows) == 3 and [r["student_id"] for r in rows] == ["s0", "s1", "s2"]
    crashed = [r for r in rows if r["flags"] == ["grader-crashed"]]
    assert len(crashed) == 1 and rows[-1].get("score") == rows[-1].get("max_score") == 10


@pytest.mark.slow
def test_a_submission_times_file_that_cannot_be_read_stops_before_anything_is_graded(tmp_path):
    (tmp_path / "subs" / "s1" / A).mkdir(parents=True)
    times = tmp_path / "times.csv"
    times.write_text(f"student_id,assignment,time\ns1,{A},2026-11-20 17:03:00\ns2,{A},after the party\n")
    result = run_cli("grade", str(tmp_path / "subs"), "--out", str(tmp_path / "out"), "--submitted-at", str(times))
    assert result.returncode == 2 and f"{times} line 3: cannot read 'after the party' as a time" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "out" / "grades.csv").exists()


@pytest.fixture(scope="module")
def hostile_class(tmp_path_factory, released_course):
    """One real grading run of a class zip, with the instructor's submission times: a student who forged an early
    timestamp.txt, one who hoards six 19 MB notebooks (each under --max-notebook-mb), one whose folder name is a
    formula, and an honest one."""
    tmp = tmp_path_factory.mktemp("hostile")
    course = released_course(tmp / "course", [A], late_penalty="zero", due=[A])
    solved = nbformat.writes(solved_notebook(A, root=course))
    hoard = solved[:-2] + " " * 19_000_000 + solved[-2:]  # still the notebook, padded with whitespace
    archive = tmp / "class.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for student in ("honest", "forger", "mallory;=1+1"):
            zf.writestr(f"{student}/{A}/{A}.ipynb", solved)
        zf.writestr(f"forger/{A}/timestamp.txt", "2026-11-19 09:00:00.000000 UTC")
        for i in range(6):
            zf.writestr(f"hoarder/{A}/{'copy' * i}{A}.ipynb", hoard)
    times = tmp / "times.csv"
    times.write_text(f'student_id,assignment,time\nhonest,{A},"Nov 20, 2026 4:59pm"\n'
                     f'forger,{A},2026-11-21T09:00:00Z\n"mallory;=1+1",{A},2026-11-20 12:00:00\n')
    result = run_cli("grade", str(archive), "--root", str(course), "--out", str(course), "--submitted-at", str(times))
    assert result.returncode == 0, result.stderr[-3000:]
    with (course / "grades.csv").open(newline="", encoding="utf-8") as f:
        return {row["student_id"]: row for row in csv.DictReader(f)}, course


@pytest.mark.slow
def test_one_students_hoard_costs_their_row_and_everyone_else_is_graded(hostile_class):
    rows, _ = hostile_class
    assert set(rows) == {"honest", "forger", "mallory;'=1+1", "hoarder"}
    assert "submission-too-large" in rows["hoarder"]["flags"].split(";") and float(rows["hoarder"]["score"]) == 0
    assert float(rows["honest"]["score"]) == float(rows["honest"]["max_score"]) == 10


@pytest.mark.slow
def test_a_forged_early_timestamp_is_late_by_the_instructors_record(hostile_class):
    rows, course = hostile_class
    assert "late" in rows["forger"]["flags"].split(";") and float(rows["forger"]["score"]) == 0
    assert "late" not in rows["honest"]["flags"].split(";")
    with Gradebook(f"sqlite:///{course}/gradebook.db") as gb:
        assert gb.find_submission(A, "forger").timestamp == datetime(2026, 11, 21, 9, 0)


@pytest.mark.slow
def test_a_formula_for_a_name_keeps_its_score_out_of_the_gradebook(hostile_class):
    rows, course = hostile_class
    row = rows["mallory;'=1+1"]
    assert float(row["score"]) == 10 and "unexportable-student-id" in row["flags"].split(";")
    with Gradebook(f"sqlite:///{course}/gradebook.db") as gb:
        assert sorted(s.student.id for s in gb.assignment_submissions(A)) == ["forger", "hoarder", "honest"]


@pytest.mark.slow
@pytest.mark.skipif(not sandbox_available(), reason="needs bubblewrap (bwrap)")
def test_bench_grades_a_generated_class_in_a_folder_it_makes_and_leaves_nothing_there(tmp_path, capsys):
    from autograde.bench import bench

    where = tmp_path / "not" / "yet"
    timings = bench(n_students=1, jobs=(1,), assignments=[A], where=where)
    assert list(timings) == [1] and timings[1] > 0
    assert "1 notebooks, 1 job(s)" in capsys.readouterr().out
    assert where.is_dir() and not any(where.iterdir())
