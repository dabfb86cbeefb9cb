"""What the sandbox holds while it grades an assignment: nothing that answers it, and none of the grader.

`stage` writes, once per grading process (`staged`), the folder shown read-only at ``/grading``: ``runtime/``
(the runner's own package, `RUNTIME`), ``trees/<assignment>/`` (tfm_ref and tfm_lab with what answers the assignment
replaced by stubs raising `Withheld`, written from the syntax tree), and ``tfm/`` (where `notebook_sandbox.zygote`
mounts a runner's tree). What is withheld, and the models chapters 8 and 10 send (`model_sources`,
`answered_by_models`), are described in autograde/README.md ("Nothing in the runner worth taking").
"""
from __future__ import annotations

import ast
import atexit
import functools
import inspect
import os
import shutil
import tempfile
import types
from collections.abc import Iterable
from pathlib import Path

import notebook_sandbox
import tfm_lab
import tfm_ref
from notebook_sandbox import words
from notebook_sandbox.check_models import MODEL_SOURCES
from notebook_sandbox.container import leftover_prefix

from .code_names import named_objects
from .exercises import chapter_ids, exercises_of

__all__ = ["stage", "staged", "withheld", "origin", "model_sources", "answered_by_models", "RUNTIME"]

RUNTIME = notebook_sandbox
"""The package the sandbox holds to run notebooks, which imports nothing of the grader; beside it, the checks' words
(`notebook_sandbox.words`'s catalogues), so what the runner says (a module that cannot be built, an output that
cannot be checked) is in the notebook's language, and an `autograde` that only says the grader checks."""
_PACKAGES = {package.__name__: Path(package.__file__).parent for package in (tfm_ref, tfm_lab)}
"""The course's packages a notebook may import, each staged with what answers the assignment withheld."""
Name = tuple[str, str]  # (module of a course package, top-level name)


# --------------------------------------------------------------------------- what is withheld

@functools.cache
def _definitions() -> dict[str, tuple[ast.Module, dict[str, ast.stmt], dict[str, set[Name]]]]:
    """Per tfm_ref module: its syntax tree, top-level definitions, and the tfm_ref names each uses (a re-exported
    name resolved to its definition)."""
    parsed, aliases = {}, {}
    for path in sorted(p for package in _PACKAGES.values() for p in package.rglob("*.py")):
        parts = path.relative_to(_package_of(path).parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        tree = ast.parse(path.read_text(), str(path))
        bound = _imports(tree, module if parts[-1] == "__init__" else module.rpartition(".")[0])
        aliases.update({(module, name): target for name, target in bound.items() if isinstance(target, tuple)})
        parsed[module] = (tree, bound)

    def resolved(name: Name) -> Name:
        seen = set()
        while name in aliases and name not in seen:
            seen.add(name)
            name = aliases[name]
        return name

    found = {}
    for module, (tree, bound) in parsed.items():
        defined = {name: node for node in tree.body for name in _defined_names(node)}
        names = {**bound, **{name: (module, name) for name in defined}}
        found[module] = (tree, defined, {name: {resolved(n) for n in _uses(node, names)} for name, node in defined.items()})
    return found


def _defined_names(node: ast.stmt) -> list[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return [t.id for t in targets if isinstance(t, ast.Name)]
    return []


def _imports(tree: ast.Module, package: str) -> dict[str, Name | str]:
    """What each imported name is: a tfm_ref object ``(module, name)``, or a tfm_ref module (its dotted name)."""
    bound: dict[str, Name | str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            if not _in_course(base):
                continue
            for alias in node.names:
                target = f"{base}.{alias.name}"
                bound[alias.asname or alias.name] = target if _path(target).exists() else (base, alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if _in_course(alias.name):
                    top = alias.name.partition(".")[0]
                    bound[alias.asname or top] = alias.name if alias.asname else top
    return bound


def _in_course(module: str) -> bool:
    return module.partition(".")[0] in _PACKAGES


def _package_of(path: Path) -> Path:
    """The course package that holds ``path``."""
    return next(package for package in _PACKAGES.values() if path.is_relative_to(package))


def _uses(node: ast.stmt, names: dict[str, Name | str]) -> set[Name]:
    """The tfm_ref names ``node``'s code uses (its annotations left out: they run nothing)."""
    used: set[Name] = set()
    for child in _walk_without_annotations(node):
        if isinstance(child, ast.Name) and isinstance(names.get(child.id), tuple):
            used.add(names[child.id])
        elif isinstance(child, ast.Attribute) and isinstance(child.value, ast.Name) \
                and isinstance(names.get(child.value.id), str):
            used.add((names[child.value.id], child.attr))
    return used


def _walk_without_annotations(node: ast.AST):
    yield node
    for field, value in ast.iter_fields(node):
        if field in ("annotation", "returns"):
            continue
        for child in value if isinstance(value, list) else [value]:
            if isinstance(child, ast.AST):
                yield from _walk_without_annotations(child)


def origin(obj: object) -> Name | None:
    """Where tfm_ref defines ``obj`` (a function or class), or None for anything else."""
    obj = inspect.unwrap(obj) if callable(obj) and not isinstance(obj, type) else obj
    module, name = getattr(obj, "__module__", None), getattr(obj, "__qualname__", "")
    if isinstance(module, str) and _in_course(module) and "." not in name and name:
        return module, name
    return None


def _named_in(item: object, allowed: set[Name]) -> set[Name]:
    """The tfm_ref functions and classes a catalogue object uses (bases, names, closures), less ``allowed``."""
    if isinstance(item, type):
        bases = {where for klass in item.__mro__ if (where := origin(klass)) is not None}
        own = [f for klass in item.__mro__ if klass.__module__.startswith("autograde")
               for f in vars(klass).values() if isinstance(f, types.FunctionType)]
        return (bases | {n for f in own for n in _named_in(f, allowed)}) - allowed
    if not isinstance(item, types.FunctionType):
        return set()
    return {where for v in named_objects(item) if (where := origin(v)) is not None} - allowed


def _seeds(exercise) -> set[Name]:
    allowed = {owner for item in exercise.allowed if (owner := _owner(item)) is not None}
    seeds = set()
    for item in (exercise.reference, *exercise.forbidden, *exercise.withheld):
        where = origin(item)
        seeds |= {where} if where is not None else _named_in(item, allowed)
    return seeds


def _owner(item: object) -> Name | None:
    """The top-level tfm_ref object an allowed function is, or is a method of."""
    module, qualname = getattr(item, "__module__", None), getattr(item, "__qualname__", "")
    if isinstance(module, str) and _in_course(module) and qualname:
        return module, qualname.split(".")[0]
    return None


def _closure(seeds: Iterable[Name]) -> set[Name]:
    withheld = set(seeds)
    definitions = _definitions()
    grew = True
    while grew:
        grew = False
        for module, (_, defined, uses) in definitions.items():
            for name in defined:
                if (module, name) not in withheld and uses[name] & withheld:
                    withheld.add((module, name))
                    grew = True
    return {(m, n) for m, n in withheld if m in definitions and n in definitions[m][1]}


@functools.cache
def withheld(assignment: str, key: str | None = None) -> frozenset[Name]:
    """The tfm_ref names withheld while grading ``assignment`` (those of its exercise ``key`` alone, if given)."""
    names: set[Name] = set()
    for exercise in exercises_of(assignment):
        if key is None or exercise.key == key:
            names |= _closure(_seeds(exercise))
    return frozenset(names)


@functools.cache
def model_sources(assignment: str) -> tuple[tuple[str, str], ...]:
    """The real source of each module of the checks' models that has names withheld in ``assignment``'s tree."""
    held = {module for module, _ in withheld(assignment)}
    return tuple((module, _path(module).read_text()) for module in MODEL_SOURCES if module in held)


def answered_by_models(assignment: str) -> frozenset[str]:
    """The exercises of ``assignment`` whose answers a runner holds once it has the models' sources."""
    shipped = {module for module, _ in model_sources(assignment)}
    return frozenset(e.key for e in exercises_of(assignment)
                     if any(module in shipped for module, _ in withheld(assignment, e.key)))


def _path(module: str) -> Path:
    top, *rest = module.split(".")
    relative = _PACKAGES[top] / Path(*rest)
    return relative / "__init__.py" if relative.is_dir() else relative.with_suffix(".py")


# --------------------------------------------------------------------------- the staged folder

_STUB_MODULE = '''"""The stand-ins for what is withheld while an assignment is graded (autograde.sandbox_tree)."""
import torch


class Withheld(RuntimeError):
    """tfm_ref's version of what is being graded is not in the sandbox."""


def message(name, assignment):
    return (f"{name} is not available while {assignment} is graded: it is what the exercise asks you to "
            "write (or computes it whole). Write it yourself; your notebook's own functions work as usual.")


def function(name, assignment):
    def withheld(*args, **kwargs):
        raise Withheld(message(name, assignment))
    withheld.__name__ = withheld.__qualname__ = name.rpartition(".")[2]
    return withheld


class Module(torch.nn.Module):
    """The base of a withheld class: it cannot be built."""

    _withheld = ("?", "?")

    def __init__(self, *args, **kwargs):
        raise Withheld(message(*self._withheld))
'''

_SANDBOX_AUTOGRADE = '''"""The grader, as the sandbox holds it: no checks here (they run in the grader)."""


def check(key, candidate, hidden=False):
    print(f"({key}: checked by the grader, outside this notebook)")
'''


def stage(destination: Path, assignments: Iterable[str]) -> Path:
    """Write the folder described above into ``destination`` (made readable by the sandbox's user)."""
    runtime = destination / "runtime"
    shutil.copytree(Path(RUNTIME.__file__).parent, runtime / RUNTIME.__name__,
                    ignore=shutil.ignore_patterns("__pycache__"))
    (runtime / "autograde").mkdir()
    (runtime / "autograde" / "__init__.py").write_text(_SANDBOX_AUTOGRADE)
    for name in words.languages():
        catalogue = Path("locales") / name / "LC_MESSAGES" / f"{words.DOMAIN}.po"
        (runtime / catalogue).parent.mkdir(parents=True)
        shutil.copyfile(words.LOCALES.parent / catalogue, runtime / catalogue)
    (destination / "tfm").mkdir()
    for assignment in assignments:
        _write_tree(destination / "trees" / assignment, assignment)
    for folder, dirs, files in os.walk(destination):
        os.chmod(folder, 0o755)
        for name in files:
            os.chmod(os.path.join(folder, name), 0o644)
    return destination


@functools.cache
def staged() -> Path:
    """This process's staged folder, for every assignment: written once, removed at exit (or by
    `notebook_sandbox.container.remove_leftovers` when the process was killed)."""
    folder = Path(tempfile.mkdtemp(prefix=leftover_prefix(os.getpid()) + "tree-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return stage(folder, chapter_ids())


def _write_tree(target: Path, assignment: str) -> None:
    for name, package in _PACKAGES.items():
        shutil.copytree(package, target / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.py", "checkpoints", "results"))
    names = withheld(assignment)
    for module, (tree, defined, _) in _definitions().items():
        held = {name for m, name in names if m == module}
        source = _path(module)
        path = target / source.relative_to(_package_of(source).parent)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(ast.unparse(_stubbed(tree, held, module, assignment)) if held else source.read_text())
    (target / "tfm_ref" / "_withheld.py").write_text(_STUB_MODULE)


def _stubbed(tree: ast.Module, held: set[str], module: str, assignment: str) -> ast.Module:
    """``tree`` with each top-level definition in ``held`` replaced by a stub (`_STUB_MODULE`)."""
    body: list[ast.stmt] = []
    for node in tree.body:
        names = [n for n in _defined_names(node) if n in held]
        if not names:
            body.append(node)
        elif isinstance(node, ast.ClassDef):
            body += ast.parse(f"class {node.name}(_withheld.Module):\n"
                              f"    _withheld = ('{module}.{node.name}', {assignment!r})").body
        else:
            body += ast.parse("\n".join(f"{n} = _withheld.function('{module}.{n}', {assignment!r})"
                                         for n in names)).body
    preamble = 1 if ast.get_docstring(tree) is not None else 0
    while preamble < len(body) and isinstance(body[preamble], ast.ImportFrom) and body[preamble].module == "__future__":
        preamble += 1
    body.insert(preamble, ast.parse("from tfm_ref import _withheld").body[0])
    return ast.Module(body=body, type_ignores=[])
