"""Which student ids reach nbgrader's gradebook is an allow-list (letters of any script, digits, ``._-@+``, no
formula character first): a folder named to run a formula in a spreadsheet, to shift ``nbgrader export``'s
columns or to be read as a file pattern keeps its row in grades.csv, flagged ``unexportable-student-id``, and
never reaches the gradebook; grades.csv writes every cell a spreadsheet would run as text."""
import csv

import pytest
from trusting_pool import TrustingPool

from autograde.classroom import solved_notebook, write_submission
from intake.collection import exportable_id
from autograde.grade import grade
from autograde.records import write_csv
from autograde.gradebook import recorded

A = "ch01_attention"
ACCEPTED = ("alice", "Zoë", "李雷", "अनिल", "o.brien-2+x@uni.example", "s_007")
REFUSED = ("mallory;=1+1", "eve;@SUM(1+1)", "\t=1+1", "bob smith", "comma,10.0", "[0-9]*", 'quo"te', "=1+1", "+1",
           "-1", "@SUM(A1)", "\u0301accent", "tab\tx", "line\nbreak", "semi;colon")
FORMULA = ("=", "+", "-", "@", "\t", "\r")


@pytest.mark.parametrize("name", ACCEPTED)
def test_names_of_any_script_with_the_usual_punctuation_are_exportable(name):
    assert exportable_id(name)


@pytest.mark.parametrize("name", REFUSED)
def test_anything_else_is_not(name):
    assert not exportable_id(name)


@pytest.fixture(scope="module")
def graded(tmp_path_factory, released_course):
    tmp = tmp_path_factory.mktemp("ids")
    course = released_course(tmp / "course", [A])
    hostile = ("mallory;=1+1", "eve;@SUM(1+1)", "\t=1+1", "bob smith", "comma,10.0", "[0-9]*")
    for student in (*hostile, "Zoë", "李雷"):
        write_submission(tmp / "subs", student, A, solved_notebook(A, root=course))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("autograde.grade.SlotPool", TrustingPool)
        rows = grade(tmp / "subs", tmp / "out", root=course, progress=False)
    return {r["student_id"]: r for r in rows}, hostile, course, tmp / "out"


def test_a_hostile_id_keeps_its_row_but_never_reaches_the_gradebook(graded):
    rows, hostile, course, out = graded
    db_url = f"sqlite:///{course}/gradebook.db"
    for student in hostile:
        row = rows[student]
        assert row["score"] == row["max_score"] == 10 and "unexportable-student-id" in row["flags"], row
        assert "gradebook-error" not in row["flags"] and not recorded(db_url, [(student, A)]), student
        assert not (out / "autograded" / student).exists()
    for student in ("Zoë", "李雷"):
        assert "unexportable-student-id" not in rows[student]["flags"]
        assert recorded(db_url, [(student, A)])[(student, A)].score == 10


def test_no_cell_of_grades_csv_runs_in_a_spreadsheet_however_it_splits(graded):
    out = graded[3]
    text = (out / "grades.csv").read_text(encoding="utf-8")
    with (out / "grades.csv").open(newline="", encoding="utf-8") as f:
        by_comma = [cell for row in csv.reader(f) for cell in row]
    with (out / "grades.csv").open(newline="", encoding="utf-8") as f:
        by_semicolon = [cell for row in csv.reader(f, delimiter=";") for cell in row]
    naive = [cell for line in text.splitlines() for cell in line.replace(",", ";").split(";")]  # quotes ignored
    for cells in (by_comma, by_semicolon, naive):
        assert not [c for c in cells if c.startswith(FORMULA)], cells


def test_a_cell_after_a_line_break_or_a_comma_is_text_too(tmp_path):
    rows = [{"student_id": name, "assignment": A, "notebook": A, "score": 1.0, "max_score": 2.0, "late_penalty": 0.0,
             "flags": ["unexportable-student-id"], "cell_scores": {}}
            for name in ("line\n=1+1", "cr\r@SUM(A1)", "x,-1", "a;\r=1")]
    write_csv(tmp_path / "grades.csv", rows)
    text = (tmp_path / "grades.csv").read_text(encoding="utf-8")
    naive = [cell.strip('"') for line in text.splitlines() for cell in line.replace(",", ";").split(";")]
    assert not [c for c in naive if c.startswith(FORMULA)], naive
    with (tmp_path / "grades.csv").open(newline="", encoding="utf-8") as f:
        written = [r["student_id"] for r in csv.DictReader(f)]
    assert written == ["line\n'=1+1", "cr\r'@SUM(A1)", "x,'-1", "a;'\r'=1"]
