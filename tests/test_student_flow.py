"""What a student runs: the released notebooks come with their nbgrader settings, and `nbgrader
validate` in a notebook's folder shows each failed check whole, without the grader's frames or
kernel noise, and says that it ran the visible checks only."""
import shutil

import pytest
from student_validation import validate

from autograde.classroom import solved_notebook, write_submission
from editions.assignments import released_notebook

pytestmark = pytest.mark.slow

A = "ch01_attention"
WRONG_AXIS = "def softmax(x, dim=-1):\n    e = torch.exp(x - x.amax(dim=0, keepdim=True))\n    return e / e.sum(dim=0, keepdim=True)\n"


@pytest.fixture(scope="module")
def released(tmp_path_factory, released_course):
    root = released_course(tmp_path_factory.mktemp("course") / "course", [A])
    return root, released_notebook(A, root)


def test_each_released_notebook_has_the_students_settings_beside_it(released):
    _, notebook = released
    assert (notebook.parent / "nbgrader_config.py").read_text().count("CourseValidator.install()") == 1
    # validate runs each cell under a time limit: nbgrader's own, 30 s, interrupted the capstone's checks on a busy laptop
    from nbgrader.preprocessors import Execute
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", str(notebook.parent)).load_config()
    assert config.Execute.timeout > Execute().timeout


def test_validate_says_it_ran_the_visible_checks_only(released):
    root, notebook = released
    solved = write_submission(root / "work", "me", A, solved_notebook(A, root=root)).name
    shutil.copy(root / "work" / "me" / A / solved, notebook.parent / "solved.ipynb")
    out = validate(notebook.parent, "solved.ipynb")
    assert "Success! The visible checks pass. The hidden checks" in out
    assert "WARNING" not in out and "ERROR" not in out


def test_validate_does_not_run_the_cells_grading_leaves_out(released):
    """A "Try it" cell or a chapter's full training run (tagged widget) would meet nbgrader's 30-second limit."""
    root, notebook = released
    solved = solved_notebook(A, root=root)
    widget = next(cell for cell in solved.cells if "widget" in cell.metadata.get("tags", []))
    widget.source = "open('widget_ran.txt', 'w').close()\n" + widget.source
    write_submission(root / "work", "tries", A, solved)
    shutil.copy(root / "work" / "tries" / A / f"{A}.ipynb", notebook.parent / "tries.ipynb")
    out = validate(notebook.parent, "tries.ipynb")
    assert "Success! The visible checks pass." in out and not (notebook.parent / "widget_ran.txt").exists()


def test_a_failed_check_is_shown_whole_without_the_graders_frames(released):
    root, notebook = released
    write_submission(root / "work", "you", A, solved_notebook(A, {"softmax": WRONG_AXIS}, root=root))
    shutil.copy(root / "work" / "you" / A / f"{A}.ipynb", notebook.parent / "wrong.ipynb")
    out = validate(notebook.parent, "wrong.ipynb")
    assert "VISIBLE CHECKS FAILED IN" in out
    hint = next(line for line in out.splitlines() if "Likely mistake — softmax over the wrong axis" in line)
    assert len(hint.strip()) > 90 and not hint.endswith("...")  # nbgrader would cut it at 90 characters
    assert "Traceback" not in out and "autograde/" not in out and "site-packages" not in out
    assert "WARNING" not in out and "No nbgrader_config.py" not in out
