"""Nothing an instructor made is lost: grading some students again replaces their rows and keeps everyone
else's (grades.csv, checks.csv), near copies are looked for across the whole class, not only this run's, a score
and a comment given by hand in formgrader survive a regrade, and input that holds no submission changes nothing.
The grading pool here runs no sandbox (`ReadingPool`): these are the grader's records, not its checks."""
import csv
import json
import os
import re
from pathlib import Path

import pytest
from nbgrader.api import Gradebook
from trusting_pool import TrustingPool

from autograde.__main__ import main
from class_report.__main__ import main as report_main
from autograde.autograded import Recorder
from autograde.classroom import make_course, solved_notebook, untouched_notebook, write_submission
from editions.assignments import ROOT
from autograde.course import CONFIG_NAME, nbgrader_config
from autograde.grade import RECORD, before_grading, grade, summary
from autograde.notebook import load_notebook, merge
from autograde.records import ERRORS_LOG, ClassRecords
from autograde.release import assignment_notebooks
from notebook_sandbox.container import Limits
from autograde.slot import graded_row

A = "ch01_attention"
CELL = "masked_attention"  # the longest solution of ch01: long enough to be evidence of a copy
OWN = {CELL: '''def scaled_dot_product_attention(q, k, v, mask=None, *, return_weights=False):
    """Written otherwise: scores by einsum, the mask with where, weights normalised by hand."""
    d = q.size(-1)
    s = torch.einsum("...id,...jd->...ij", q, k) * d ** -0.5
    if mask is not None:
        s = torch.where(mask, s, torch.full_like(s, -torch.inf))
    w = torch.exp(s - s.amax(-1, keepdim=True))
    w = w / w.sum(-1, keepdim=True)
    return (w @ v, w) if return_weights else w @ v
'''}


class ReadingPool(TrustingPool):
    """`TrustingPool` with the student's own code in each row (what near copies are looked for in) and a
    check per test cell (checks.csv): every check passes."""

    def grade(self, tasks, timeout, fallback, progress=True):
        root, staging = Path(self.config["root"]), Path(self.config["staging"]) / "reading"
        recorder = Recorder(staging, Path(self.config["out"]), nbgrader_config(self.config["db_url"], root))
        rows = []
        for task in tasks:
            assignment = task["assignment"]
            student = load_notebook(Path(task["path"]))[0] if task["path"] else None
            cells = merge(*assignment_notebooks(assignment, root), student)
            results = [{"status": "ok", "stdout": "", "error": ""} for _ in cells]
            checks = [{"cell": c.grade_id, "exercise": c.grade_id.rsplit("_", 1)[0], "hidden": "hidden" in c.grade_id,
                       "passed": True, "mistake": None, "delegated": []} for c in cells if c.kind == "test"]
            rows.append(graded_row(task, cells, results, list(task["flags"]), staging, recorder, checks))
        return rows


def _read(path):
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _lines(path, student):
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.startswith(f"{student},")]


@pytest.fixture(scope="module")
def course(tmp_path_factory, released_course):
    return released_course(tmp_path_factory.mktemp("records") / "course", [A])


@pytest.fixture(scope="module")
def regraded(course, tmp_path_factory):
    """The class graded (alice and bob hand in the instructor's solution, carol her own, dave nothing), a score
    and a comment given by hand to alice; then alice alone handed in again (through the command line); then bob
    alone, with work of his own. What OUT held after each run."""
    tmp = tmp_path_factory.mktemp("runs")
    out = tmp / "out"
    first = tmp / "first"
    for student in ("alice", "bob"):
        write_submission(first, student, A, solved_notebook(A, root=course))
    write_submission(first, "carol", A, solved_notebook(A, OWN, course))
    write_submission(first, "dave", A, untouched_notebook(A, course))
    seen = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("autograde.grade.SlotPool", ReadingPool)
        grade(first, out, root=course, progress=False)
        seen["first"] = {name: (out / name).read_text(encoding="utf-8") for name in ("grades.csv", "checks.csv")}
        with Gradebook(f"sqlite:///{course}/gradebook.db") as gb:
            gb.find_grade("masked_attention_hidden", A, A, "alice").manual_score = 1.5
            gb.find_comment(CELL, A, A, "alice").manual_comment = "Mask before the softmax, see me."
            gb.db.commit()
        second = tmp / "second"
        write_submission(second, "alice", A, solved_notebook(A, root=course))
        stdout = _run_main(["grade", str(second), "--root", str(course), "--out", str(out)])
        seen["second"] = {name: (out / name).read_text(encoding="utf-8") for name in ("grades.csv", "checks.csv")}
        seen["second_stdout"] = stdout
        third = tmp / "third"
        write_submission(third, "bob", A, solved_notebook(A, OWN | {CELL: OWN[CELL].replace("d ** -0.5", "d ** -.5 ")}, course))
        grade(third, out, root=course, progress=False)
        seen["third"] = {name: (out / name).read_text(encoding="utf-8") for name in ("grades.csv", "checks.csv")}
    return seen, out, course


def _run_main(argv, command=main):
    import contextlib
    import io

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert command(argv) == 0
    return buffer.getvalue()


def _flags(text, student):
    row = next(r for r in csv.DictReader(text.splitlines()) if r["student_id"] == student)
    return row["flags"].split(";")


def test_grading_one_student_again_keeps_everyone_elses_rows(regraded):
    seen, out, _ = regraded
    first, second = seen["first"]["grades.csv"], seen["second"]["grades.csv"]
    assert [r["student_id"] for r in csv.DictReader(second.splitlines())] == ["alice", "bob", "carol", "dave"]
    for student in ("bob", "carol", "dave"):  # as they were, to the byte
        assert [line for line in second.splitlines() if line.startswith(f"{student},")] == \
            [line for line in first.splitlines() if line.startswith(f"{student},")]
    checks = list(csv.DictReader(seen["second"]["checks.csv"].splitlines()))
    assert {r["student_id"] for r in checks} == {"alice", "bob", "carol", "dave"}
    assert sum(r["student_id"] == "alice" for r in checks) == 6  # replaced, not added to
    assert "graded 1 notebook;" in seen["second_stdout"]


def test_near_copies_are_looked_for_across_the_class_and_say_which_cell(regraded):
    seen, *_ = regraded
    # the first run: alice and bob handed in the same long solution
    assert f"similar-to:bob@{CELL}" in _flags(seen["first"]["grades.csv"], "alice")
    # alice alone again: compared with bob, whose row this run did not grade, and bob keeps his flag
    assert f"similar-to:bob@{CELL}" in _flags(seen["second"]["grades.csv"], "alice")
    assert f"similar-to:alice@{CELL}" in _flags(seen["second"]["grades.csv"], "bob")
    # bob's masked attention is his own now (his softmax is still alice's): the flag goes from his row, and from
    # alice's, which this run did not grade; his masked attention is carol's, which both of them are told
    third = seen["third"]["grades.csv"]
    assert f"similar-to:bob@{CELL}" not in _flags(third, "alice") and "similar-to:bob@softmax" in _flags(third, "alice")
    assert f"similar-to:alice@{CELL}" not in _flags(third, "bob") and "similar-to:alice@softmax" in _flags(third, "bob")
    assert f"similar-to:carol@{CELL}" in _flags(third, "bob") and f"similar-to:bob@{CELL}" in _flags(third, "carol")


def test_what_similarity_needs_is_kept_for_the_instructor_only_and_out_of_git(regraded):
    _, out, _ = regraded
    record = json.loads((out / RECORD).read_text())
    assert {(r["student_id"], r["assignment"]) for r in record["rows"]} == {(s, A) for s in ("alice", "bob", "carol", "dave")}
    assert "torch.einsum" in next(r for r in record["rows"] if r["student_id"] == "carol")["code"][CELL]
    assert os.stat(out / RECORD).st_mode & 0o077 == 0
    assert f"/{RECORD}" in (ROOT / ".gitignore").read_text().splitlines()


def test_a_score_and_a_comment_given_by_hand_survive_grading_again(regraded):
    _, _, course = regraded
    with Gradebook(f"sqlite:///{course}/gradebook.db") as gb:
        grade_ = gb.find_grade("masked_attention_hidden", A, A, "alice")
        assert grade_.manual_score == 1.5 and grade_.auto_score == 3 and grade_.score == 1.5
        assert grade_.needs_manual_grade  # nbgrader's rule: a regraded cell with a score by hand asks to be looked at
        assert gb.find_comment(CELL, A, A, "alice").manual_comment == "Mask before the softmax, see me."


def test_grades_csv_after_grading_again_has_the_score_given_by_hand(regraded):
    seen, _, course = regraded
    with Gradebook(f"sqlite:///{course}/gradebook.db") as gb:
        in_gradebook = gb.find_submission(A, "alice").score  # what formgrader, the feedback page and export show
    row = next(r for r in csv.DictReader(seen["second"]["grades.csv"].splitlines()) if r["student_id"] == "alice")
    assert float(row["score"]) == in_gradebook < float(row["max_score"])  # 1.5 by hand for a cell of 3
    assert "masked_attention_hidden=1.5" in row["cells"].split(";")


def test_grading_again_replaces_only_those_submissions_tracebacks_in_the_errors_log(tmp_path):
    """grader-errors.log keeps, word for word, the tracebacks of everyone the run did not grade."""
    def row(student, errors):
        return {"student_id": student, "assignment": A, "notebook": A, "score": 0.0, "max_score": 10.0,
                "late_penalty": 0.0, "flags": [], "cell_scores": {}, "checks": [], "code": {}, "errors": errors}

    ClassRecords(tmp_path).merge([row("ann", ["Traceback: ann's"]), row("ben", ["Traceback: ben's\n  line 2"])], {})
    ClassRecords(tmp_path).merge([row("ann", []), row("cy", ["Traceback: cy's"])], {})
    log = (tmp_path / ERRORS_LOG).read_text(encoding="utf-8")
    assert log == f"== ben / {A}\nTraceback: ben's\n  line 2\n== cy / {A}\nTraceback: cy's\n"
    assert [r["student_id"] for r in _read(tmp_path / "grades.csv")] == ["ann", "ben", "cy"]


@pytest.mark.parametrize(("layout", "expected", "found"), [
    ({}, "expected <student>/<assignment>/<assignment>.ipynb", "found nothing"),
    ({"alice/homework.ipynb": "{}", "bob/ch01_attention (1)/ch01_attention.ipynb": "{}"},
     "expected <student>/<assignment>/<assignment>.ipynb", "found 2 folders (alice/, bob/) holding no folder named after"),
    ({"alice/homework.ipynb": "{}"}, "Canvas", "found 1 folder (alice/) holding no folder named after an assignment"),
    ({"download/doejane_1234_501_ch01_attention.ipynb": "{}", "download/Untitled.ipynb": "{}"},
     "cannot tell whose notebook download/Untitled.ipynb is: expected <student>/", "(Blackboard)"),
    ({"class.zip": {"readme.txt": "x", "alice/ch1/x.ipynb": "{}"}}, "Canvas",
     "found 1 folder (alice/) holding no folder named after an assignment and 1 other file (readme.txt)"),
    ({"notes.ipynb": "{}"}, "cannot tell whose notebook notes.ipynb is: expected <student>/<assignment>", "Blackboard"),
])
def test_input_with_no_submission_changes_nothing_and_says_what_was_expected(course, tmp_path, capsys, layout,
                                                                             expected, found):
    import zipfile

    subs = tmp_path / "subs"
    subs.mkdir()
    for name, text in layout.items():
        if isinstance(text, dict):
            with zipfile.ZipFile(subs / name, "w") as zf:
                for member, data in text.items():
                    zf.writestr(member, data)
            subs = subs / name
        else:
            (subs / name).parent.mkdir(parents=True, exist_ok=True)
            (subs / name).write_text(text)
    out = tmp_path / "out"
    out.mkdir()
    (out / "grades.csv").write_text("student_id,assignment\nkept,ch01_attention\n")
    def gradebook():  # the gradebook and the copy grading keeps of it, as they are
        return [(p.name, p.stat().st_mtime_ns) for p in sorted(course.glob("gradebook.db*"))]

    before = gradebook()
    with pytest.raises(SystemExit) as exited:
        main(["grade", str(subs), "--root", str(course), "--out", str(out)])
    error = capsys.readouterr().err
    assert exited.value.code == 2 and error.count("\n") == 1, error
    assert expected in error and found in error and "Traceback" not in error
    assert (out / "grades.csv").read_text() == "student_id,assignment\nkept,ch01_attention\n"
    assert sorted(p.name for p in out.iterdir()) == ["grades.csv"]
    assert gradebook() == before


def test_grade_help_shows_every_default(capsys):
    with pytest.raises(SystemExit):
        main(["grade", "--help"])
    text = capsys.readouterr().out
    options = re.split(r"\n  (?=-)", text.split("options:", 1)[1])[1:]
    assert len(options) >= 14
    for option in options:
        if not option.startswith("-h"):
            assert "default" in " ".join(option.split()), option
    flat = " ".join(text.split())
    for said in ("(default: 30)", "(default: 2048)", "--jobs JOBS notebooks graded in parallel, one core each (default: 1)",
                 "(default: auto)", "c.Execute.timeout is not used"):
        assert said in flat


def test_before_grading_says_where_scores_go_and_that_executes_timeout_is_not_used(tmp_path):
    (tmp_path / "course").mkdir()
    course = make_course(tmp_path / "course", [])
    with (course / "autograde" / CONFIG_NAME).open("a") as config:
        config.write("\nc.Execute.timeout = 60\n")
    notes = before_grading(course, None, tmp_path / "elsewhere", Limits())
    assert any("--out" in n and f"sqlite:///{course}/gradebook.db" in n for n in notes)
    assert any("c.Execute.timeout = 60 is not used" in n and "30 s (--cell-timeout)" in n for n in notes)
    assert before_grading(course, None, course, Limits(cell_timeout=60)) == []


def test_the_summary_names_who_is_flagged_and_why_in_a_line_of_its_own():
    rows = [{"student_id": f"s{i:02d}", "assignment": A, "flags": ["no-timestamp"]} for i in range(12)]
    rows[0]["flags"] += ["late"]
    rows[1]["flags"] += ["timeout", "similar-to:s00@softmax", "crashed", "bad-reply", "grader-error"]
    for row in rows[2:11]:
        row["flags"] += ["forbidden-call"]
    text = summary(rows, Path("out"), ROOT).splitlines()[0]
    assert text.startswith("graded 12 notebooks; every one flagged no-timestamp; 11 flagged besides: s00 (late), "
                           "s01 (grader-error, bad-reply, crashed +2), s02 (forbidden-call)")
    assert text.endswith("s07 (forbidden-call) … and 3 more")
    one = summary([{"student_id": "ada", "assignment": A, "flags": []}], Path("out"), ROOT)
    assert one.startswith("graded 1 notebook; none flagged\n")


def test_the_report_brings_grades_csv_in_step_with_scores_given_by_hand_since(regraded):
    """A score given in formgrader after the last run reaches grades.csv and the report when the report is made."""
    _, out, course = regraded
    with Gradebook(f"sqlite:///{course}/gradebook.db") as gb:
        gb.find_grade("masked_attention_hidden", A, A, "bob").manual_score = 1  # a whole number: written 9.0, not 9
        gb.db.commit()
        in_gradebook = gb.find_submission(A, "bob").score
    before = {r["student_id"]: r for r in csv.DictReader((out / "grades.csv").open(newline=""))}
    said = _run_main([str(out), "--root", str(course)], report_main)
    after = {r["student_id"]: r for r in csv.DictReader((out / "grades.csv").open(newline=""))}
    assert "grades.csv: 1 row brought in step with the gradebook's scores" in said
    assert float(after["bob"]["score"]) == in_gradebook != float(before["bob"]["score"])
    assert after["bob"]["score"] == str(float(in_gradebook))  # as grading writes a score
    assert "masked_attention_hidden=1" in after["bob"]["cells"].split(";")
    assert {s: r for s, r in after.items() if s != "bob"} == {s: r for s, r in before.items() if s != "bob"}
    assert "brought in step" not in _run_main([str(out), "--root", str(course)], report_main)  # nothing new: untouched
