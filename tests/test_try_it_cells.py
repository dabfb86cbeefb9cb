"""The "Try it" cells (tagged ``widget``) of every instructor notebook run without an error.

Grading and the tests that run notebooks skip the widget cells, so a Try-it cell that fails for the
instructor's own solutions fails for every student, right answers included — as chapter 4's alignment
view did once tfm_ref's decoder called its attention with ``is_causal=True``. Here each instructor
notebook runs in a kernel (one for all, emptied in between): its setup, solution and Try-it cells, in
order. The check cells are left out (tests/test_exercises.py runs the checks); chapter 10's full
training run is shrunk to 8 steps of 4 dates (as in tests/test_exercises_ch10.py) and its held-out
score to 50 dates — the cells after it still run on what it trained.
"""
from __future__ import annotations

import jupytext
import nbformat
import pytest
import torch
from instructor_notebooks import solution_namespace
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
from tiny_models import tiny_date_model

from editions.assignments import assignment_ids, source_markdown
from tfm_ref.multihead import MultiHeadAttention
from tfm_widgets import alignment

FULL_RUN = "steps, batch_size, checkpoint_every, checkpoints_averaged = 800, 128, 50, 4"
SHORT_RUN = "steps, batch_size, checkpoint_every, checkpoints_averaged = 8, 4, 2, 2"
HELD_OUT, SHORT_HELD_OUT = "held_out = task.eval_set(2000)", "held_out = task.eval_set(50)"


def _is_check(cell) -> bool:
    return cell.metadata.get("nbgrader", {}).get("grade", False)


def _notebook_without_checks(assignment: str) -> nbformat.NotebookNode:
    notebook = jupytext.read(source_markdown(assignment))
    notebook.cells = [cell for cell in notebook.cells if cell.cell_type == "code" and not _is_check(cell)]
    if assignment == "ch10_capstone":  # the full run and its scoring on 2000 dates: minutes on a CPU
        for long, short in ((FULL_RUN, SHORT_RUN), (HELD_OUT, SHORT_HELD_OUT)):
            cells = [cell for cell in notebook.cells if long in cell.source]
            assert len(cells) == 1, f"chapter 10's {long!r} was not found"
            cells[0].source = cells[0].source.replace(long, short)
    return notebook


def test_the_widget_cells_are_among_the_cells_run():
    for assignment in assignment_ids():
        cells = _notebook_without_checks(assignment).cells
        assert any("widget" in cell.metadata.get("tags", []) for cell in cells), assignment


@pytest.fixture(scope="module")
def kernel():
    """One kernel for the chapters, emptied before each (``%reset -f``): torch is imported once, not ten times."""
    manager = KernelManager(kernel_name="python3")
    manager.start_kernel()
    yield manager
    manager.shutdown_kernel(now=True)


@pytest.mark.slow
@pytest.mark.parametrize("assignment", assignment_ids())
def test_the_try_it_cells_run_with_the_instructors_solutions(assignment, kernel):
    notebook = _notebook_without_checks(assignment)
    folder = source_markdown(assignment).parent
    # one thread, as tests/conftest.py's checks_on_one_thread: torch's threads fight pytest-xdist's workers
    start = f"%reset -f\n%cd {folder}\nimport torch\ntorch.set_num_threads(1)\ndel torch"
    notebook.cells.insert(0, nbformat.v4.new_code_cell(start))
    client = NotebookClient(notebook, km=kernel, timeout=300)
    try:
        client.execute()
    except CellExecutionError as error:  # its message holds the cell and the traceback
        pytest.fail(f"{assignment}: {error}", pytrace=False)


def test_chapter_4s_alignment_view_runs_the_students_cross_attention_on_the_cross_attention_alone():
    """Every decoder cross-attention, and nothing else, goes to the student's cross_attention, with the
    source's padding mask; the view's maps are the student's weights."""
    namespace = solution_namespace("ch04_cross_attention")
    cell = next(cell.source for cell in _notebook_without_checks("ch04_cross_attention").cells
                if "alignment_view(" in cell.source and "widget" in cell.metadata.get("tags", []))
    view_arguments = {}
    namespace["alignment_view"] = lambda **kwargs: view_arguments.update(kwargs)
    exec(cell.replace("from tfm_widgets.alignment import alignment_view\n", ""), namespace)
    fn = view_arguments.pop("fn")

    model, task = tiny_date_model()
    text = "Nov 22, 2026"
    n_src = len(text)
    layer_calls = []
    for name, module in model.named_modules():
        if isinstance(module, MultiHeadAttention):
            module.register_forward_pre_hook(lambda *_, name=name: layer_calls.append(name))
    student_masks = []
    solution = namespace["cross_attention"]

    def student(x, memory, w_q, w_k, w_v, src_mask=None):
        student_masks.append(src_mask)
        out, weights = solution(x, memory, w_q, w_k, w_v, src_mask)
        return out, weights / 2  # the maps must show these weights, not tfm_ref's

    namespace["cross_attention"] = student
    source, output, maps = alignment.cross_attention_maps(model, task, text, fn, **view_arguments)
    assert len(student_masks) == sum(name.endswith("cross_attn") for name in layer_calls) > 0
    assert all(mask is not None and mask.sum(-1).eq(n_src).all() for mask in student_masks)
    _, reference_output, reference = alignment.cross_attention_maps(model, task, text)
    assert output == reference_output
    for name, weights in maps.items():
        torch.testing.assert_close(weights, reference[name] / 2)
