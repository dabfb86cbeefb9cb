"""The instructor's day as docs/instructor.md walks it: a class with a custom late policy graded from a zip with the
LMS's times, one student graded again from a Canvas download with the same times file, and the class report.
What is checked is what the walk found missing: the regrade's terminal names no one it should not, the LMS's LATE
marker gives way to the instructor's time, the report counts a notebook that hung apart from the catalogue's gaps and
shows the gradebook's times as a person writes them."""
import contextlib
import csv
import io
import re
import shutil
import zipfile
from datetime import datetime

import pytest
from nbgrader.api import Gradebook

from courses import set_due

from autograde.autograded import grader_note
from autograde.classroom import solved_notebook, untouched_notebook, write_submission
from autograde.course import CONFIG_NAME
from autograde.grade import grade
from class_report.report import class_report
from notebook_sandbox.container import Limits, sandbox_available

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not sandbox_available(), reason="needs bubblewrap (bwrap)")]

A = "ch01_attention"
DUE = datetime(2026, 12, 1, 16, 0)  # UTC, as nbgrader keeps a due date
# docs/instructor.md, "Release": a policy of the instructor's own, defined in the course's nbgrader config
TEN_PERCENT_A_DAY = '''
from nbgrader.plugins import LateSubmissionPlugin


class TenPercentADay(LateSubmissionPlugin):
    def late_submission_penalty(self, student_id, score, total_seconds):
        return min(0.5, 0.1 * -(-total_seconds // 86400)) * score


c.AssignLatePenalties.plugin_class = TenPercentADay
'''
BROKEN_SOFTMAX = "def softmax(x, dim=-1):\n    e = torch.exp(x - x.max())\n    return e / e.sum(dim=0, keepdim=True)"
ENDLESS = "def softmax(x, dim=-1):\n    while True:\n        pass"
TIMES = {"alice": "2026-12-01 12:00:00", "bob": "2026-12-01 16:40:00", "carol": "2026-12-01 09:00:00",
         "dave": "2026-12-03 10:00:00", "erin": "2026-12-01 16:59:00"}  # Berlin's time: dave is 41 h late


@pytest.fixture(scope="module")
def day(tmp_path_factory, released_course):
    """The class graded, then dave graded again from Canvas's download; the course root and what the regrade said."""
    tmp = tmp_path_factory.mktemp("day")
    root = released_course(tmp / "course", [A])
    with (root / "autograde" / CONFIG_NAME).open("a") as config:
        config.write(TEN_PERCENT_A_DAY)
    set_due(root, A, DUE)
    notebooks = {"alice": solved_notebook(A, root=root), "bob": solved_notebook(A, {"softmax": BROKEN_SOFTMAX}, root),
                 "carol": untouched_notebook(A, root), "dave": solved_notebook(A, root=root),
                 "erin": solved_notebook(A, {"softmax": ENDLESS}, root)}
    for student, notebook in notebooks.items():
        write_submission(tmp / "class", student, A, notebook)
    shutil.make_archive(str(tmp / "class"), "zip", tmp / "class")
    times = tmp / "times.csv"
    times.write_text("student_id,assignment,time\n" + "".join(f"{s},{A},{t}\n" for s, t in TIMES.items()))
    options = {"root": root, "progress": False, "submitted_at": times, "timezone": "Europe/Berlin",
               "limits": Limits(cell_timeout=2)}
    grade(tmp / "class.zip", **options)
    # dave again, from Canvas's flat download (marked LATE), with the whole class's times file
    with zipfile.ZipFile(tmp / "canvas.zip", "w") as zf:
        zf.write(tmp / "class" / "dave" / A / f"{A}.ipynb", f"kimdave_LATE_1004_5004_{A}.ipynb")
    (tmp / "map.csv").write_text("lms_name,student_id\nkimdave,dave\n")
    with contextlib.redirect_stderr(io.StringIO()) as said:
        grade(tmp / "canvas.zip", mapping=tmp / "map.csv", **options)
    return root, said.getvalue()


def _grades(root):
    with (root / "grades.csv").open(newline="") as f:
        return {row["student_id"]: row for row in csv.DictReader(f)}


def test_the_instructors_late_policy_sets_the_score_the_class_keeps_after_a_regrade(day):
    root, _ = day
    rows = _grades(root)
    assert sorted(rows) == sorted(TIMES)  # the regrade of one replaced that row only
    full = float(rows["alice"]["score"])
    assert full == float(rows["alice"]["max_score"])
    assert float(rows["dave"]["score"]) == pytest.approx(0.8 * full)  # 2 days started: 20 % off
    assert "late" in rows["dave"]["flags"].split(";")


def test_grades_csv_says_what_the_late_policy_took_off_from_the_gradebooks_own_score(day):
    root, _ = day
    rows = _grades(root)
    with Gradebook(f"sqlite:///{root}/gradebook.db") as gb:  # nbgrader's score, before its late penalty
        shown = {student: gb.find_submission(A, student).score for student in rows}
    assert float(rows["dave"]["late_penalty"]) > 0 and float(rows["alice"]["late_penalty"]) == 0
    for student, row in rows.items():
        assert float(row["score"]) + float(row["late_penalty"]) == pytest.approx(shown[student]), student


def test_grading_a_few_again_with_the_class_times_counts_the_others_times_and_names_no_one(day):
    _, said = day
    assert "times.csv: 4 times of students graded before, not in this run" in said
    assert "no submission of" not in said


def test_formgraders_note_puts_a_stopped_cell_before_the_near_copies_in_one_line(day):
    root, _ = day
    assert "timeout" in _grades(root)["erin"]["flags"] and _grades(root)["erin"]["flags"].count("similar-to:") > 1
    with Gradebook(f"sqlite:///{root}/gradebook.db") as gb:
        note = next(c.auto_comment for c in gb.find_submission_notebook(A, A, "erin").comments if c.auto_comment)
    lines = note.splitlines()[1:]  # under the header, the first lines are what formgrader's comment box shows
    assert lines[0].startswith("- timeout: ") and lines[-1].startswith("- similar-to:")
    assert sum("similar-to:" in line for line in lines) == 1
    assert "The late policy took 1 point off: 4 / 10 after it." in grader_note(["late"], 3600, 1, 5, 10)


def test_the_lms_late_marker_gives_way_to_the_instructors_time(day):
    root, _ = day
    flags = _grades(root)["dave"]["flags"].split(";")
    assert "late" in flags and "lms-late" not in flags


def _section(page: str, anchor: str) -> str:
    return page.split(f'<section id="{anchor}">', 1)[1].split("</section>", 1)[0]


@pytest.mark.parametrize("language", ["en", "zh_CN"])
def test_the_report_counts_a_notebook_that_hung_apart_from_the_catalogues_gaps(day, language):
    root, _ = day
    assert "timeout" in _grades(root)["erin"]["flags"]
    page = class_report(root, language=language)
    exercises, grow = _section(page, "exercises"), _section(page, "unnamed")
    heads = re.findall(r"<th[^>]*>(.*?)</th>", exercises)
    cells = re.findall(r"<td[^>]*>(.*?)</td>", exercises.split("<code>softmax</code>", 1)[1].split("</tr>", 1)[0])
    # softmax's row: named (bob), no name, not written (carol), stopped (erin)
    assert dict(zip(heads[-4:], cells[-4:])) == dict(zip(heads[-4:], ["1", "0", "1", "1"]))
    assert ">erin<" not in grow and ">bob<" in grow  # bob's attention failed in his softmax: no name there


def test_the_report_shows_the_gradebooks_time_without_microseconds(day):
    root, _ = day
    late = _section(class_report(root), "late")
    assert "2026-12-03 09:00:00 UTC" in late and ".000000" not in late
