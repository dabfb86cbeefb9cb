"""What the grader runs of a student's notebook (autograde/notebook.py `merge`): a solution cell duplicated in
Jupyter runs where the notebook ran it, after the first copy, so the later definition is the one checked.
"""
import copy

import nbformat

from autograde.classroom import solved_notebook, untouched_notebook
from autograde.notebook import merge
from autograde.release import source_notebook

A = "ch01_attention"
STUB = "def softmax(x, dim=-1):\n    raise NotImplementedError()\n"
ANSWER = "def softmax(x, dim=-1):\n    return 'the later copy'\n"


def test_a_duplicated_solution_cell_runs_after_the_first_copy_and_before_the_check(tmp_path, released_course):
    course = released_course(tmp_path / "course", [A])
    source, release = nbformat.read(source_notebook(A, course / "solutions"), 4), untouched_notebook(A, course)
    student = solved_notebook(A, {"softmax": STUB}, course)
    first = next(i for i, c in enumerate(student.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == "softmax")
    duplicate = copy.deepcopy(student.cells[first])
    duplicate.source = ANSWER
    student.cells.insert(first + 1, duplicate)

    cells = merge(source, release, student)
    sources = [c.source for c in cells]
    check = next(i for i, c in enumerate(cells) if c.kind == "test" and c.grade_id == "softmax_visible")
    assert sources.index(STUB) < sources.index(ANSWER) < check
    assert cells[sources.index(ANSWER)].grade_id is None  # the student's own cell, not a second answer
