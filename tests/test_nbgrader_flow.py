"""nbgrader's own flow around the grader: the instructor sets a due date and a late policy with
nbgrader, grades the folder ``nbgrader collect`` leaves with ``python -m autograde grade``, and
formgrader's API, ``nbgrader export``, ``generate_feedback`` and ``release_feedback`` all see the
grades, the submission times, the late penalties and the grader's flags; ``generate_feedback`` writes the
course's own page, and ``nbgrader autograde`` refuses to run the students' code outside the sandbox. One
grading run serves every test."""
import csv
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook
from nbgrader.apps import NbGraderAPI
from nbgrader.utils import notebook_hash

from autograde.autograded import SANDBOX_ONLY, flag_submissions
from autograde.classroom import solved_notebook, write_submission
from autograde.course import nbgrader_config
from autograde.feedback import GRADER_NOTE, feedback_path

pytestmark = pytest.mark.slow

A = "ch01_attention"
DUE = "2026-11-20 17:00:00 UTC"
UNSTABLE = "def softmax(x, dim=-1):\n    e = torch.exp(x)\n    return e / e.sum(dim=dim, keepdim=True)"
STUDENTS = {  # student -> (answers, when nbgrader's submit stamped it)
    "ontime": ({}, "2026-11-20 16:59:00.000000 UTC"),
    "late": ({}, "2026-11-21 09:00:00.000000 UTC"),
    "unstable": ({"softmax": UNSTABLE}, "2026-11-19 12:00:00.000000 UTC"),
}
NBGRADER = str(Path(sys.executable).parent / "nbgrader")


def _nbgrader(root, *args, ok=True):
    """An nbgrader command as the README has the instructor run it: in the course's autograde/ folder (at the course
    root, the root's nbgrader_config.py loads the same; tests/test_formgrader.py runs one there)."""
    result = subprocess.run([NBGRADER, *args], cwd=root / "autograde", capture_output=True, text=True, timeout=300)
    assert (result.returncode == 0) is ok, result.stdout + result.stderr
    return result


def _files(folder):
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def course(tmp_path_factory, released_course):
    root = released_course(tmp_path_factory.mktemp("flow") / "course", [A], late_penalty="zero")
    _nbgrader(root, "db", "assignment", "add", A, f"--duedate={DUE}")
    for student, (answers, stamped) in STUDENTS.items():
        folder = write_submission(root / "submitted", student, A, solved_notebook(A, answers, root)).parent
        (folder / "timestamp.txt").write_text(stamped)
        (folder / "submission_secret.txt").write_text(f"secret-of-{student}")
    collected = _files(root / "submitted")
    result = subprocess.run([sys.executable, "-m", "autograde", "grade", "submitted", "--root", str(root)], cwd=root,
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    assert _files(root / "submitted") == collected  # graded from submitted/: nothing there changes
    return root


def _grades_csv(root):
    with (root / "grades.csv").open() as f:
        return {row["student_id"]: row for row in csv.DictReader(f)}


def test_formgrader_finds_every_submission_autograded_with_nbgraders_metadata(course):
    api = NbGraderAPI(config=nbgrader_config(root=course))
    submissions = {s["student"]: s for s in api.get_submissions(A)}
    assert set(submissions) == set(STUDENTS)
    assert all(s["autograded"] and not s["needs_manual_grade"] for s in submissions.values())
    assert submissions["ontime"]["score"] == submissions["ontime"]["max_score"] == 10
    assert submissions["unstable"]["score"] < 10
    with Gradebook(f"sqlite:///{course}/gradebook.db") as gb:
        checksums = {c.name: c.checksum for c in gb.find_notebook(A, A).source_cells}
    notebook = nbformat.read(course / "autograded" / "unstable" / A / f"{A}.ipynb", 4)
    nbformat.validate(notebook)
    graded = [c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade")]
    assert graded and all(c.metadata.nbgrader.checksum == checksums[c.metadata.nbgrader.grade_id] for c in graded)
    failed = [o for c in graded for o in c.outputs if o.output_type == "error"]
    assert any("Likely mistake — exp without subtracting the maximum" in "\n".join(o.traceback) for o in failed)


def test_nbgrader_export_lists_scores_submission_times_and_late_penalties(course, tmp_path):
    _nbgrader(course, "export", f"--to={tmp_path / 'export.csv'}")
    with (tmp_path / "export.csv").open() as f:
        rows = {row["student_id"]: row for row in csv.DictReader(f)}
    assert rows["ontime"]["duedate"] == "2026-11-20 17:00:00" and rows["ontime"]["timestamp"].startswith("2026-11-20 16:59")
    assert float(rows["ontime"]["score"]) == 10 and float(rows["ontime"]["late_submission_penalty"]) == 0
    assert float(rows["late"]["raw_score"]) == 10 and float(rows["late"]["late_submission_penalty"]) == 10
    assert float(rows["late"]["score"]) == 0
    assert float(rows["unstable"]["score"]) == float(_grades_csv(course)["unstable"]["score"]) < 10


def test_nbgrader_export_run_as_it_comes_writes_at_the_course_root_and_leaves_grades_csv_alone(course):
    grades = (course / "grades.csv").read_bytes()
    _nbgrader(course, "export")
    assert (course / "nbgrader-export.csv").is_file() and not (course / "autograde" / "grades.csv").exists()
    assert (course / "grades.csv").read_bytes() == grades


def test_grades_csv_applies_the_late_penalty_and_flags_the_late_submission(course):
    rows = _grades_csv(course)
    assert float(rows["late"]["score"]) == 0 and "late" in rows["late"]["flags"].split(";")
    assert float(rows["ontime"]["score"]) == 10 and "late" not in rows["ontime"]["flags"].split(";")


def test_feedback_pages_have_the_hint_the_late_penalty_and_no_hidden_test(course):
    pages = {student: feedback_path(course, student, A).read_text() for student in STUDENTS}
    assert "Likely mistake — exp without subtracting the maximum" in pages["unstable"]
    assert "Late submission penalty" in pages["late"] and "Late submission penalty" not in pages["ontime"]
    for page in pages.values():
        assert "BEGIN HIDDEN TESTS" not in page and "hidden=True" not in page


def test_formgrader_flags_the_late_submission_saying_why_and_what_the_penalty_took(course):
    with Gradebook(f"sqlite:///{course}/gradebook.db") as gb:
        notes = {s: [(c.cell.name, c.auto_comment) for c in gb.find_submission_notebook(A, A, s).comments
                     if c.auto_comment and GRADER_NOTE in c.auto_comment] for s in STUDENTS}
        flagged = {s: gb.find_submission_notebook(A, A, s).flagged for s in STUDENTS}
    # every time here is the student's own timestamp.txt (time-unverified): said, but no reason to flag a row; the
    # three notebooks are the instructor's solutions, near copies of one another: flagged for that
    grades = _grades_csv(course)
    assert flagged == {s: any(f.startswith(("late", "similar-to")) for f in grades[s]["flags"].split(";"))
                       for s in STUDENTS}
    assert flagged["late"] and "late" not in grades["ontime"]["flags"].split(";")
    assert all(len(n) == 1 and n[0][0] == "softmax" for n in notes.values())  # the first solution cell's comment
    late = notes["late"][0][1]
    assert "- late: handed in 16 h after the due date. The late policy took 10 points off: 0 / 10 after it." in late
    assert "- time-unverified: the time is the student's own timestamp.txt" in late
    for student in STUDENTS:  # the student never reads it
        assert GRADER_NOTE not in feedback_path(course, student, A).read_text()


def test_nbgrader_autograde_refuses_to_run_student_code_and_leaves_the_grades(course):
    autograded, pages = _files(course / "autograded"), _files(course / "feedback")
    with Gradebook(f"sqlite:///{course}/gradebook.db") as gb:
        before = {s: gb.find_submission(A, s).score for s in STUDENTS}
    for args in ([A], [A, "--force"], [A, "--student=unstable", "--force"]):
        result = _nbgrader(course, "autograde", *args, ok=False)
        assert SANDBOX_ONLY.splitlines()[-3] in result.stderr  # "Grade with `python -m autograde grade submitted` …"
    assert _files(course / "autograded") == autograded and _files(course / "feedback") == pages
    with Gradebook(f"sqlite:///{course}/gradebook.db") as gb:
        assert {s: gb.find_submission(A, s).score for s in STUDENTS} == before


def test_the_class_comparisons_flags_reach_formgrader_too(course):
    # grade.py flags near copies after every notebook is graded; it hands them over as a grading slot does
    with (course / "grades.csv").open() as f:
        rows = [(r["student_id"], r["assignment"], r["flags"].split(";")) for r in csv.DictReader(f)]
    assert any(f.startswith("similar-to:") for _, _, flags in rows for f in flags)
    flag_submissions(f"sqlite:///{course}/gradebook.db", rows, course)
    with Gradebook(f"sqlite:///{course}/gradebook.db") as gb:
        assert all(gb.find_submission_notebook(A, A, s).flagged for s in STUDENTS)
        note = gb.find_comment("softmax", A, A, "ontime").auto_comment
    assert note.count(GRADER_NOTE) == 1 and "- similar-to:" in note and "read both" in note


def test_generate_feedback_writes_the_very_page_grade_wrote(course):
    pages = {s: feedback_path(course, s, A).read_text() for s in STUDENTS}
    _nbgrader(course, "generate_feedback", A, "--force")
    assert {s: feedback_path(course, s, A).read_text() for s in STUDENTS} == pages


def test_release_feedback_files_each_page_under_its_submission_secret(course, tmp_path):
    exchange = tmp_path / "exchange"
    exchange.mkdir()
    _nbgrader(course, "release_feedback", A, f"--Exchange.root={exchange}")
    outbound = exchange / nbgrader_config(root=course).CourseDirectory.course_id / "feedback"
    for student in STUDENTS:
        released = outbound / f"{notebook_hash(secret=f'secret-of-{student}', notebook_id=A)}.html"
        assert released.read_text() == feedback_path(course, student, A).read_text()


def test_generate_feedback_by_hand_after_manual_grading_shows_it_and_still_no_hidden_test(course):
    # Last: it changes the gradebook and the pages, as an instructor grading in formgrader would.
    with Gradebook(f"sqlite:///{course}/gradebook.db") as gb:
        grade = gb.find_grade("softmax_hidden", A, A, "unstable")
        assert grade.score == 0  # the hidden softmax check failed
        before = gb.find_submission_notebook(A, A, "unstable").score
        grade.manual_score = 1.5
        gb.find_comment("softmax", A, A, "unstable").manual_comment = "Subtract the row maximum first."
        gb.db.commit()
    graded = feedback_path(course, "unstable", A).read_text()
    _nbgrader(course, "generate_feedback", A, "--force")
    page = feedback_path(course, "unstable", A).read_text()
    # the course's page (one template), about as large as grade's, standing alone: nothing fetched, math as MathML
    assert 'content="transformer-piece-by-piece feedback"' in page and "<math" in page
    assert 0.8 < len(page) / len(graded) < 1.25
    assert not any(fetch in page.lower() for fetch in ("<script", "<link", "src=", "url(", "@import", "mathjax", "cdn"))
    # with what the instructor did in formgrader: the comment, the new score (what it was + 1.5) and its check
    assert "<div class=\"comment\"><strong>Comment</strong><p>Subtract the row maximum first.</p>" in page
    # the score given by hand says so, in the summary and above its check (whose message still says it failed)
    by_hand = ' <span class="by-hand">given by hand</span>'
    assert f"<p class=\"points\">Score: {before + 1.5:g} / 10</p>" in page and f"◐ 1.5 / 2{by_hand}</td>" in page
    assert f"<p class=\"points part\">1.5 / 2 points{by_hand}</p>" in page and page.count(by_hand) == 2
    assert "details class='fix'><summary>How to fix it</summary>" in page  # still folded
    assert "BEGIN HIDDEN TESTS" not in page and "hidden=True" not in page and GRADER_NOTE not in page
    assert "Try it." not in page and "attention_explorer" not in page  # the widget cells, never run when grading
