"""End to end: release, then grade a generated class with good, untouched, broken and hostile
submissions, with two jobs, in a course root of its own. One grading run (module fixture) serves
every assertion."""
import csv
import html
import json
import zipfile

import nbformat
import pytest

from autograde.classroom import make_course, solved_notebook, untouched_notebook, write_submission
from editions.assignments import assignment_ids
from autograde.feedback import feedback_path
from autograde.grade import grade
from autograde.release import release
from notebook_sandbox.container import Limits

pytestmark = pytest.mark.slow

A = "ch01_attention"
MAX = 10.0

CORRECT_MASKED = '''def scaled_dot_product_attention(q, k, v, mask=None, *, return_weights=False):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = softmax(scores, dim=-1)
    out = weights @ v
    return (out, weights) if return_weights else out
'''

BROKEN = {  # student -> (answers, the mistake the feedback must name, points lost at least)
    "broken_unstable": ({"softmax": "def softmax(x, dim=-1):\n    e = torch.exp(x)\n    return e / e.sum(dim=dim, keepdim=True)"},
                        "exp without subtracting the maximum"),
    "broken_wrong_axis": ({"softmax": "def softmax(x, dim=-1):\n    m = x.amax(dim=-1, keepdim=True)\n    e = torch.exp(x - m)\n"
                                      "    return e / e.sum(dim=-1, keepdim=True)"},
                          "softmax over the wrong axis (dim ignored)"),
    "broken_no_scaling": ({"attention": "def scaled_dot_product_attention(q, k, v, mask=None, *, return_weights=False):\n"
                                        "    weights = softmax(q @ k.transpose(-2, -1), dim=-1)\n    out = weights @ v\n"
                                        "    return (out, weights) if return_weights else out"},
                          "missing scaling"),
    "broken_whole_tensor": ({"softmax": "def softmax(x, dim=-1):\n    e = torch.exp(x - x.max())\n    return e / e.sum()"},
                            "normalised over the whole tensor"),
    "broken_mask_after": ({"masked_attention": CORRECT_MASKED.replace(
        '        scores = scores.masked_fill(~mask, float("-inf"))\n    weights = softmax(scores, dim=-1)',
        '        pass\n    weights = softmax(scores, dim=-1)\n    weights = weights if mask is None else weights * mask')},
                          "mask applied after the softmax"),
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory, released_course):
    tmp = tmp_path_factory.mktemp("class")
    course = released_course(tmp / "course", [A])
    subs = tmp / "submitted"

    def solved(answers=None):
        return solved_notebook(A, answers, course)

    for student in ("solved_a", "solved_b"):
        write_submission(subs, student, A, solved())
    write_submission(subs, "untouched", A, untouched_notebook(A, course))
    for student, (answers, _) in BROKEN.items():
        write_submission(subs, student, A, solved(answers))
    hostile = {
        "borrows_reference": {"softmax": "import tfm_ref\n\ndef softmax(x, dim=-1):\n    return tfm_ref.softmax(x, dim)"},
        "borrows_torch": {"softmax": "def softmax(x, dim=-1):\n    return torch.softmax(x, dim)"},
        # the right values, written over its input
        "overwrites_input": {"softmax": "def softmax(x, dim=-1):\n    x.sub_(x.amax(dim=dim, keepdim=True)).exp_()\n"
                                        "    return x.div_(x.sum(dim=dim, keepdim=True))"},
        "patches_grader": {"softmax": "import autograde.checking, torch\ntorch.allclose = lambda *a, **k: True\n"
                                      "autograde.checking.check = lambda *a, **k: None\nautograde.check = lambda *a, **k: None\n"
                                      "def softmax(x, dim=-1):\n    return x"},
        "loops": {"masked_attention": CORRECT_MASKED.replace("    scores =", "    while True:\n        pass\n    scores =", 1)},
        "exits": {"masked_attention": "import os\nos._exit(1)\n" + CORRECT_MASKED},
        "reads_solutions": {"softmax": "import glob\nprint(glob.glob('/**/solutions/*/*.md', recursive=True))\n"
                                       + "def softmax(x, dim=-1):\n    return x"},
    }
    for student, answers in hostile.items():
        write_submission(subs, student, A, solved(answers))
    # Edited and deleted test cells, with a wrong answer they were meant to hide.
    edited = solved({"softmax": "def softmax(x, dim=-1):\n    return x"})
    edited.cells = [c for c in edited.cells if c.metadata.get("nbgrader", {}).get("grade_id") != "softmax_hidden"]
    for cell in edited.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "softmax_visible":
            cell.source = "pass"
    write_submission(subs, "edits_tests", A, edited)
    # A memory bomb in a cell of its own: the answers around it still count.
    bomb = solved()
    bomb.cells.append(nbformat.v4.new_code_cell("hog = [bytearray(10**8) for _ in range(10**4)]"))
    write_submission(subs, "memory_bomb", A, bomb)
    write_submission(subs, "corrupted", A, '{"cells": [ this is not json')
    nested = json.dumps(solved())  # valid JSON nested deeper than any parser's recursion: a notebook of no use
    write_submission(subs, "nested", A, nested[:-1] + ', "deep": ' + "[" * 200_000 + "]" * 200_000 + "}")
    (subs / "missing" / A).mkdir(parents=True)
    archive = tmp / "submitted.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for path in subs.rglob("*"):
            zf.write(path, path.relative_to(subs))
    rows = grade(archive, jobs=2, limits=Limits(cell_timeout=8), root=course, progress=False)
    with (course / "grades.csv").open() as f:
        csv_rows = {r["student_id"]: r for r in csv.DictReader(f)}
    return rows, csv_rows, course, f"sqlite:///{course}/gradebook.db", subs


def _feedback(out, student):
    return feedback_path(out, student, A).read_text()


def test_every_student_has_a_row_graded_against_the_real_maximum(graded):
    rows, csv_rows, out, _, subs = graded
    students = {p.name for p in subs.iterdir()}
    assert set(csv_rows) == students
    assert all(float(r["max_score"]) == MAX for r in csv_rows.values())
    assert all(feedback_path(out, s, A).exists() for s in students)
    assert all((out / "autograded" / s / A / f"{A}.ipynb").exists() for s in students)


def test_reference_solutions_score_full_marks_and_untouched_notebooks_zero(graded):
    _, csv_rows, *_ = graded
    assert float(csv_rows["solved_a"]["score"]) == MAX and float(csv_rows["solved_b"]["score"]) == MAX
    assert float(csv_rows["untouched"]["score"]) == 0
    # The instructor's solutions are one text: they resemble each other (and the notebooks this test builds from them), and nothing else is wrong; where they
    # resemble tfm_ref, that is the course's own way of writing it, no evidence. The class was handed in without
    # submission times: that is said too.
    flags = csv_rows["solved_a"]["flags"].split(";")
    assert any(f.startswith("similar-to:solved_b@") for f in flags)  # a flag per cell alike
    assert {f.split(":")[0] for f in flags} == {"similar-to", "no-timestamp"}
    assert not any(f.startswith("similar-to:tfm_ref") for f in flags)


@pytest.mark.parametrize("student", sorted(BROKEN))
def test_each_broken_implementation_loses_points_and_gets_its_hint(graded, student):
    _, csv_rows, out, *_ = graded
    assert float(csv_rows[student]["score"]) < MAX
    assert f"Likely mistake — {BROKEN[student][1]}" in _feedback(out, student)


@pytest.mark.parametrize("student", ["borrows_reference", "patches_grader", "edits_tests", "reads_solutions"])
def test_attacks_earn_nothing_for_the_attacked_exercise(graded, student):
    rows, csv_rows, *_ = graded
    cells = next(r for r in rows if r["student_id"] == student)["cell_scores"]
    assert cells["softmax_visible"] == 0 and cells["softmax_hidden"] == 0


def test_attacks_are_flagged(graded):
    _, csv_rows, *_ = graded
    assert "imports-reference" in csv_rows["borrows_reference"]["flags"].split(";")
    assert "forbidden-call" in csv_rows["borrows_torch"]["flags"]
    assert {"imports-grader", "patches-modules"} <= set(csv_rows["patches_grader"]["flags"].split(";"))
    assert "reads-files" in csv_rows["reads_solutions"]["flags"] or "dynamic-code" in csv_rows["reads_solutions"]["flags"]


def test_a_borrowed_library_call_is_named_in_the_feedback(graded):
    _, _, out, *_ = graded
    assert "your code ran PyTorch's softmax" in html.unescape(_feedback(out, "borrows_torch"))


def test_the_withheld_reference_is_named_in_the_feedback(graded):
    _, _, out, *_ = graded
    assert "tfm_ref.attention.softmax is not available while ch01_attention is graded" in _feedback(out, "borrows_reference")


def test_right_values_written_over_the_input_earn_nothing_and_are_told_so(graded):
    rows, _, out, *_ = graded
    cells = next(r for r in rows if r["student_id"] == "overwrites_input")["cell_scores"]
    assert cells["softmax_hidden"] == 0
    assert "your code changed its input `x` in place" in _feedback(out, "overwrites_input")


def test_sandbox_keeps_solutions_out_of_reach(graded):
    _, _, out, *_ = graded
    assert "ch01_attention.md" not in _feedback(out, "reads_solutions")


def test_disruptive_submissions_cost_only_the_affected_parts(graded):
    rows, csv_rows, *_ = graded
    # The memory bomb is stopped by the memory limit, or by the clock on a machine too busy to fill 2 GB in time.
    for student, flags in (("loops", {"timeout"}), ("exits", {"crashed"}), ("memory_bomb", {"crashed", "timeout"})):
        cells = next(r for r in rows if r["student_id"] == student)["cell_scores"]
        assert cells["softmax_hidden"] == 2 and cells["attention_hidden"] == 2
        assert flags & set(csv_rows[student]["flags"].split(";"))
    assert next(r for r in rows if r["student_id"] == "loops")["cell_scores"]["masked_attention_hidden"] == 0
    assert next(r for r in rows if r["student_id"] == "exits")["cell_scores"]["masked_attention_hidden"] == 0
    assert float(csv_rows["memory_bomb"]["score"]) == MAX
    for student in ("corrupted", "nested"):
        assert float(csv_rows[student]["score"]) == 0 and "corrupted-notebook" in csv_rows[student]["flags"]
    assert "missing-notebook" in csv_rows["missing"]["flags"]


def test_the_checks_of_a_cell_that_hung_are_recorded_as_failed(graded):
    """checks.csv (and the class report) counts a check that never finished: failed, with no mistake named."""
    with (graded[2] / "checks.csv").open(newline="") as f:
        hung = [row for row in csv.DictReader(f) if row["student_id"] == "loops"
                and row["exercise"] == f"{A}.masked_attention"]
    assert {row["hidden"] for row in hung} == {"0", "1"}
    assert all(row["passed"] == "0" and row["mistake"] == "" for row in hung)


def test_a_failing_exercise_says_which_earlier_one_it_calls_fails(graded):
    page = _feedback(graded[2], "broken_whole_tensor")
    # the grader, which never runs the student's code, cannot tell whether it calls it
    assert "Your `softmax` from an earlier exercise fails its own check; if this exercise calls it, fix that first." \
        in page


def test_feedback_never_shows_hidden_tests(graded):
    _, _, out, *_ = graded
    for student in ("solved_a", "untouched", "broken_unstable"):
        page = _feedback(out, student)
        assert "BEGIN HIDDEN TESTS" not in page and "hidden=True" not in page
    assert "hidden check" in _feedback(out, "broken_unstable")  # the failure message itself is shown


def test_grades_are_in_the_nbgrader_gradebook(graded):
    from nbgrader.api import Gradebook

    _, csv_rows, _, db_url, _ = graded
    with Gradebook(db_url) as gb:
        scores = {s.student.id: s.score for s in gb.assignment_submissions(A)}
    assert scores == {student: float(row["score"]) for student, row in csv_rows.items()}


def test_release_is_idempotent_and_finds_assignments_by_folder(tmp_path):
    course = make_course(tmp_path, [A])
    assert A in assignment_ids() and assignment_ids(course / "solutions") == [A]
    first = release([A], root=course)[0].read_text()
    assert release([A], root=course)[0].read_text() == first
    student = nbformat.reads(first, 4)
    text = "\n".join(c.source for c in student.cells)
    assert "BEGIN SOLUTION" not in text and "BEGIN HIDDEN TESTS" not in text and "raise NotImplementedError()" in text


def test_every_chapters_solutions_score_full_marks_and_its_student_version_zero(tmp_path, released_course):
    chapters = assignment_ids()
    course = released_course(tmp_path / "course", chapters)
    subs = tmp_path / "submitted"
    for chapter in chapters:
        write_submission(subs, "solved", chapter, solved_notebook(chapter, root=course))
        write_submission(subs, "untouched", chapter, untouched_notebook(chapter, course))
    rows = grade(subs, jobs=2, root=course, progress=False)
    scores = {(r["student_id"], r["assignment"]): (float(r["score"]), float(r["max_score"])) for r in rows}
    for chapter in chapters:
        score, maximum = scores[("solved", chapter)]
        assert maximum > 0 and score == maximum, f"{chapter}: the solutions score {score}/{maximum}"
        assert scores[("untouched", chapter)] == (0.0, maximum), f"{chapter}: the untouched notebook scores points"


def test_the_gradebook_as_it_was_before_the_run_is_kept_beside_it(graded):
    """Grading commits without waiting for the disk; the copy is what a machine that died mid-run would leave."""
    import sqlite3

    _, _, course, _, _ = graded
    copy = sqlite3.connect(course / "gradebook.db.before-grading")
    try:
        assignments = {name for (name,) in copy.execute("SELECT name FROM assignment")}
        submissions = copy.execute("SELECT count(*) FROM submitted_assignment").fetchone()[0]
    finally:
        copy.close()
    assert A in assignments and submissions == 0  # released, not yet graded: as it was


def test_checks_csv_records_the_mistake_each_failure_named(graded):
    """The class report's data: one row per check, with the catalogued mistake it named."""
    _, _, out, *_ = graded
    with (out / "checks.csv").open() as f:
        checks = list(csv.DictReader(f))
    for student, (_, mistake) in BROKEN.items():
        named = {c["mistake"] for c in checks if c["student_id"] == student and c["passed"] == "0"}
        assert mistake in named, (student, named)
    solved = [c for c in checks if c["student_id"] == "solved_a"]
    assert solved and all(c["passed"] == "1" and not c["mistake"] for c in solved)
    assert {c["hidden"] for c in solved} == {"0", "1"}
