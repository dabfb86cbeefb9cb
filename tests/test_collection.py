"""Collecting submissions: a symlink or zip member that leaves its student's folder is refused with
a flag, one bad member costs only its student, nbgrader's timestamp.txt is read only when it is
what it claims, and a spreadsheet never runs a cell of grades.csv."""
import csv
import os
import stat
import zipfile

import pytest

from autograde.collection import CollectionError, extract_zip, find_submissions
from autograde.grade import _write_csv

A, B = "ch01_attention", "ch02_multihead"
LIMIT = 1000


def _notebook(folder, student, assignment=A, text="{}"):
    path = folder / student / assignment / f"{assignment}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _by_student(subs):
    return {(s.student_id, s.assignment): s for s in subs}


def test_symlinks_that_leave_the_students_folder_are_refused(tmp_path):
    secret = tmp_path / "solutions.ipynb"
    secret.write_text("the answers")
    root = tmp_path / "class"
    victim = _notebook(root, "victim")
    _notebook(root, "honest")
    (root / "steals" / A).mkdir(parents=True)
    (root / "steals" / A / f"{A}.ipynb").symlink_to(victim)  # another student's work
    (root / "reads" / A).mkdir(parents=True)
    (root / "reads" / A / f"{A}.ipynb").symlink_to(secret)  # a file outside the class
    (root / "borrows").symlink_to(root / "victim")  # a whole folder
    (root / "tidy" / A).mkdir(parents=True)
    (root / "tidy" / A / "work.ipynb").write_text("{}")
    (root / "tidy" / A / f"{A}.ipynb").symlink_to("work.ipynb")  # inside its own folder: fine
    subs = _by_student(find_submissions(root, [A], LIMIT))
    for student in ("steals", "reads", "borrows"):
        assert subs[(student, A)].path is None and "symlink-outside" in subs[(student, A)].flags
    assert subs[("victim", A)].path == victim and subs[("victim", A)].flags == ()
    assert subs[("honest", A)].flags == () and subs[("tidy", A)].path is not None


def test_a_notebook_over_the_size_limit_is_not_read(tmp_path):
    _notebook(tmp_path, "big", text="x" * (LIMIT + 1))
    (sub,) = find_submissions(tmp_path, [A], LIMIT)
    assert sub.path is None and sub.flags == ("notebook-too-large",)


def test_timestamps_are_read_only_when_nbgrader_can_parse_them_from_a_small_file_of_the_student(tmp_path):
    secret = tmp_path / "elsewhere.txt"
    secret.write_text("2020-01-01 00:00:00 UTC")
    stamps = {"on_time": "2026-11-20 16:59:00.000000 UTC", "garbage": "next tuesday, honest",
              "huge": "2026-11-20 16:59:00 UTC" + " " * 1000}
    for student, text in stamps.items():
        (_notebook(tmp_path / "class", student).parent / "timestamp.txt").write_text(text)
    (_notebook(tmp_path / "class", "linked").parent / "timestamp.txt").symlink_to(secret)
    _notebook(tmp_path / "class", "none")
    subs = {s.student_id: s for s in find_submissions(tmp_path / "class", [A], LIMIT)}
    assert subs["on_time"].timestamp == stamps["on_time"] and subs["on_time"].flags == ()
    assert subs["none"].timestamp is None and subs["none"].flags == ()
    for student in ("garbage", "huge", "linked"):
        assert subs[student].timestamp is None and subs[student].flags == ("bad-timestamp",), student


def _zip_with(path, members):
    with zipfile.ZipFile(path, "w") as zf:
        for name, data, link in members:
            info = zipfile.ZipInfo(name)
            if link:
                info.external_attr = (stat.S_IFLNK | 0o777) << 16
            zf.writestr(info, data)


def test_a_bad_zip_member_costs_only_its_student(tmp_path):
    archive = tmp_path / "class.zip"
    _zip_with(archive, [
        (f"good/{A}/{A}.ipynb", "{}", False),
        (f"evil/{A}/{A}.ipynb", "{}", False),
        ("evil/../../escaped.txt", "x", False),
        (f"evil/{B}/{B}.ipynb", "/etc/passwd", True),
        (f"links/{A}/{A}.ipynb", "mine.ipynb", True),
        (f"links/{A}/mine.ipynb", "{}", False),
        (f"bomb/{A}/{A}.ipynb", "x" * (LIMIT + 1), False),
    ])
    folder, flags = extract_zip(archive, tmp_path / "out", [A, B], LIMIT)
    assert not (tmp_path / "escaped.txt").exists() and not (tmp_path.parent / "escaped.txt").exists()
    assert flags == {"evil": ["unsafe-zip-member", "symlink-outside"], "bomb": ["file-too-large"]}
    subs = _by_student(find_submissions(folder, [A, B], LIMIT, flags))
    assert subs[("good", A)].path is not None and subs[("good", A)].flags == ()
    assert subs[("links", A)].path is not None and os.path.islink(subs[("links", A)].path)
    assert ("evil", B) not in subs and "unsafe-zip-member" in subs[("evil", A)].flags
    assert subs[("bomb", A)].path is None and "file-too-large" in subs[("bomb", A)].flags


def test_a_zip_wrapped_in_one_folder_is_found(tmp_path):
    archive = tmp_path / "class.zip"
    _zip_with(archive, [(f"submitted/s1/{A}/{A}.ipynb", "{}", False), (f"submitted/s2/{A}/{A}.ipynb", "{}", False)])
    folder, _ = extract_zip(archive, tmp_path / "out", [A], LIMIT)
    assert [s.student_id for s in find_submissions(folder, [A], LIMIT)] == ["s1", "s2"]


def test_a_file_that_is_not_a_zip_is_a_clear_error(tmp_path):
    (tmp_path / "class.zip").write_text("not a zip")
    with pytest.raises(CollectionError, match="not a readable zip"):
        extract_zip(tmp_path / "class.zip", tmp_path / "out", [A], LIMIT)


def test_csv_cells_that_a_spreadsheet_would_run_are_neutralised(tmp_path):
    rows = [{"student_id": name, "assignment": A, "notebook": A, "score": 1.0, "max_score": 2.0,
             "flags": ["=cmd|' /C calc'!A0"], "cell_scores": {"x": 1.0}}
            for name in ("=HYPERLINK(\"http://x\")", "+1", "-1", "@SUM(A1)", "plain")]
    _write_csv(tmp_path / "grades.csv", rows)
    with (tmp_path / "grades.csv").open() as f:
        written = list(csv.DictReader(f))
    assert [r["student_id"] for r in written] == ["'=HYPERLINK(\"http://x\")", "'+1", "'-1", "'@SUM(A1)", "plain"]
    assert all(r["flags"].startswith("'=") for r in written) and written[0]["score"] == "1.0"
