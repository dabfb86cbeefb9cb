"""When a submission was handed in comes from a record the student cannot write. A student writes their own
``timestamp.txt`` (nbgrader's submit does, in their process, and collect copies it: jupyter/nbgrader#1104):
with the instructor's ``--submitted-at`` file it is ignored, and the late policy uses the file's time; without
one it is used but flagged ``time-unverified``; a submission with no time at all is flagged ``no-timestamp``,
never silently on time, and no time an earlier run recorded decides its penalty."""
import csv
from datetime import datetime, timezone

import pytest
from nbgrader.api import Gradebook
from trusting_pool import TrustingPool

from autograde.classroom import solved_notebook, write_submission
from intake.collection import Submission
from autograde.grade import grade
from intake.submission_times import TimesError, parse_time, read_submission_times, settle_times

A = "ch01_attention"
EARLY = "2026-11-19 09:00:00.000000 UTC"  # what a forger writes in their timestamp.txt
LATE = "2026-11-21 09:00:00"


def _times(path, rows, header="student_id,assignment,time"):
    lines = [header, *(",".join(f'"{cell}"' for cell in row) for row in rows)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(("text", "utc"), [
    ("2026-11-20 17:03:00", "2026-11-20 17:03:00"),  # no zone: UTC, as nbgrader reads a due date
    ("2026-11-20T17:03:00Z", "2026-11-20 17:03:00"),
    ("2026-11-20T18:03:00+01:00", "2026-11-20 17:03:00"),
    ("2026-11-20 16:59:00.000000 UTC", "2026-11-20 16:59:00"),  # nbgrader's own
    ("Nov 20, 2026 5:03pm", "2026-11-20 17:03:00"),  # Canvas
    ("Friday, 20 November 2026, 5:03 PM", "2026-11-20 17:03:00"),  # Moodle
])
def test_an_lms_time_is_read_in_iso_or_as_canvas_and_moodle_write_it(text, utc):
    assert parse_time(text).astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S") == utc


def test_a_time_without_a_zone_is_in_the_zone_named(tmp_path):
    times = read_submission_times(_times(tmp_path / "t.csv", [("s1", A, "2026-11-20 18:03:00")]), "Europe/Berlin")
    assert times.times[("s1", A)] == ("2026-11-20 17:03:00.000000 UTC", 2)  # what nbgrader's parse_utc reads


@pytest.mark.parametrize(("rows", "header", "message"), [
    ([("s1", A, "2026-11-20 17:03:00"), ("s2", A, "next tuesday, honest")], None, "line 3: cannot read 'next tuesday"),
    ([("s1", A, "2026-11-20")], None, "line 2: cannot read '2026-11-20'"),  # a date is no time
    ([("s1", A, "20/11/2026 17:03")], None, "line 2"),  # day or month first? refused, not guessed
    ([("s1", A, "2026-11-20 17:03:00"), ("s1", A, "2026-11-18 08:00:00")], None, "line 3: a second time for s1"),
    ([("s1", A, "2026-11-20 17:03:00")], "student,assignment,submitted", "line 1: no column student_id, time"),
])
def test_a_times_file_that_cannot_be_read_is_an_error_naming_the_line(tmp_path, rows, header, message):
    path = _times(tmp_path / "t.csv", rows, header or "student_id,assignment,time")
    with pytest.raises(TimesError, match=message):
        read_submission_times(path)


def test_excels_csv_with_a_byte_order_mark_and_more_columns_is_read(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("\ufeffName,Student_ID,Assignment,Time\nAda,s1,ch01_attention,2026-11-20 17:03:00\n"
                    "Bob,s2,ch01_attention,\n", encoding="utf-8")
    assert read_submission_times(path).times == {("s1", A): ("2026-11-20 17:03:00.000000 UTC", 2)}


def test_the_students_own_time_is_a_claim_and_an_instructors_record_replaces_it(tmp_path):
    subs = [Submission("forger", A, None, (), EARLY), Submission("silent", A, None, ()),
            Submission("garbled", A, None, ("bad-timestamp",))]
    claims = {s.student_id: s for s in settle_times(subs, None)}
    assert claims["forger"].timestamp == EARLY and claims["forger"].flags == ("time-unverified",)
    assert claims["silent"].timestamp is None and claims["silent"].flags == ("no-timestamp",)
    assert claims["garbled"].flags == ("bad-timestamp",)
    record = read_submission_times(_times(tmp_path / "t.csv", [("forger", A, LATE), ("garbled", A, LATE)]))
    settled = {s.student_id: s for s in settle_times(subs, record)}
    assert settled["forger"].timestamp == "2026-11-21 09:00:00.000000 UTC" and settled["forger"].flags == ()
    assert settled["garbled"].flags == () and settled["silent"].flags == ("no-timestamp",)


@pytest.fixture(scope="module")
def course(tmp_path_factory, released_course):
    """A course whose late policy scores a late submission 0, with a due date."""
    return released_course(tmp_path_factory.mktemp("times") / "course", [A], late_penalty="zero", due=[A])


@pytest.fixture
def trusting(monkeypatch):
    monkeypatch.setattr("autograde.grade.SlotPool", TrustingPool)


def _class(folder, course, stamps):
    for student, stamp in stamps.items():
        path = write_submission(folder, student, A, solved_notebook(A, root=course))
        if stamp is not None:
            (path.parent / "timestamp.txt").write_text(stamp)
    return folder


def _recorded(course, student):
    with Gradebook(f"sqlite:///{course}/gradebook.db") as gb:
        submission = gb.find_submission(A, student)
        return submission.timestamp, submission.total_seconds_late


def test_a_forged_early_timestamp_loses_to_the_instructors_time(course, trusting, tmp_path, capsys):
    subs = _class(tmp_path / "subs", course, {"forger": EARLY, "honest": "2026-11-25 00:00:00 UTC", "unlisted": EARLY,
                                              "Zoe\u0308": None})  # as a folder unpacked on macOS spells Zoë
    times = _times(tmp_path / "times.csv", [("forger", A, LATE), ("honest", A, "Nov 20, 2026 4:59pm"),
                                             ("Zo\u00eb", A, LATE), ("ghost", A, LATE),
                                             ("forger", "ch02_multihead", LATE), ("honest", "ch02_multihead", LATE)])
    out = tmp_path / "out"
    rows = {r["student_id"]: r for r in grade(subs, out, root=course, progress=False, submitted_at=times)}
    said = capsys.readouterr().err
    assert f"{times} line 5: no submission of {A} by ghost" in said
    # another assignment's times are counted, not listed: a class's whole export is the usual file
    assert f"{times}: 2 times of assignments this run does not grade" in said and "ch02_multihead by" not in said
    assert "late" in rows["Zoe\u0308"]["flags"] and "no-timestamp" not in rows["Zoe\u0308"]["flags"]
    # the forger's own time said on time: the record's says late, and that is what nbgrader recorded and charged
    assert rows["forger"]["score"] == 0 and rows["forger"]["max_score"] == 10
    assert {"late"} <= set(rows["forger"]["flags"]) and "time-unverified" not in rows["forger"]["flags"]
    assert _recorded(course, "forger") == (datetime(2026, 11, 21, 9, 0), 16 * 3600)
    assert (out / "autograded" / "forger" / A / "timestamp.txt").read_text().startswith("2026-11-21 09:00:00")
    # a claim of lateness is no more trusted than one of punctuality
    assert rows["honest"]["score"] == 10 and "late" not in rows["honest"]["flags"]
    assert _recorded(course, "honest") == (datetime(2026, 11, 20, 16, 59), 0)
    # missing from the record: no time at all (its timestamp.txt is not used), and the row says so
    assert "no-timestamp" in rows["unlisted"]["flags"] and _recorded(course, "unlisted") == (None, 0)
    with (out / "grades.csv").open() as f:
        written = {r["student_id"]: r for r in csv.DictReader(f)}
    assert "late" in written["forger"]["flags"].split(";") and float(written["forger"]["score"]) == 0


def test_without_a_record_a_students_time_is_flagged_and_no_time_is_never_silently_on_time(course, trusting, tmp_path):
    subs = _class(tmp_path / "subs", course, {"claims": EARLY, "silent": None, "garbled": "next tuesday, honest"})
    rows = {r["student_id"]: r for r in grade(subs, tmp_path / "out", root=course, progress=False)}
    assert "time-unverified" in rows["claims"]["flags"] and "late" not in rows["claims"]["flags"]
    assert "no-timestamp" in rows["silent"]["flags"] and "bad-timestamp" in rows["garbled"]["flags"]


def test_a_time_an_earlier_run_recorded_does_not_decide_a_row_that_has_none(course, trusting, tmp_path):
    """Graded once from the student's claim (or an old record), then again from a record that lacks them: the
    gradebook keeps no time from before, so the penalty is the one this row's flags explain."""
    subs = _class(tmp_path / "subs", course, {"regraded": "2026-11-28 00:00:00 UTC"})
    first = grade(subs, tmp_path / "out", root=course, progress=False)
    assert "late" in first[0]["flags"] and first[0]["score"] == 0
    times = _times(tmp_path / "times.csv", [("someone_else", A, LATE)])
    (again,) = grade(subs, tmp_path / "out", root=course, progress=False, submitted_at=times)
    assert again["flags"].count("no-timestamp") == 1 and "late" not in again["flags"] and again["score"] == 10
    assert _recorded(course, "regraded") == (None, 0)
