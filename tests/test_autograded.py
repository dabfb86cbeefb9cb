"""The notebook as the sandbox ran it scores, by nbgrader's own rule, what the grader scored: a test
cell's points exactly when its checks passed; the message of what went wrong is in its output."""
import pytest
from nbgrader.utils import determine_grade

from autograde.autograded import executed_notebook
from autograde.notebook import GradedCell
from autograde.slot import graded_row

TEST = {"nbgrader": {"grade": True, "solution": False, "locked": True, "grade_id": "softmax_visible", "points": 2,
                     "schema_version": 3}}
ANSWER = {"nbgrader": {"grade": False, "solution": True, "locked": False, "grade_id": "softmax", "schema_version": 3}}


@pytest.mark.parametrize(("status", "points"), [("ok", 2), ("error", 0), ("timeout", 0), ("crashed", 0),
                                                ("bad-reply", 0), ("skipped", 0)])
def test_nbgrader_gives_a_test_cell_its_points_exactly_when_it_passed(status, points):
    result = {"status": status, "stdout": "✓ softmax: visible checks passed\n", "error": "" if status == "ok" else
              "✗ softmax: the output differs\nLikely mistake — missing scaling: divide by √d_k."}
    (cell,) = executed_notebook([GradedCell("test", 'check("ch01_attention.softmax", softmax)', "softmax_visible", 2,
                                            TEST)], [result]).cells
    assert determine_grade(cell) == (points, 2)
    assert cell.outputs[0].text == result["stdout"]
    if points == 0:
        assert "Likely mistake — missing scaling" in "\n".join(cell.outputs[-1].traceback)


def test_a_students_error_keeps_its_exception_name_and_a_widget_cell_no_output():
    cells = [GradedCell("student", "softmax(x)", "softmax", metadata=ANSWER), GradedCell("widget", "explore()")]
    results = [{"status": "error", "stdout": "", "error": '  File "<cell 3>", line 1\nNameError: name \'x\' is not defined'},
               {"status": "skipped", "stdout": "", "error": "not run"}]
    answer, widget = executed_notebook(cells, results).cells
    assert (answer.outputs[0].ename, answer.outputs[0].evalue) == ("NameError", "NameError: name 'x' is not defined")
    assert answer.metadata == ANSWER and widget.outputs == [] and widget.execution_count is None


def test_a_slot_stages_one_submission_at_a_time(tmp_path):
    """nbgrader finds submissions in the staging folder by a pattern: it must never find anyone else's there."""
    staging, staged = tmp_path / "staging", []

    class Spy:  # the Recorder's place: what nbgrader would see when it autogrades
        out = tmp_path / "out"

        def record(self, student, assignment, flags=(), submission=None):
            staged.append(sorted(p.relative_to(staging).as_posix() for p in staging.glob("*/*")))

    cells = [GradedCell("test", "check()", "t", 1.0)]
    for student in ("ann", "bob", "ann"):
        task = {"student_id": student, "assignment": "ch01_attention", "flags": []}
        row = graded_row(task, cells, [{"status": "ok", "stdout": "", "error": ""}], [], staging, Spy())
        assert row["score"] == 1.0 and row["flags"] == ["gradebook-error"]  # the spy records nothing
    assert staged == [["ann/ch01_attention"], ["bob/ch01_attention"], ["ann/ch01_attention"]]
    assert not any(staging.iterdir())


def test_a_grader_failure_costs_its_row_and_its_traceback_reaches_grader_errors_log(tmp_path, capsys):
    from autograde.records import ERRORS_LOG, write_errors
    from autograde.slot import SlotGrader

    class Failing(SlotGrader):
        def __init__(self):  # no sandbox: the failure comes before one would run anything
            pass

        def _grade(self, task):
            raise KeyError("a bug of the grader's")

        def unscored(self, task, flag, problem):
            return {"student_id": task["student_id"], "assignment": task["assignment"], "flags": [flag],
                    "errors": []}

    row = Failing().grade({"student_id": "ada\x1b[2J", "assignment": "ch01_attention"})
    assert row["flags"] == ["grader-error"]
    write_errors(tmp_path / ERRORS_LOG, [row, {"student_id": "bob", "assignment": "ch01_attention", "errors": []}])
    log = (tmp_path / ERRORS_LOG).read_text()
    assert log.startswith("== ada\\x1b[2J / ch01_attention\ngrader-error: Traceback")  # the name cannot clear a terminal
    assert "KeyError: \"a bug of the grader's\"" in log
    assert "bob" not in log and str(tmp_path / ERRORS_LOG) in capsys.readouterr().err
    write_errors(tmp_path / ERRORS_LOG, [])
    assert not (tmp_path / ERRORS_LOG).exists()  # a later clean run leaves no stale log
