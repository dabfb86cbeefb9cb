"""What each part of the course needs is declared where pip reads it (pyproject.toml): tfm_ref needs
PyTorch alone; the widgets, the lab's training tools and the grader each an extra of their own."""
import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from course_packages import course_packages

ROOT = Path(__file__).resolve().parents[1]
COURSE = course_packages()
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
# import names that differ from the package's
DISTRIBUTION = {"IPython": "ipython", "yaml": "pyyaml", "markdown_it": "markdown-it-py", "PIL": "pillow"}
CLUSTER = ("cluster.py", "bench.py")  # Dask, for grading (and measuring it) on more machines than one
PARTS = {  # part → (its files, the extras it may use besides the core)
    "tfm_ref": (list((ROOT / "tfm_ref").rglob("*.py")), ()),
    "tfm_widgets": (list((ROOT / "tfm_widgets").rglob("*.py")), ("widgets",)),
    "tfm_lab": (list((ROOT / "tfm_lab").rglob("*.py")), ("train",)),
    "editions": (list((ROOT / "editions").rglob("*.py")), ("grade",)),  # the notebooks' translations, for the grader
    "autograde": ([p for p in (ROOT / "autograde").rglob("*.py") if p.name not in CLUSTER], ("grade",)),
    "autograde on a cluster": ([ROOT / "autograde" / name for name in CLUSTER], ("grade", "cluster")),
    "notebook_sandbox": (list((ROOT / "notebook_sandbox").rglob("*.py")), ("grade",)),  # babel: the checks' words
    "intake": (list((ROOT / "intake").rglob("*.py")), ("grade",)),
    "class_report": (list((ROOT / "class_report").rglob("*.py")), ("grade",)),
}


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[\[<>=!~ ;]", r, maxsplit=1)[0].lower().replace("_", "-") for r in requirements}


def _third_party(files: list[Path]) -> dict[str, str]:
    """Imported top-level module → a file importing it, outside the standard library and the course."""
    found = {}
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else []
            for module in modules:
                top = module.split(".")[0]
                if top not in sys.stdlib_module_names and top not in COURSE:
                    found.setdefault(top, str(path.relative_to(ROOT)))
    return found


@pytest.mark.parametrize("part", sorted(PARTS))
def test_every_import_of_a_part_is_declared_for_it(part):
    files, extras = PARTS[part]
    declared = _names(PROJECT["dependencies"] + [r for e in extras for r in PROJECT["optional-dependencies"][e]])
    missing = {module: path for module, path in _third_party(files).items()
               if DISTRIBUTION.get(module, module).lower().replace("_", "-") not in declared}
    assert not missing, f"{part} imports packages its extras do not declare: {missing}"


def test_the_sandbox_hides_an_installed_copy_of_every_package_pyproject_installs():
    """The sandbox's list of the course's packages is a literal (an installed grader has no pyproject.toml): it
    must name every package an install puts in site-packages, or an installed copy of it stays visible."""
    from notebook_sandbox.container import COURSE_PACKAGES

    assert sorted(COURSE_PACKAGES) == sorted(course_packages())


@pytest.mark.parametrize(("module", "absent"), [
    ("autograde.audit", ("torch", "nbgrader")),
    ("autograde", ("torch", "nbformat")),
])
def test_importing_a_part_loads_nothing_it_does_not_need(module, absent):
    code = f"import sys, {module}; print(sorted(m for m in {absent!r} if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]", f"importing {module} loaded {result.stdout.strip()}"
