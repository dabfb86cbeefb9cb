"""Collecting submissions: a symlink or zip member that leaves its student's folder is refused with
a flag, one bad member or one student over budget costs only that student, nbgrader's timestamp.txt
is read only when it is what it claims, and a spreadsheet never runs a cell of grades.csv."""
import csv
import os
import stat
import zipfile

import pytest

from intake import collection
from intake.collection import SMALL_TEXT_BYTES, CollectionError, extract_zip, find_submissions, without_assignments
from autograde.records import write_csv

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


def test_a_notebook_that_is_not_a_file_is_not_read(tmp_path):
    """A pipe would keep the slot that reads it waiting until its task times out: neither it nor a folder is
    opened."""
    for student, make in (("pipe", os.mkfifo), ("folder", os.mkdir)):
        path = tmp_path / student / A / f"{A}.ipynb"
        path.parent.mkdir(parents=True)
        make(path)
    subs = find_submissions(tmp_path, [A], LIMIT)
    assert {s.student_id: (s.path, s.flags) for s in subs} == {"pipe": (None, ("missing-notebook",)),
                                                               "folder": (None, ("missing-notebook",))}


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


@pytest.mark.filterwarnings("ignore:Duplicate name")
def test_a_zip_member_is_never_written_through_a_link_or_over_another(tmp_path):
    """Each link is inside its student's folder as written, but the second is made inside the
    first, which really is seven folders higher: followed, it leads out of the class. Nothing is
    written through it, nor over a member already unpacked; a corrupt member is skipped too."""
    archive, deep = tmp_path / "class.zip", "/".join(f"d{i}" for i in range(8))
    escape = "../" * 9 + str(tmp_path).lstrip("/")  # from where the link really is: tmp_path
    _zip_with(archive, [
        (f"good/{A}/{A}.ipynb", "{}", False),
        (f"chain/{A}/{A}.ipynb", "{}", False),
        (f"chain/{deep}/up", "../" * 7, True),
        (f"chain/{deep}/up/out", escape, True),
        (f"chain/{deep}/up/out/escaped.txt", "x", False),
        (f"chain/{deep}/up/dangling", "../" * 9 + "nowhere", True),
        (f"chain/{deep}/up/dangling/escaped.txt", "x", False),
        (f"twice/{A}/{A}.ipynb", "{}", False),
        (f"twice/{A}/{A}.ipynb", "overwritten", False),
        (f"twice/{A}/link", f"{A}.ipynb", True),
        (f"twice/{A}/link", "written through", False),
        (f"corrupt/{A}/{A}.ipynb", "{}", False),
    ])
    data = bytearray(archive.read_bytes())
    at = data.rindex(b"{}")
    data[at:at + 2] = b"[]"  # the last member's bytes: its CRC no longer holds
    archive.write_bytes(bytes(data))
    folder, flags = extract_zip(archive, tmp_path / "out", [A], LIMIT)
    assert not list(tmp_path.glob("escaped.txt")) and not (tmp_path.parent / "escaped.txt").exists()
    assert flags == {"chain": ["unsafe-zip-member"] * 4, "twice": ["unsafe-zip-member"] * 2,
                     "corrupt": ["unsafe-zip-member"]}
    subs = _by_student(find_submissions(folder, [A], LIMIT, flags))
    assert subs[("good", A)].flags == () and subs[("chain", A)].path is not None
    assert (folder / "twice" / A / f"{A}.ipynb").read_text() == "{}"
    assert subs[("corrupt", A)].path is None and "unsafe-zip-member" in subs[("corrupt", A)].flags


def test_a_corrupt_overlong_or_nul_link_member_costs_only_its_student(tmp_path):
    """A link's target is read as it is unpacked: a corrupt one, one longer than any path, or one with a NUL
    byte (no path has one) is a bad member of that student's, not an error that stops the class's zip."""
    archive = tmp_path / "class.zip"
    _zip_with(archive, [(f"good/{A}/{A}.ipynb", "{}", False), (f"long/{A}/{A}.ipynb", "a/" * 5000, True),
                        (f"nul/{A}/{A}.ipynb", "a\0b", True),
                        (f"corrupt/{B}/{B}.ipynb", "{}", False), (f"corrupt/{A}/{A}.ipynb", "mine.ipynb", True)])
    data = bytearray(archive.read_bytes())
    at = data.rindex(b"mine.ipynb")
    data[at:at + 4] = b"your"  # the last member's bytes: its CRC no longer holds
    archive.write_bytes(bytes(data))
    folder, flags = extract_zip(archive, tmp_path / "out", [A, B], LIMIT)
    assert flags == {"long": ["unsafe-zip-member"], "nul": ["unsafe-zip-member"], "corrupt": ["unsafe-zip-member"]}
    subs = _by_student(find_submissions(folder, [A, B], LIMIT, flags))
    assert subs[("good", A)].path is not None and subs[("good", A)].flags == ()
    assert subs[("corrupt", B)].path is not None and subs[("corrupt", B)].flags == ("unsafe-zip-member",)


def test_a_zip_whose_names_are_not_text_is_a_clear_error(tmp_path):
    archive = tmp_path / "class.zip"
    _zip_with(archive, [(f"s1/{A}/{A}.ipynb", "{}", False)])
    data = bytearray(archive.read_bytes().replace(b"s1/", b"\xff1/"))
    for signature, offset in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):  # the "names are UTF-8" flag
        at = data.index(signature) + offset
        data[at + 1] |= 0x08
    archive.write_bytes(bytes(data))
    with pytest.raises(CollectionError, match="not a readable zip"):
        extract_zip(archive, tmp_path / "out", [A], LIMIT)


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
    rows = [{"student_id": name, "assignment": A, "notebook": A, "score": 1.0, "max_score": 2.0, "late_penalty": 0.0,
             "flags": ["=cmd|' /C calc'!A0"], "cell_scores": {"x": 1.0}}
            for name in ("=HYPERLINK(\"http://x\")", "+1", "-1", "@SUM(A1)", "plain")]
    write_csv(tmp_path / "grades.csv", rows)
    with (tmp_path / "grades.csv").open() as f:
        written = list(csv.DictReader(f))
    assert [r["student_id"] for r in written] == ["'=HYPERLINK(\"http://x\")", "'+1", "'-1", "'@SUM(A1)", "plain"]
    assert all(r["flags"].startswith("'=") for r in written) and written[0]["score"] == "1.0"


def test_a_spreadsheet_that_splits_on_semicolons_runs_no_cell_either(tmp_path):
    """Where ';' is the list separator (German or French Excel), a comma-separated file is split at each ';'
    whatever the quotes: a student id or flag with ';=' would start a cell with a formula there."""
    rows = [{"student_id": "mallory;=1+1", "assignment": A, "notebook": A, "score": 1.0, "max_score": 2.0,
             "late_penalty": 0.0, "flags": ["x;@SUM(A1)", "y"], "cell_scores": {"a": 1.0, "b": 0.5}}]
    write_csv(tmp_path / "grades.csv", rows)
    with (tmp_path / "grades.csv").open() as f:
        cells = [cell for line in csv.reader(f, delimiter=";") for cell in line]
    assert not [c for c in cells if c.startswith(("=", "+", "-", "@"))]
    with (tmp_path / "grades.csv").open() as f:
        written = next(csv.DictReader(f))
    assert written["student_id"] == "mallory;'=1+1" and written["flags"] == "x;'@SUM(A1);y"


def test_a_student_folder_whose_name_is_not_text_still_gets_its_row(tmp_path):
    """A folder name with a byte that is not UTF-8 (Python sees it as a lone surrogate) is written
    escaped, instead of stopping grades.csv, and everyone's row with it."""
    _notebook(tmp_path / "class", "plain")
    os.makedirs(os.fsencode(tmp_path / "class") + b"/b\xffd/" + A.encode())
    subs = find_submissions(tmp_path / "class", [A], LIMIT)
    rows = [{"student_id": s.student_id, "assignment": A, "notebook": A, "score": 0.0, "max_score": 2.0,
             "late_penalty": 0.0, "flags": [f"similar-to:{s.student_id}"], "cell_scores": {}} for s in subs]
    write_csv(tmp_path / "grades.csv", rows)
    with (tmp_path / "grades.csv").open(encoding="utf-8") as f:
        written = list(csv.DictReader(f))
    assert [r["student_id"] for r in written] == ["b\\udcffd", "plain"] and written[0]["flags"] == "similar-to:b\\udcffd"


def test_a_zip_made_on_macos_or_with_a_skipped_member_beside_its_folder_is_found(tmp_path):
    archive = tmp_path / "class.zip"
    _zip_with(archive, [(f"submitted/s1/{A}/{A}.ipynb", "{}", False), (f"__MACOSX/submitted/s1/{A}/._{A}.ipynb", "", False),
                        ("/etc/absolute", "x", False), ("../outside", "x", False)])
    folder, _ = extract_zip(archive, tmp_path / "out", [A], LIMIT)
    assert [s.student_id for s in find_submissions(folder, [A], LIMIT)] == ["s1"]


def test_a_student_folder_without_an_assignment_folder_is_named(tmp_path):
    _notebook(tmp_path, "s1")
    _notebook(tmp_path, "s2", assignment="ch01_attention (1)")
    (tmp_path / "__MACOSX").mkdir()
    assert [s.student_id for s in find_submissions(tmp_path, [A], LIMIT)] == ["s1"]
    assert without_assignments(tmp_path, [A]) == ["s2"]


def test_a_zip_unpacks_only_what_grading_reads(tmp_path):
    archive = tmp_path / "class.zip"
    _zip_with(archive, [(f"s1/{A}/{A}.ipynb", "{}", False), (f"s1/{A}/timestamp.txt", "2026-11-26 10:00:00", False),
                        (f"s1/{A}/data/weights.bin", "x" * 500, False), ("s1/notes.txt", "x", False),
                        (f"s2/{A}/{A}.ipynb", "{}", False), (f"s2/{A}/timestamp.txt", " " * (LIMIT - 1), False)])
    folder, flags = extract_zip(archive, tmp_path / "out", [A], LIMIT)
    unpacked = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    assert unpacked == [f"s1/{A}/{A}.ipynb", f"s1/{A}/timestamp.txt", f"s2/{A}/{A}.ipynb", f"s2/{A}/timestamp.txt"]
    assert flags == {}
    # a timestamp.txt is read only when small: no more of it is unpacked than shows it is not
    assert (folder / "s2" / A / "timestamp.txt").stat().st_size == SMALL_TEXT_BYTES + 1
    assert _by_student(find_submissions(folder, [A], LIMIT))[("s2", A)].flags == ("bad-timestamp",)


def _whitespace_notebook(megabytes):
    return "{" + " " * int(megabytes * 10**6) + '"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}'


def test_one_students_hoard_in_a_class_zip_costs_that_student_not_the_class(tmp_path):
    """Six 19 MB notebooks of whitespace (each under the 20 MB limit, a few kB zipped) in one student's folder:
    that student's rows are flagged and nothing of theirs is kept, everyone else's is unpacked."""
    archive = tmp_path / "class.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(f"alice/{A}/{A}.ipynb", "{}")
        for i in range(6):
            zf.writestr(f"hoarder/{A if i < 3 else B}/{'copy' * i}{A if i < 3 else B}.ipynb", _whitespace_notebook(19))
        zf.writestr(f"zed/{B}/{B}.ipynb", "{}")
    folder, flags = extract_zip(archive, tmp_path / "out", [A, B], 20 * 2**20)
    assert flags == {"hoarder": ["submission-too-large"]}
    kept = sorted(str(p.relative_to(folder)) for p in (folder / "hoarder").rglob("*"))
    assert kept == [f"hoarder/{A}", f"hoarder/{B}"]
    subs = _by_student(find_submissions(folder, [A, B], 20 * 2**20, flags))
    assert subs[("hoarder", A)].path is None and subs[("hoarder", A)].flags == ("submission-too-large",)
    assert subs[("hoarder", B)].path is None and subs[("hoarder", B)].flags == ("submission-too-large",)
    assert subs[("alice", A)].path is not None and subs[("zed", B)].path is not None


def test_a_bomb_of_small_members_or_folders_stops_at_its_students_budget(tmp_path, monkeypatch):
    archive = tmp_path / "bomb.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(f"alice/{A}/{A}.ipynb", "{}")
        for i in range(3000):
            zf.writestr(f"bomb/{A}/{i}.ipynb", "x" * LIMIT)
        for i in range(3000):
            zf.writestr(f"dirs/{A}/{i}/", "")
    unpacked = []
    copy = collection._copy_at_most

    def counted(zf, member, target, max_bytes, cut=False):
        written = copy(zf, member, target, max_bytes, cut)
        unpacked.append((member.filename.split("/")[0], written or 0))
        return written

    monkeypatch.setattr(collection, "_copy_at_most", counted)
    folder, flags = extract_zip(archive, tmp_path / "bomb", [A], LIMIT, max_student_bytes=100 * LIMIT)
    assert flags == {"bomb": ["submission-too-large"], "dirs": ["submission-too-large"]}
    assert sum(n for student, n in unpacked if student == "bomb") <= 100 * LIMIT  # never more on disk than that
    assert not list((folder / "dirs" / A).iterdir()) and (folder / "alice" / A / f"{A}.ipynb").exists()


def test_a_students_notebooks_over_budget_in_a_folder_cost_only_that_student(tmp_path):
    _notebook(tmp_path, "alice")
    for assignment in (A, B):
        _notebook(tmp_path, "hoarder", assignment, "x" * (LIMIT - 1))
    (tmp_path / "hoarder" / A / "spare.ipynb").write_text("x" * (LIMIT - 1))
    subs = _by_student(find_submissions(tmp_path, [A, B], LIMIT, max_student_bytes=2 * LIMIT))
    assert {subs[("hoarder", a)].flags for a in (A, B)} == {("submission-too-large",)}
    assert subs[("hoarder", A)].path is None and subs[("alice", A)].path is not None and subs[("alice", A)].flags == ()


def test_only_macos_own_folder_is_skipped_not_a_student_whose_name_starts_like_it(tmp_path):
    _notebook(tmp_path, "__MACOSX_carol")
    (tmp_path / "__MACOSX").mkdir()
    assert [s.student_id for s in find_submissions(tmp_path, [A], LIMIT)] == ["__MACOSX_carol"]
