"""An LMS's download is graded as it comes: Canvas's flat zip, Moodle's folders, Blackboard's attempts, each told
apart by its names (or named with --layout), the student ids made from the LMS's names or given by a mapping,
Blackboard's attempt time used as the submission's time and Canvas's LATE kept as a flag; a notebook no layout
names stops the run in one line. Each layout has a realistic archive graded once (the pool runs no sandbox:
`TrustingPool`), the rest is what `collect` finds."""
import zipfile
from datetime import datetime

import nbformat
import pytest
from courses import new_course, set_due
from nbgrader.api import Gradebook
from trusting_pool import TrustingPool

from autograde.__main__ import main
from autograde.classroom import solved_notebook
from intake.collection import TOO_LARGE, CollectionError, collect, default_id
from autograde.grade import GradingError, grade
from intake.lms import assignment_of, read_mapping
from autograde.release import release

A, B = "ch01_attention", "ch02_multihead"


def _zip(path, members):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


@pytest.fixture(scope="module")
def downloads(tmp_path_factory):
    """Each LMS's download of ch01, graded into a course that scores a late submission 0."""
    tmp = tmp_path_factory.mktemp("lms")
    course = new_course(tmp / "course", [A, B], late_penalty="zero")  # B is known, not released
    release([A], root=course)
    set_due(course, A)
    nb = nbformat.writes(solved_notebook(A, root=course))
    canvas = _zip(tmp / "submissions.zip", {
        f"doejane_1234_501_{A}.ipynb": nb,
        f"roebob_LATE_2345_502_{A}-1.ipynb": nb,  # Canvas's name for a second upload of the same file
        "smithann_3456_503_homework.ipynb": nb,  # renamed: the download is ch01's alone
        "smithann_3456_504_notes.pdf": "%PDF-1.4",
        f"leejo_4567_505_{A}.ipynb": nb,  # two students of one name, told apart by Canvas's user id
        f"leejo_5678_506_{A}.ipynb": nb,
    })
    moodle = _zip(tmp / "CS101-Ch01 Attention-12345.zip", {
        f"Jane Doe_101_assignsubmission_file_/{A}.ipynb": nb,
        "Bob Roe_102_assignsubmission_file_/Ch01_Attention (1).ipynb": nb,
        "Bob Roe_102_assignsubmission_onlinetext_/onlinetext.html": "<p>see the notebook</p>",
        f"Seán O'Brien_103_assignsubmission_file_/{A}.ipynb": nb,
    })
    mapping = tmp / "mapping.csv"
    mapping.write_text("lms_name,student_id,email\nJane Doe,jdoe,jane@uni.example\n102,broe,\n", encoding="utf-8")
    blackboard = _zip(tmp / "gradebook_CS101_Ch01_2026-11-22-08-00-00.zip", {  # attempts in Berlin's time
        f"Ch01_doejane_attempt_2026-11-20-17-59-00_{A}.ipynb": nb,  # 16:59 UTC: on time
        "Ch01_doejane_attempt_2026-11-20-17-59-00.txt": "Name: Jane Doe (doejane)\nAssignment: Ch01\n",
        f"Ch01_roebob_attempt_2026-11-19-10-00-00_{A}.ipynb": nb,
        f"Ch01_roebob_attempt_2026-11-21-10-00-00_{A}.ipynb": nb,  # the latest attempt: late
        "Ch01_smithann_attempt_2026-11-20-17-30-00_my attention.ipynb": nb,  # 16:30 UTC, though 17:30 in UTC is late
    })
    graded = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("autograde.grade.SlotPool", TrustingPool)
        for name, source, options in (("canvas", canvas, {}), ("moodle", moodle, {"mapping": mapping}),
                                      ("blackboard", blackboard, {"timezone": "Europe/Berlin"})):
            rows = grade(source, tmp / name, root=course, progress=False, **options)
            graded[name] = {r["student_id"]: r for r in rows}
    return graded, course


def test_a_canvas_download_is_graded_under_canvas_names_and_keeps_its_late_marker(downloads, capsys):
    rows = downloads[0]["canvas"]
    assert sorted(rows) == ["doejane", "leejo_4567", "leejo_5678", "roebob", "smithann"]
    assert all(r["assignment"] == A and r["score"] == 10 for r in rows.values())
    assert "lms-late" in rows["roebob"]["flags"] and "lms-late" not in rows["doejane"]["flags"]
    assert all("no-timestamp" in r["flags"] for r in rows.values())  # a marker is no time: the late policy did not run


def test_a_moodle_download_is_graded_under_the_mappings_ids(downloads):
    rows = downloads[0]["moodle"]
    assert sorted(rows) == ["Seán_OBrien", "broe", "jdoe"]  # Bob Roe by his participant id; Seán by his name
    assert all(r["score"] == 10 and r["assignment"] == A for r in rows.values())


def test_a_blackboard_download_is_graded_at_its_latest_attempt_whose_time_counts(downloads):
    rows, course = downloads[0]["blackboard"], downloads[1]
    assert sorted(rows) == ["doejane", "roebob", "smithann"]
    assert "late" in rows["roebob"]["flags"] and rows["roebob"]["score"] == 0
    for student in ("doejane", "smithann"):
        assert "late" not in rows[student]["flags"] and rows[student]["score"] == 10
    assert not any({"no-timestamp", "time-unverified"} & set(r["flags"]) for r in rows.values())
    with Gradebook(f"sqlite:///{course}/gradebook.db") as gb:
        assert gb.find_submission(A, "roebob").timestamp == datetime(2026, 11, 21, 9, 0)
        assert gb.find_submission(A, "smithann").timestamp == datetime(2026, 11, 20, 16, 30)


def _collect(source, tmp_path, layout="auto", mapping=None, assignments=(A, B), limit=10_000, budget=100_000):
    return collect(source, tmp_path / "into", list(assignments), limit, budget, layout, mapping)


def test_names_tell_the_layout_and_a_layout_named_reads_only_its_own(tmp_path):
    for name, (member, student) in {"canvas": (f"doejane_1234_501_{A}.ipynb", "doejane"),
                                    "moodle": (f"Jane Doe_101_assignsubmission_file_/{A}.ipynb", "Jane_Doe"),
                                    "blackboard": (f"Ch01_doejane_attempt_2026-11-20-17-03-00_{A}.ipynb", "doejane"),
                                    "nbgrader": (f"doejane/{A}/{A}.ipynb", "doejane")}.items():
        found = _collect(_zip(tmp_path / f"{name}.zip", {member: "{}"}), tmp_path / name)
        assert found.layout == name and [(s.student_id, s.assignment) for s in found.submissions] == [(student, A)]
    with pytest.raises(CollectionError, match=r"cannot tell whose notebook doejane_1234_501_ch01_attention.ipynb is: "
                                              r"expected <Full Name>_<id>_assignsubmission_file_/<file>.ipynb \(Moodle\)$"):
        _collect(tmp_path / "canvas.zip", tmp_path / "again", layout="moodle")


def test_a_moodle_download_unzipped_into_a_folder_of_its_own_is_read_where_it_is(tmp_path):
    folder = tmp_path / "CS101-Ch01 Attention-12345"
    (folder / "Jane Doe_101_assignsubmission_file_").mkdir(parents=True)
    (folder / "Jane Doe_101_assignsubmission_file_" / f"{A}.ipynb").write_text("{}")
    (folder / "Bob Roe_102_assignsubmission_file_").mkdir()
    (folder / "Bob Roe_102_assignsubmission_file_" / f"{A}.ipynb").symlink_to(tmp_path / "elsewhere.ipynb")
    found = _collect(tmp_path, tmp_path)  # the folder the download was unpacked in: one folder, the download's
    subs = {s.student_id: s for s in found.submissions}
    assert subs["Jane_Doe"].path == folder / "Jane Doe_101_assignsubmission_file_" / f"{A}.ipynb"
    assert subs["Bob_Roe"].path is None and subs["Bob_Roe"].flags == ("symlink-outside",)


def test_a_download_that_mixes_layouts_or_names_no_one_stops(tmp_path):
    mixed = _zip(tmp_path / "mixed.zip", {f"doejane_1234_501_{A}.ipynb": "{}", f"alice/{A}/{A}.ipynb": "{}"})
    with pytest.raises(CollectionError, match=r"mixes layouts \(nbgrader, canvas\): grade each apart"):
        _collect(mixed, tmp_path)
    stray = _zip(tmp_path / "stray.zip", {f"doejane_1234_501_{A}.ipynb": "{}", "Untitled.ipynb": "{}"})
    with pytest.raises(CollectionError, match=r"cannot tell whose notebook Untitled.ipynb is: expected <student>/"
                                              r".*\(Canvas\) or .*\(Moodle\) or .*\(Blackboard\)$"):
        _collect(stray, tmp_path)


def test_a_notebook_named_for_no_assignment_is_named_where_the_download_holds_several(tmp_path):
    download = _zip(tmp_path / "two.zip", {f"doejane_1234_501_{A}.ipynb": "{}", f"roebob_2345_502_{B}.ipynb": "{}",
                                           "smithann_3456_503_homework.ipynb": "{}"})
    found = _collect(download, tmp_path)
    assert [(s.student_id, s.assignment) for s in found.submissions] == [("doejane", A), ("roebob", B)]
    assert found.notes == [f"not graded: smithann_3456_503_homework.ipynb names no assignment ({A}, {B})"]


def test_one_students_hoard_in_an_lms_zip_costs_only_them(tmp_path):
    download = _zip(tmp_path / "hoard.zip", {
        f"doejane_1234_501_{A}.ipynb": "{}",
        f"hoarder_2345_502_{A}.ipynb": "x" * 9_000, f"hoarder_2345_503_{B}.ipynb": "x" * 9_000,
        f"bigone_3456_504_{A}.ipynb": "x" * 10_001,
    })
    subs = {(s.student_id, s.assignment): s for s in _collect(download, tmp_path, budget=10_000).submissions}
    assert subs[("doejane", A)].path is not None and subs[("doejane", A)].flags == ()
    assert subs[("hoarder", A)].flags == subs[("hoarder", B)].flags == (TOO_LARGE,)
    assert subs[("hoarder", A)].path is None and subs[("hoarder", B)].path is None
    assert subs[("bigone", A)].path is None and subs[("bigone", A)].flags == ("notebook-too-large",)


def test_a_mapping_can_name_nbgraders_folders_too_but_never_two_as_one(tmp_path):
    folder = tmp_path / "submitted"
    for student in ("alice", "alice2"):
        (folder / student / A).mkdir(parents=True)
        (folder / student / A / f"{A}.ipynb").write_text("{}")
    found = _collect(folder, tmp_path, mapping={"alice": "a.smith"})
    assert [s.student_id for s in found.submissions] == ["a.smith", "alice2"]
    with pytest.raises(CollectionError, match="the mapping gives a.smith two submissions of ch01_attention"):
        _collect(folder, tmp_path, mapping={"alice": "a.smith", "alice2": "a.smith"})


@pytest.mark.parametrize(("text", "message"), [
    ("name,id\nJane Doe,jdoe\n", "line 1: the header must name the columns lms_name, student_id"),
    ("lms_name,student_id\nJane Doe,jdoe\nJane Doe,jane\n", "line 3: Jane Doe is mapped to jdoe on line 2 already"),
    ("lms_name,student_id\nJane Doe,\n", "line 2: an lms_name without a student_id"),
])
def test_a_mapping_that_cannot_be_read_stops_before_anything_is_graded(tmp_path, capsys, text, message):
    (tmp_path / "mapping.csv").write_text(text)
    with pytest.raises(SystemExit) as exited:
        main(["grade", str(tmp_path), "--out", str(tmp_path / "out"), "--mapping", str(tmp_path / "mapping.csv")])
    error = capsys.readouterr().err
    assert exited.value.code == 2 and message in error and error.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_names_an_lms_gives_become_ids_nbgrader_can_export():
    assert default_id("Jane Doe") == "Jane_Doe" and default_id("Seán O'Brien") == "Seán_OBrien"
    assert default_id("=cmd|' /C calc'!A0", "7") == "cmd_C_calcA0" and default_id("'!", "7") == "7"
    assert assignment_of("Ch01_Attention (2).ipynb", "", [A, B]) == A
    assert assignment_of("homework.ipynb", "Chapter 2 – heads", [A, B]) == B
    assert assignment_of("homework.ipynb", "", [A, B]) is None
    assert read_mapping.__doc__  # the mapping's columns are documented where --mapping points


def test_grade_refuses_an_unknown_time_zone_for_a_download(tmp_path):
    with pytest.raises(GradingError, match="unknown time zone 'Mars/Olympus'"):
        grade(tmp_path, tmp_path / "out", timezone="Mars/Olympus")


def test_nbgraders_submitted_folder_inside_another_is_found_as_in_a_zip(tmp_path):
    (tmp_path / "download" / "submitted" / "alice" / A).mkdir(parents=True)
    (tmp_path / "download" / "submitted" / "alice" / A / f"{A}.ipynb").write_text("{}")
    found = _collect(tmp_path / "download", tmp_path)
    assert found.layout == "nbgrader" and [s.student_id for s in found.submissions] == ["alice"]


def test_a_layout_named_that_the_download_is_not_says_what_it_is(tmp_path):
    (tmp_path / "submitted" / "alice" / A).mkdir(parents=True)
    with pytest.raises(CollectionError, match=r"no submission in .*submitted: expected <name>_<userid>_<submissionid>"
                                              r"_<file>.ipynb \(Canvas\); found 1 student folder \(alice/\) in nbgrader's"):
        _collect(tmp_path / "submitted", tmp_path, layout="canvas")
