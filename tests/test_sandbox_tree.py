"""What the sandbox holds while grading (autograde.sandbox_tree): no answer to the assignment, none of the grader's
checks, and every helper the notebooks use."""
import ast
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import jupytext
import pytest

import tfm_ref
from autograde import check, sandbox_tree
from autograde.checking import CheckFailed
from editions.assignments import source_markdown
from autograde.exercises import chapter_ids, load_all

CHAPTERS = {chapter.__name__.rsplit(".", 1)[-1]: chapter for chapter in load_all()}


@pytest.fixture(scope="module")
def staged(tmp_path_factory):
    return sandbox_tree.stage(tmp_path_factory.mktemp("staged") / "grading", chapter_ids())


def _run_in_tree(staged, assignment: str, code: str) -> subprocess.CompletedProcess:
    """``code`` in a fresh Python that sees the staged runtime and ``assignment``'s tree before anything else."""
    paths = [str(staged / "trees" / assignment), str(staged / "runtime")]
    prelude = f"import sys\nsys.path[:0] = {paths!r}\n"
    return subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("assignment", chapter_ids())
def test_every_reference_tfm_ref_defines_is_withheld_and_raises_when_called(staged, assignment):
    held = sandbox_tree.withheld(assignment)
    references = [(exercise, where) for exercise in CHAPTERS[assignment].EXERCISES
                  if (where := sandbox_tree.origin(exercise.reference)) is not None]
    assert all(where in held for _, where in references)
    calls = "\n".join(f"""
try:
    getattr(importlib.import_module({module!r}), {name!r})()
    print('ran', {name!r})
except Exception as error:
    print(type(error).__name__, str(error).split(" is ")[0], 'not available while {assignment}' in str(error))""" for _, (
        module, name) in references)
    result = _run_in_tree(staged, assignment, "import importlib\nimport tfm_ref\n" + calls)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [f"Withheld {module}.{name} True" for _, (module, name) in references]


@pytest.mark.parametrize("assignment", chapter_ids())
def test_the_withheld_code_is_not_in_the_staged_files(staged, assignment):
    """Each withheld definition is a stub in the staged module, and its code is nowhere in that module."""
    for module, name in sandbox_tree.withheld(assignment):
        original = ast.dump(sandbox_tree._definitions()[module][1][name])  # the real module's definition
        path = staged / "trees" / assignment / module.replace(".", "/")
        tree = ast.parse((path / "__init__.py" if path.is_dir() else path.with_suffix(".py")).read_text())
        assert all(ast.dump(node) != original for node in ast.walk(tree)), (module, name)
        stub = next(node for node in tree.body if name in sandbox_tree._defined_names(node))
        assert "_withheld" in ast.unparse(stub) and len(ast.unparse(stub).splitlines()) <= 2, (module, name)


def _helpers_imported(assignment: str) -> set[tuple[str, str]]:
    """The tfm_ref names the notebook's own cells (not widgets, not tests) import."""
    notebook = jupytext.read(source_markdown(assignment))
    found = set()
    for cell in notebook.cells:
        if cell.cell_type != "code" or "widget" in cell.metadata.get("tags", []):
            continue
        for node in ast.walk(ast.parse(cell.source)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(("tfm_ref", "tfm_lab")):
                for alias in node.names:
                    value = getattr(__import__(node.module, fromlist=[alias.name]), alias.name)
                    if (where := sandbox_tree.origin(value)) is not None:
                        found.add(where)
    return found


@pytest.mark.parametrize("assignment", chapter_ids())
def test_the_helpers_a_notebook_imports_stay(assignment):
    assert not _helpers_imported(assignment) & sandbox_tree.withheld(assignment)


def test_the_capstone_keeps_the_pieces_its_setup_cell_imports():
    helpers = {name for _, name in _helpers_imported("ch10_capstone")}
    assert {"EncoderBlock", "DecoderBlock", "MultiHeadAttention", "label_smoothed_cross_entropy", "noam_lr"} <= helpers


@pytest.mark.parametrize("assignment", chapter_ids())
def test_every_module_of_a_tree_imports(staged, assignment):
    modules = sorted(sandbox_tree._definitions())
    result = _run_in_tree(staged, assignment, f"import importlib\nfor m in {modules!r}:\n    importlib.import_module(m)\n"
                                              "import tfm_ref\nprint(tfm_ref.__file__)")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().startswith(str(staged / "trees" / assignment))


def test_the_runtime_holds_no_check_catalogue_or_reference(staged):
    runtime = staged / "runtime"
    package = Path(sandbox_tree.RUNTIME.__file__).parent
    assert sorted(p.relative_to(runtime) for p in runtime.rglob("*.py")) == sorted(
        [Path("autograde/__init__.py"), *(p.relative_to(package.parent) for p in package.glob("*.py"))])
    result = _run_in_tree(staged, "ch01_attention", """
import sys
import notebook_sandbox.runner, notebook_sandbox.zygote
print(sorted(m for m in sys.modules if m.startswith(("autograde", "tfm_ref"))))
from autograde import check
check("ch01_attention.softmax", None)
""")
    assert result.returncode == 0, result.stderr
    loaded = eval(result.stdout.splitlines()[0])
    assert "tfm_ref" not in loaded and not any(m in loaded for m in (
        "autograde.checking", "autograde.spec", "autograde.diagnosis", "autograde.comparison", "autograde.exercises",
        "autograde.adapters"))
    assert "checked by the grader" in result.stdout


def test_the_models_code_is_sent_where_a_check_ships_a_model_and_names_what_it_answers():
    assert [m for m, _ in sandbox_tree.model_sources("ch08_encoder_decoder")] == ["tfm_ref.blocks", "tfm_ref.transformer"]
    assert sandbox_tree.answered_by_models("ch08_encoder_decoder") == {"encoder_block", "decoder_block"}
    assert sandbox_tree.answered_by_models("ch10_capstone") == {"transformer"}


@pytest.mark.parametrize("candidate", [tfm_ref.softmax, lambda x, dim=-1: tfm_ref.softmax(x, dim)],
                         ids=["itself", "called"])
def test_the_students_kernel_says_at_once_that_grading_lacks_the_reference(candidate):
    with pytest.raises(CheckFailed, match=re.escape("tfm_ref's `softmax`")):
        check("ch01_attention.softmax", candidate)
