"""Formgrader for this course, as an instructor uses it: ``jupyter lab`` started at the course root finds the
course (the root's nbgrader_config.py), shows every submission graded from a zip (copied into ``submitted/``) with
its score after the late penalty (`autograde.formgrader`), as grades.csv gives it, on every page that shows one;
flags what the grader flagged with the reason, opens the notebooks its links name, refuses its Autograde button
(which would run the students' code outside the sandbox) and makes the course's feedback page. The helpers behind
it (`autograde.autograded.keep_submission`, `grader_note`, `SandboxOnly`, `autograde.formgrader.FinalScores`) are
tested alone first."""
from __future__ import annotations

import contextlib
import csv
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import quote

import pytest

from autograde.autograded import UNFLAGGED, Recorder, SandboxOnly, grader_note, keep_submission
from autograde.classroom import make_course, solved_notebook, write_submission
from autograde.course import CONFIG_NAME, nbgrader_config
from autograde.feedback import GRADER_NOTE, feedback_path
from autograde.formgrader import FinalScores
from site_browser import browser, wait  # noqa: F401 (fixture)

A = "ch01_attention"
BIN = Path(sys.executable).parent
TOKEN = "formgrader-test-token"
UNSTABLE = "def softmax(x, dim=-1):\n    e = torch.exp(x)\n    return e / e.sum(dim=dim, keepdim=True)"
DELEGATES = "def softmax(x, dim=-1):\n    return torch.softmax(x, dim=dim)"
# A late policy of the instructor's own (docs/instructor.md, "Release") that takes a part, so that a score after it
# is neither the one before it nor 0
QUARTER_OFF = '''
from nbgrader.plugins import LateSubmissionPlugin


class QuarterOff(LateSubmissionPlugin):
    def late_submission_penalty(self, student_id, score, total_seconds):
        return 0.25 * score if total_seconds > 0 else 0.0


c.AssignLatePenalties.plugin_class = QuarterOff
'''
STUDENTS = {  # student -> (answers, when the LMS says it was handed in; due 2026-11-20 17:00 UTC)
    "ontime": ({}, "2026-11-20 16:59:00"),
    "late": ({}, "2026-11-21 09:00:00"),
    "unstable": ({"softmax": UNSTABLE}, "2026-11-19 12:00:00"),
    "delegates": ({"softmax": DELEGATES}, "2026-11-20 10:00:00"),
}


# -- the helpers, alone -------------------------------------------------------------------------------------------

def _submission(folder: Path, student: str, text: str, stamp: str | None) -> Path:
    path = folder / student / A / f"{A}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if stamp:
        (path.parent / "timestamp.txt").write_text(stamp)
    return path


@pytest.mark.parametrize("ours, theirs, kept", [
    ("2026-11-21 09:00:00 UTC", "2026-11-20 09:00:00 UTC", True),   # ours is later
    ("2026-11-20 09:00:00 UTC", "2026-11-21 09:00:00 UTC", False),  # the one there is later: kept
    (None, "2026-11-21 09:00:00 UTC", False),                       # there is a time, ours none: it may be newer
    ("2026-11-21 09:00:00 UTC", None, True),                        # ours has a time, the one there none
])
def test_keep_submission_never_replaces_a_newer_one(tmp_path, ours, theirs, kept):
    submitted, staged = tmp_path / "submitted", tmp_path / "staged"
    _submission(submitted, "bob", "theirs", theirs)
    notebook = _submission(tmp_path / "zip", "bob", "ours", None)
    _submission(staged, "bob", "", ours)
    (staged / "bob" / A / "submission_secret.txt").write_text("secret")
    assert keep_submission(submitted, "bob", A, notebook, staged) is kept
    folder = submitted / "bob" / A
    assert (folder / f"{A}.ipynb").read_text() == ("ours" if kept else "theirs")
    stamp = folder / "timestamp.txt"
    assert (stamp.read_text() if stamp.exists() else None) == (ours if kept else theirs)
    assert (folder / "submission_secret.txt").exists() is kept


def test_keep_submission_without_times_keeps_the_notebook_written_last(tmp_path):
    submitted, staged = tmp_path / "submitted", tmp_path / "staged"
    there = _submission(submitted, "bob", "theirs", None)
    notebook = _submission(tmp_path / "zip", "bob", "ours", None)
    os.utime(there, (time.time() + 60, time.time() + 60))  # the one there was written later
    assert not keep_submission(submitted, "bob", A, notebook, staged)
    os.utime(there, (time.time() - 60, time.time() - 60))
    assert keep_submission(submitted, "bob", A, notebook, staged)
    assert (submitted / "bob" / A / f"{A}.ipynb").read_text() == "ours"
    assert keep_submission(submitted, "carol", A, _submission(tmp_path / "zip", "carol", "new", None), staged)


def test_keep_submission_leaves_a_class_graded_from_submitted_alone(tmp_path):
    notebook = _submission(tmp_path / "submitted", "bob", "as collected", "2026-11-20 09:00:00 UTC")
    _submission(tmp_path / "staged", "bob", "", "2026-11-21 09:00:00 UTC")
    assert not keep_submission(tmp_path / "submitted", "bob", A, notebook, tmp_path / "staged")
    assert (notebook.parent / "timestamp.txt").read_text() == "2026-11-20 09:00:00 UTC"


def test_the_grader_note_says_what_each_flag_asks_and_what_the_late_penalty_took():
    note = grader_note(["late", "similar-to:bob", "forbidden-call", "time-unverified"], seconds_late=16 * 3600,
                       penalty=10, score=10, max_score=10)
    assert note.startswith(GRADER_NOTE)
    assert "- late: handed in 16 h after the due date. The late policy took 10 points off: 0 / 10 after it." in note
    assert "- similar-to:bob: a solution cell is nearly another student's" in note
    assert "- forbidden-call: the code ran a PyTorch function the exercise forbids" in note
    assert grader_note([]) == ""


def test_nbgraders_autograde_converter_refuses_and_the_recorder_does_not(tmp_path):
    from nbconvert.exporters import NotebookExporter
    from nbgrader.converters import Autograde, NbGraderException

    (tmp_path / "course").mkdir()
    config = nbgrader_config(root=make_course(tmp_path / "course", []))
    with pytest.raises(NbGraderException, match="python -m autograde grade"):
        SandboxOnly()
    assert Autograde(config=config).exporter_class is SandboxOnly  # what nbgrader autograde and formgrader build
    assert Recorder(tmp_path / "staging", tmp_path / "course", config).converter.exporter_class is NotebookExporter


# -- formgrader, in a browser -------------------------------------------------------------------------------------

def _nbgrader(root: Path, *args: str) -> subprocess.CompletedProcess:
    """An nbgrader command as the instructor runs it: at the course root."""
    result = subprocess.run([str(BIN / "nbgrader"), *args], cwd=root, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return result


@pytest.fixture(scope="module")
def graded(tmp_path_factory, released_course):
    """A class handed in as a zip, with the LMS's times, graded into the course root; its grades.csv rows."""
    tmp = tmp_path_factory.mktemp("formgrader")
    root = released_course(tmp / "course", [A])
    with (root / "autograde" / CONFIG_NAME).open("a") as config:
        config.write(QUARTER_OFF)
    _nbgrader(root, "db", "assignment", "add", A, "--duedate=2026-11-20 17:00:00 UTC")
    for student, (answers, _) in STUDENTS.items():
        write_submission(tmp / "class", student, A, solved_notebook(A, answers, root))
    shutil.make_archive(str(tmp / "class"), "zip", tmp / "class")
    times = tmp / "times.csv"
    times.write_text("student_id,assignment,time\n" + "".join(f"{s},{A},{t}\n" for s, (_, t) in STUDENTS.items()))
    result = subprocess.run([sys.executable, "-m", "autograde", "grade", str(tmp / "class.zip"), "--root", str(root),
                             "--submitted-at", str(times)], cwd=root, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    with (root / "grades.csv").open() as f:
        return root, tmp / "class", {row["student_id"]: row for row in csv.DictReader(f)}


def _before_penalty(row: dict) -> float:
    """nbgrader's score of a grades.csv row: its cells' points added up, before the late penalty."""
    return sum(float(cell.split("=")[1]) for cell in row["cells"].split(";"))


@pytest.mark.slow
def test_final_scores_give_grades_csvs_score_where_nbgraders_api_gives_the_one_before_the_penalty(graded):
    from nbgrader.apps.api import NbGraderAPI

    root, _, rows = graded
    final, config = {s: float(row["score"]) for s, row in rows.items()}, nbgrader_config(root=root)
    taken = {s: float(row["late_penalty"]) for s, row in rows.items()}
    assert 0 < final["late"] < _before_penalty(rows["late"]) and sum(taken.values()) == taken["late"]
    ours, nbgraders = FinalScores(config=config), NbGraderAPI(config=config)
    for api, off in ((ours, dict.fromkeys(final, 0.0)), (nbgraders, taken)):  # nbgrader's adds the penalty back
        expected = pytest.approx({s: final[s] + off[s] for s in final})
        assert {x["student"]: x["score"] for x in api.get_submissions(A)} == expected
        assert {s: api.get_submission(A, s)["score"] for s in final} == expected
        assert {s: x["score"] for s in final for x in api.get_student_submissions(s)} == expected  # one assignment
        assert {x["student"]: x["score"] for x in api.get_notebook_submissions(A, A)} == expected
        assert {s: x["score"] for s in final for x in api.get_student_notebook_submissions(s, A)} == expected
        assert {s: api.get_student(s)["score"] for s in final} == expected
        assert {x["id"]: x["score"] for x in api.get_students()} == expected
        mean = pytest.approx(sum(final[s] + off[s] for s in final) / len(final))
        assert api.get_assignment(A)["average_score"] == mean and api.get_assignments()[0]["average_score"] == mean
        assert [x["average_score"] for x in api.get_notebooks(A)] == [mean]
    # the parts of a score stay nbgrader's: the code cells' points, as grades.csv's cells give them
    assert ours.get_submission(A, "late")["code_score"] == pytest.approx(_before_penalty(rows["late"]))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def jupyter_lab(root: Path, home: Path):
    """``jupyter lab`` started at the course root, as the instructor starts it (a token, no browser); its URL."""
    port, log = _free_port(), (home / "jupyter.log").open("w")
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(home / "config"), "JUPYTER_RUNTIME_DIR": str(home / "runtime")}
    command = [str(BIN / "jupyter"), "lab", "--no-browser", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
               f"--IdentityProvider.token={TOKEN}", *(["--allow-root"] if os.geteuid() == 0 else [])]
    server = subprocess.Popen(command, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={TOKEN}", timeout=2):
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError((home / "jupyter.log").read_text()[-3000:]) from None
                time.sleep(0.3)
        yield base
    finally:
        server.terminate()
        try:
            server.wait(15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


@pytest.fixture(scope="module")
def lab(graded, tmp_path_factory):
    """`jupyter_lab` at the graded course's root, with the extensions its environment enables: its URL."""
    home = tmp_path_factory.mktemp("lab")
    with jupyter_lab(graded[0], home) as url:
        assert "autograde.formgrader: formgrader shows every score after the late penalty" in \
            (home / "jupyter.log").read_text(), "autograde.formgrader is not enabled here: `make setup` enables it"
        yield url


def _text(driver) -> str:
    return driver.find_element("tag name", "body").text


def _rows(driver, cell: str) -> dict[str, object]:
    """The table rows formgrader has drawn, by student id: what ``cell`` (JavaScript, ``row`` in scope) gives."""
    return driver.execute_script(
        "const out = {}; for (const row of document.querySelectorAll('tbody tr')) {"
        "  const id = row.querySelector('.student-id, a.name-shown'); if (!id) continue;"
        f"  out[id.textContent.trim()] = (() => {{ {cell} }})(); }} return out;")


@pytest.mark.slow
def test_formgrader_at_the_course_root_shows_the_class_and_its_links_work(graded, lab, browser, tmp_path):  # noqa: F811
    root, class_folder, rows = graded
    # what nbgrader's collect would have left: the notebooks as handed in, with the LMS's times
    for student in STUDENTS:
        folder = root / "submitted" / student / A
        assert (folder / f"{A}.ipynb").read_bytes() == (class_folder / student / A / f"{A}.ipynb").read_bytes()
        assert (folder / "timestamp.txt").read_text().startswith(STUDENTS[student][1])
    autograded = {s: (root / "autograded" / s / A / f"{A}.ipynb").read_bytes() for s in STUDENTS}
    assert "late" in rows["late"]["flags"] and "forbidden-call" in rows["delegates"]["flags"]

    browser.get(f"{lab}/login?next={quote('/formgrader/manage_assignments')}&token={TOKEN}")
    # the course's assignment, with every submission counted (they are in submitted/)
    count = wait(browser, lambda b: b.find_elements("css selector", "td.num-submissions a"))[0]
    assert count.text == str(len(STUDENTS))
    edit = browser.find_element("css selector", "td.name a").get_attribute("href")
    preview = browser.find_element("css selector", "td.preview a").get_attribute("href")
    browser.save_screenshot(str(tmp_path / "manage_assignments.png"))
    # its Edit and release links open the source and the released notebook in the server, no 404
    for link, shows in ((edit, f"{A}.md"), (preview, f"{A}.ipynb")):
        browser.get(link)
        wait(browser, lambda b: shows in _text(b))  # noqa: B023
        assert "404" not in browser.title

    # every graded submission (its score: the next test)
    browser.get(f"{lab}/formgrader/manage_submissions/{A}")
    wait(browser, lambda b: len(_rows(b, "return row.querySelector('.score').textContent")) == len(STUDENTS))
    assert set(_rows(browser, "return row.querySelector('.status').textContent")) == set(STUDENTS)
    # the Autograde button refuses: it would run the student's code outside the sandbox
    browser.execute_script(
        "for (const row of document.querySelectorAll('tbody tr'))"
        "  if (row.querySelector('.student-id').textContent.trim() === 'unstable') row.querySelector('.autograde a').click();")
    modal = wait(browser, lambda b: [m for m in b.find_elements("css selector", "#error-modal") if m.is_displayed()])[0]
    assert "python -m autograde grade" in modal.text
    browser.save_screenshot(str(tmp_path / "autograde_refused.png"))
    assert {s: (root / "autograded" / s / A / f"{A}.ipynb").read_bytes() for s in STUDENTS} == autograded
    # its Generate Feedback button writes the page `grade` wrote: the course's, one page
    graded_page = feedback_path(root, "late", A).read_text()
    feedback_path(root, "late", A).unlink()
    browser.get(f"{lab}/formgrader/manage_submissions/{A}")
    wait(browser, lambda b: len(_rows(b, "return 1")) == len(STUDENTS))
    browser.execute_script(
        "for (const row of document.querySelectorAll('tbody tr'))"
        "  if (row.querySelector('.student-id').textContent.trim() === 'late') row.querySelector('.generate-feedback a').click();")
    wait(browser, lambda b: [m for m in b.find_elements("css selector", "#success-modal") if m.is_displayed()])
    assert feedback_path(root, "late", A).read_text() == graded_page

    # Flagged? as the grader found: late, a forbidden call, near copies of one another (the class shares the
    # instructor's solutions); a time's source alone flags nothing
    browser.get(f"{lab}/formgrader/gradebook/{A}/{A}")
    wait(browser, lambda b: len(_rows(b, "return 1")) == len(STUDENTS))
    flagged = _rows(browser, "return !!row.querySelector('.flagged .glyphicon-flag')")
    assert flagged == {s: bool(set(rows[s]["flags"].split(";")) - UNFLAGGED - {""}) for s in STUDENTS}
    assert flagged["late"] and flagged["delegates"]
    browser.save_screenshot(str(tmp_path / "gradebook_flagged.png"))
    # the reason, in the first solution cell's comment box, with the score after the late penalty
    late = _rows(browser, "return row.querySelector('a.name-shown').href")["late"]
    browser.get(late)
    box = wait(browser, lambda b: [t for t in b.find_elements("css selector", "textarea#softmax-comment")
                                   if GRADER_NOTE in (t.get_attribute("placeholder") or "")])[0]
    note = box.get_attribute("placeholder")  # the first solution cell's, while no comment is typed in
    assert note.startswith(GRADER_NOTE) and "- late: handed in 16 h after the due date" in note
    assert f"took {float(rows['late']['late_penalty']):g} points off: {float(rows['late']['score']):g} / 10 after it" \
        in note
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", box)
    browser.save_screenshot(str(tmp_path / "formgrade_note.png"))
    # "open live notebook": the autograded notebook, in the server
    live = wait(browser, lambda b: b.find_elements("css selector", "li.live-notebook a.name-hidden[href]"))[0]
    browser.get(live.get_attribute("href"))
    wait(browser, lambda b: "def softmax" in _text(b), timeout=60)
    assert "autograded/late" in browser.current_url
    assert 'content="transformer-piece-by-piece feedback"' in graded_page and GRADER_NOTE not in graded_page
    assert f"Late submission penalty: {float(rows['late']['late_penalty']):g} points taken off" in graded_page


def _scores(driver, url: str, count: int, cell: str = ".score") -> list[float]:
    """The scores (``a / b``: a) in the ``cell`` column of the table at ``url``, once it has ``count`` rows."""
    driver.get(url)
    texts = wait(driver, lambda b: (lambda t: len(t) == count and all(t) and t)(b.execute_script(  # noqa: B023
        f"return [...document.querySelectorAll('tbody tr {cell}')].map(c => c.textContent.trim())")))
    return [float(text.split("/")[0]) for text in texts]


@pytest.mark.slow
def test_formgrader_shows_every_score_after_the_late_penalty_as_grades_csv_does(graded, lab, browser):  # noqa: F811
    root, _, rows = graded
    final = {s: round(float(row["score"]), 2) for s, row in rows.items()}  # formgrader rounds to 2 places
    assert 0 < final["late"] < _before_penalty(rows["late"])  # a policy that took a part off
    browser.get(f"{lab}/login?next={quote('/formgrader')}&token={TOKEN}")
    formgrader = f"{lab}/formgrader"
    # an assignment's submissions, and the notebook's
    for page in (f"manage_submissions/{A}", f"gradebook/{A}/{A}"):
        _scores(browser, f"{formgrader}/{page}", len(STUDENTS))
        shown = _rows(browser, "return parseFloat(row.querySelector('.score').textContent.split('/')[0])")
        assert shown == pytest.approx(final), page
    # the students, each student's assignments and notebooks (one here)
    browser.get(f"{formgrader}/manage_students")
    wait(browser, lambda b: len(b.find_elements("css selector", "tbody tr td.score")) == len(STUDENTS))
    shown = browser.execute_script("const out = {}; for (const row of document.querySelectorAll('tbody tr'))"
                                   "  out[row.querySelector('.id').textContent.trim()] ="
                                   "    parseFloat(row.querySelector('.score').textContent.split('/')[0]);"
                                   "return out;")
    assert shown == pytest.approx(final)
    for student, score in final.items():
        assert _scores(browser, f"{formgrader}/manage_students/{student}", 1) == pytest.approx([score])
        assert _scores(browser, f"{formgrader}/manage_students/{student}/{A}", 1) == pytest.approx([score])
    # the averages: the assignment's and its notebook's
    mean = round(sum(float(row["score"]) for row in rows.values()) / len(rows), 2)
    assert _scores(browser, f"{formgrader}/gradebook", 1) == pytest.approx([mean])
    assert _scores(browser, f"{formgrader}/gradebook/{A}", 1, ".avg-score") == pytest.approx([mean])
