"""`python -m autograde release` writes each chapter's exercise notebook in Chinese too, from its catalogue
(autograde/release.py with editions/notebooks.py), and the grader and `nbgrader validate`
take a Chinese notebook as they take the English one — every chapter, in a course root of its own."""
import logging
import re
from pathlib import Path

import nbformat
import pytest
from babel.messages.pofile import read_po, write_po
from courses import LANGUAGE, new_course
from student_validation import validate

from autograde.classroom import solved_notebook, write_submission
from editions.assignments import assignment_ids, released_notebook, translated_notebook
from autograde.grade import grade
from autograde.messages import setup_line
from editions.notebooks import catalogue_path
from autograde.release import STUDENT_CONFIG, release

pytestmark = pytest.mark.slow

A = "ch01_attention"
CHINESE_TEXT = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = new_course(tmp_path_factory.mktemp("course"), assignment_ids(), chinese=True)
    return root, release(assignment_ids(), root=root)


def _chinese(assignment: str, root: Path) -> nbformat.NotebookNode:
    return nbformat.read(translated_notebook(assignment, LANGUAGE, root), 4)


def _solved_chinese(assignment: str, root: Path) -> nbformat.NotebookNode:
    """The Chinese notebook with the instructor's solutions in its solution cells."""
    answers = {c.metadata.nbgrader.grade_id: c.source for c in solved_notebook(assignment, root=root).cells
               if c.metadata.get("nbgrader", {}).get("solution")}
    notebook = _chinese(assignment, root)
    for cell in notebook.cells:
        if cell.metadata.get("nbgrader", {}).get("solution"):
            cell.source = answers[cell.metadata.nbgrader.grade_id]
    return notebook


def test_every_chapter_is_released_in_chinese_with_the_students_settings_beside_it(course):
    root, written = course
    chapters = assignment_ids()
    assert written == [released_notebook(a, root) for a in chapters] + [translated_notebook(a, LANGUAGE, root)
                                                                         for a in chapters]
    for chapter in chapters:
        settings = translated_notebook(chapter, LANGUAGE, root).parent / STUDENT_CONFIG.name
        assert settings.read_text() == STUDENT_CONFIG.read_text()


def test_a_chinese_notebook_is_the_english_one_with_its_prose_in_chinese(course):
    root, _ = course
    for chapter in assignment_ids():
        english, chinese = nbformat.read(released_notebook(chapter, root), 4), _chinese(chapter, root)
        assert [c.id for c in chinese.cells] == [c.id for c in english.cells]
        assert chinese.metadata.autograde == {"language": LANGUAGE}  # what the grader and nbgrader validate read
        for before, after in zip(english.cells, chinese.cells):
            if before.cell_type == "code" and before.metadata.get("nbgrader", {}).get("grade_id") == "setup":
                # the setup cell tells the student's kernel the checks' language (autograde.messages.mark_notebook)
                assert after.source == before.source.rstrip("\n") + "\n" + setup_line(LANGUAGE), chapter
                assert {**after.metadata.nbgrader, "checksum": None} == {**before.metadata.nbgrader, "checksum": None}
            elif before.cell_type == "code":
                assert after == before, f"{chapter}: code cell {before.id} changed"
            else:
                assert CHINESE_TEXT.search(after.source), f"{chapter}: markdown cell {before.id} is not translated"
                assert {**after.metadata.nbgrader, "checksum": None} == {**before.metadata.nbgrader, "checksum": None}


def test_solved_chinese_notebooks_score_full_marks_and_untouched_ones_zero(course, tmp_path):
    root, _ = course
    chapters, subs = assignment_ids(), tmp_path / "submitted"
    for chapter in chapters:
        write_submission(subs, "solved", chapter, _solved_chinese(chapter, root))
        write_submission(subs, "untouched", chapter, _chinese(chapter, root))
    rows = grade(subs, tmp_path / "graded", jobs=2, root=root, progress=False)
    scores = {(r["student_id"], r["assignment"]): (float(r["score"]), float(r["max_score"])) for r in rows}
    for chapter in chapters:
        score, maximum = scores[("solved", chapter)]
        assert maximum > 0 and score == maximum, f"{chapter}: the solved Chinese notebook scores {score}/{maximum}"
        assert scores[("untouched", chapter)] == (0.0, maximum), f"{chapter}: the untouched Chinese notebook scores points"


def test_nbgrader_validate_accepts_a_solved_chinese_notebook_and_only_with_its_own_checksums(course):
    root, _ = course
    folder, solved = translated_notebook(A, LANGUAGE, root).parent, _solved_chinese(A, root)
    nbformat.write(solved, folder / "solved.ipynb")
    out = validate(folder, "solved.ipynb")
    # in the notebook's language (autograde.validation), as its checks speak it
    assert "成功！可见检查全部通过。" in out and "WARNING" not in out and "ERROR" not in out, out[-2000:]

    english = nbformat.read(released_notebook(A, root), 4)
    for cell, original in zip(solved.cells, english.cells):  # the checksums of the English text
        if "checksum" in cell.metadata.get("nbgrader", {}):
            cell.metadata.nbgrader.checksum = original.metadata.nbgrader.checksum
    nbformat.write(solved, folder / "stale.ipynb")
    assert "CELL(S) HAVE CHANGED" in validate(folder, "stale.ipynb")


def _forget(catalogue: Path, message: str) -> None:
    with catalogue.open("rb") as file:
        entries = read_po(file)
    entries[message].string = ""
    with catalogue.open("wb") as file:
        write_po(file, entries)


def test_a_notebook_whose_catalogue_is_incomplete_is_not_released_in_chinese_and_its_old_one_goes(tmp_path, caplog):
    root = new_course(tmp_path, [A], chinese=True)
    first = release([A], root=root)[1].read_bytes()
    assert release([A], root=root)[1].read_bytes() == first  # idempotent
    _forget(catalogue_path(root, LANGUAGE, A), "Hint 1")
    with caplog.at_level(logging.WARNING, logger="autograde.release"):
        assert release([A], root=root) == [released_notebook(A, root)]
    assert not translated_notebook(A, LANGUAGE, root).parent.exists()
    assert f"{A} is not released in {LANGUAGE}: 1 messages have no translation, e.g. 'Hint 1'" in caplog.text
