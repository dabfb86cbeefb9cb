"""Test cells are read, never run, when grading: only check calls are accepted, and every source
notebook's test cells are."""
import pytest

from autograde.testcells import CheckCall, GradedCellError, parse_test_cell


def test_visible_and_hidden_cells_give_their_checks():
    visible = 'from autograde import check\n\ncheck("ch01_attention.softmax", softmax)\n'
    hidden = ('# Hidden checks\n### BEGIN HIDDEN TESTS\nfrom autograde import check\n\n'
              'check("ch01_attention.softmax", softmax, hidden=True)\n### END HIDDEN TESTS\n')
    assert parse_test_cell(visible) == [CheckCall("ch01_attention.softmax", "softmax", False)]
    assert parse_test_cell(hidden) == [CheckCall("ch01_attention.softmax", "softmax", True)]


@pytest.mark.parametrize("source", [
    "",
    "from autograde import check",
    'check("ch01_attention.softmax", softmax)\nassert softmax(1) == 1',
    'check("ch01_attention.softmax", lambda x: x)',
    'check(key, softmax)',
    'check("ch01_attention.softmax", softmax, hidden=flag)',
    'check("ch01_attention.softmax", softmax, seed=3)',
    'from autograde import check as c\nc("ch01_attention.softmax", softmax)',
    'import os\ncheck("ch01_attention.softmax", softmax)',
])
def test_anything_else_is_refused(source):
    with pytest.raises(GradedCellError):
        parse_test_cell(source)
