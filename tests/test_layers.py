"""The packages' layers, read from their imports: each imports only what stands below it, with no cycle.

    book build (_ext/, locales/)  →  widgets (tfm_widgets)  →  lab (tfm_lab)  →  model (tfm_ref)
    class report (class_report)  →  grader (autograde)  →  sandbox (notebook_sandbox)  →  model
    grader  →  intake (collecting a class's submissions), lab, model
    book build, grader  →  editions (where the exercises are, and their prose translated)

The grader reaches the lab for the tasks the capstone trains on (its notebooks import them, so its sandbox holds
them). The sandbox holds `notebook_sandbox` alone of the grading code, so it imports none of the grader's (its checks,
catalogues, answers). Nothing but the class report imports the grader: the book's build runs its command line
(`python -m autograde release`). No chapter catalogue imports another's private names.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BOOK_EXTENSIONS = {p.stem for p in (ROOT / "_ext").glob("*.py")}  # Sphinx loads them by bare name
LAYER_BELOW = {
    "model": set(),
    "lab": {"model"},
    "widgets": {"lab", "model"},
    "editions": set(),
    "sandbox": {"model"},
    "intake": set(),
    "grader": {"sandbox", "intake", "lab", "model", "editions"},
    "report": {"grader", "sandbox", "intake", "editions"},
    "book": {"widgets", "lab", "model", "editions"},
}


def _layer(module: str) -> str | None:
    top = module.partition(".")[0]
    return {"tfm_ref": "model", "tfm_lab": "lab", "tfm_widgets": "widgets", "autograde": "grader",
            "notebook_sandbox": "sandbox", "intake": "intake", "class_report": "report", "editions": "editions",
            "_ext": "book", "locales": "book"}.get(
        top, "book" if top in BOOK_EXTENSIONS else None)


def _modules() -> dict[str, Path]:
    found = {}
    for package in ("tfm_ref", "tfm_lab", "tfm_widgets", "autograde", "notebook_sandbox", "intake", "class_report",
                    "editions", "_ext", "locales"):
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _imports(module: str, path: Path, top_level: bool = False) -> set[tuple[str, tuple[str, ...]]]:
    """(module imported, names taken from it) for every import in ``path`` (``top_level``: those that run when it
    is imported, not inside a function), relative ones resolved."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    tree = ast.parse(path.read_text(), str(path))
    for guarded in [n for n in ast.walk(tree) if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING"]:
        guarded.body = []  # imports for annotations alone: nothing runs them
    for node in ast.walk(tree) if not top_level else _outside_functions(tree):
        if isinstance(node, ast.Import):
            found |= {(alias.name, ()) for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            found.add((base, tuple(alias.name for alias in node.names)))
    return found


def _outside_functions(node: ast.AST):
    for child in ast.iter_child_nodes(node):
        if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            yield child
            yield from _outside_functions(child)


MODULES = _modules()
IMPORTS = {module: _imports(module, path) for module, path in MODULES.items()}


def test_each_layer_imports_only_what_stands_below_it():
    upward = []
    for module, imports in IMPORTS.items():
        for imported, _ in imports:
            mine, theirs = _layer(module), _layer(imported)
            if theirs is None or theirs == mine or theirs in LAYER_BELOW[mine]:
                continue
            upward.append(f"{module} ({mine}) imports {imported} ({theirs})")
    assert not upward


def test_the_model_needs_pytorch_alone():
    outside = {imported.partition(".")[0] for module, imports in IMPORTS.items() if _layer(module) == "model"
               for imported, _ in imports} - {"tfm_ref", "torch", "__future__"}
    assert all(name in _stdlib() for name in outside), outside - _stdlib()


def test_the_sandbox_needs_pytorch_and_the_model_alone():
    """What the sandbox holds of the grading code: nothing of the grader, its checks or catalogues."""
    outside = {imported.partition(".")[0] for module, imports in IMPORTS.items() if _layer(module) == "sandbox"
               for imported, _ in imports} - {"notebook_sandbox", "tfm_ref", "torch", "babel", "__future__"}
    assert all(name in _stdlib() for name in outside), outside - _stdlib()


def _stdlib() -> set[str]:
    import sys

    return set(sys.stdlib_module_names)


def test_no_module_imports_itself_back():
    """No import cycle among the modules as they are imported (a cycle hides which piece stands on which)."""
    graph = {}
    for module, path in MODULES.items():
        imports = _imports(module, path, top_level=True)
        graph[module] = ({imported for imported, _ in imports if imported in MODULES}
                         | {f"{imported}.{name}" for imported, names in imports for name in names
                            if f"{imported}.{name}" in MODULES})
    state: dict[str, int] = {}

    def visit(module: str, path: list[str]) -> list[str] | None:
        state[module] = 1
        for target in sorted(graph[module]):
            if target == module or _package_of(module) == target:  # a package's own __init__ re-exporting it
                continue
            if state.get(target) == 1:
                return [*path, module, target]
            if target not in state and (cycle := visit(target, [*path, module])):
                return cycle
        state[module] = 2
        return None

    cycles = [cycle for module in sorted(graph) if module not in state and (cycle := visit(module, []))]
    assert not cycles, cycles


def _package_of(module: str) -> str:
    return module.rpartition(".")[0]


@pytest.mark.parametrize("catalogue", sorted(m for m in MODULES if m.startswith("autograde.exercises.ch")))
def test_no_catalogue_imports_another_catalogues_private_names(catalogue):
    private = [(imported, name) for imported, names in IMPORTS[catalogue] for name in names
               if imported.startswith("autograde.exercises.") and imported != catalogue and name.startswith("_")]
    assert not private


def test_importing_tfm_ref_loads_pytorch_and_nothing_else():
    import subprocess
    import sys

    code = ("import sys, torch\nbefore = set(sys.modules)\nimport tfm_ref\n"
            "print(sorted(m for m in set(sys.modules) - before if not m.startswith('tfm_ref')))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
