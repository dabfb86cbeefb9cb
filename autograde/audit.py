"""Static audit of the student's own cells: what they should not do, as flags for an instructor to read.

Best effort and never a score: code can hide what it does from a static reading, so no guarantee rests
on it (autograde/README.md). Flags: ``imports-reference`` (tfm_ref, and what tfm_widgets re-exports of it),
``imports-grader``, ``patches-modules``, ``reads-files``, ``runs-commands``, ``dynamic-code``, ``introspection``,
``torch-internals`` (torch's dispatcher, hooks and every private torch name), ``forbidden-call`` (a forbidden
helper named), ``syntax-error`` and ``unaudited-code``; what each covers is the sets below.
"""
from __future__ import annotations

import ast
import importlib
import string
import types

__all__ = ["audit"]

_FILE_CALLS = {"open", "read_text", "read_bytes", "listdir", "scandir", "walk", "glob", "rglob", "iterdir",
               "load", "loadtxt", "fromfile", "copyfile", "copy", "rmtree", "remove", "unlink", "stat"}
_FILE_MODULES = {"os", "shutil", "pathlib", "io", "glob", "pickle", "torch", "numpy", "np"}
_COMMAND_MODULES = {"subprocess", "socket", "urllib", "requests", "http", "multiprocessing", "ctypes"}
# Their loads import and call whatever a byte string names (pickle's GLOBAL and REDUCE): any function, unseen.
_DESERIALIZERS = {"pickle", "_pickle", "marshal", "copyreg", "shelve", "dill", "cloudpickle", "joblib"}
_DYNAMIC = {"exec", "eval", "compile", "__import__", "globals", "vars", "getattr", "setattr", "delattr"}
_PATCH_CALLS = {"setattr", "delattr"}
_CODE_BUILTINS = {"exec", "eval", "compile"}
_INTROSPECTION_MODULES = {"gc", "inspect", "ctypes", "threading", "_thread", "signal", "faulthandler", "tracemalloc",
                          "atexit", "concurrent", "multiprocessing", "dis", "types", "weakref", "sys._getframe",
                          "asyncio"}
_INTROSPECTION_ATTRIBUTES = {
    "_getframe", "_current_frames", "settrace", "setprofile", "addaudithook", "meta_path", "path_hooks",
    "f_back", "f_locals", "f_globals", "f_builtins", "gi_frame", "cr_frame", "tb_frame", "tb_next",
    "__globals__", "__closure__", "__code__", "__subclasses__", "__bases__", "__mro__", "__dict__",
    "__builtins__", "__self__", "__func__", "__wrapped__", "__getattribute__", "__reduce__", "__reduce_ex__",
    "getprofile", "gettrace", "__setattr__", "to_thread", "__traceback__",
    # a function's or generator's code, to be rebuilt by hand; its defaults, objects it holds
    "gi_code", "cr_code", "ag_code", "f_code", "co_consts", "co_code", "co_filename", "co_names", "__defaults__",
    "__kwdefaults__", "__del__",
}
# what evaluates strings as code, as exec does: annotations read with eval_str, typing's hints; and what reads an
# attribute or a module named in a string, as getattr and import do (string.Formatter's fields, pkgutil's names)
_EVALUATES = {"get_type_hints", "get_annotations", "get_field", "get_value", "resolve_name", "Formatter"}
# attributes and modules of torch that reach its dispatcher: a mode or a kernel registered there sees every operation
_TORCH_INTERNALS = {"ops", "_C", "jit", "_ops", "overrides", "library", "_python_dispatch"}
_TORCH_HOOKS = {"__torch_function__", "__torch_dispatch__", "TorchFunctionMode", "TorchDispatchMode",
                "DisableTorchFunction", "DisableTorchFunctionSubclass"}
_PLAIN_NAMES = {"types.SimpleNamespace"}  # in a flagged module, but a plain record
# what of ``inspect`` reads a function's declared face, not the running interpreter: ``import inspect`` is judged by
# its uses (``inspect.signature(f)`` is plain, ``inspect.currentframe()`` or the module handed on is not)
_PLAIN_INSPECT = {"signature", "Signature", "Parameter", "isclass", "isfunction", "ismethod", "isgeneratorfunction"}
MAX_AUDITED_CHARS = 200_000
"""A code cell longer than this is not parsed (the parser's memory grows some 600-fold with it): it is flagged."""
_PROCESS_CALLS = {"fork", "forkpty", "kill", "killpg", "setsid", "execv", "execve", "execvp", "spawnv", "posix_spawn",
                  "system", "popen"}


def _reexported(name: str) -> bool:
    """Is ``name`` (``tfm_widgets.attention.softmax``) the reference re-exported by a widget module?"""
    module, _, attribute = name.rpartition(".")
    try:
        found = getattr(importlib.import_module(module), attribute, None)
    except ImportError:  # ``name`` is a module itself
        return False
    if isinstance(found, types.ModuleType):  # a module of the reference the widget imported (tfm_ref.attention)
        return not found.__name__.startswith("tfm_widgets")
    return callable(found) and not str(getattr(found, "__module__", "")).startswith("tfm_widgets")


GRADER = ("autograde", "notebook_sandbox", "intake", "class_report")
"""The grading code's packages (`notebook_sandbox` is the runner itself): a notebook has no use for them."""


def _guarded(module: str | None) -> bool:
    """Is ``module`` (what a name was imported as) one the grader relies on, whose attributes a cell must not set?"""
    return module is not None and (module.split(".")[0] in ("torch", "numpy", "tfm_ref", *GRADER, "math", "json",
                                                            "struct", "socket", "select")  # the runner's channel's
                                   or module in ("sys", "builtins"))


def _plain_attribute_call(call: ast.Call, imported: dict[str, str]) -> bool:
    """``getattr(F, "relu")``, ``setattr(self, f"layer{i}", …)``, ``vars(config)``: an attribute of the student's
    own object (or one read by a name written out, not a private one), as plain as ``obj.name`` is."""
    name = call.func.id if isinstance(call.func, ast.Name) else ""
    if name == "vars":
        return len(call.args) == 1 and not _guarded(imported.get(_root_name(call.args[0]) or ""))
    if name not in ("getattr", "setattr", "delattr", "hasattr") or len(call.args) < 2:
        return False
    target, attribute = _root_name(call.args[0]) or "", call.args[1]
    spelled = isinstance(attribute, ast.Constant) and isinstance(attribute.value, str) \
        and not attribute.value.startswith("_") and attribute.value not in _INTROSPECTION_ATTRIBUTES
    own = target not in imported and target not in ("sys", "builtins", "__builtins__")
    return (spelled and (name in ("getattr", "hasattr") or own)) or (own and name != "getattr"
                                                                      and isinstance(attribute, ast.JoinedStr))


def _root_name(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _imports(tree: ast.AST) -> list[tuple[str, str]]:
    """(local name, module it is bound to) for every import in the code."""
    names: list[tuple[str, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [(alias.asname or alias.name.split(".")[0], alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names += [(alias.asname or alias.name, f"{node.module}.{alias.name}") for alias in node.names]
    return names


def _bind(bindings: dict[str, list[str]], name: str, modules: list[str]) -> None:
    """Add ``modules`` to those ``name`` is bound to, each once, in the order first seen."""
    known = bindings.setdefault(name, [])
    known += [m for m in modules if m not in known]


def _aliases(tree: ast.AST, bindings: dict[str, list[str]]) -> list[tuple[str, list[str]]]:
    """(new name, modules) for every plain assignment of an imported name to another name."""
    return [(target.id, list(bindings[node.value.id])) for node in ast.walk(tree)
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id in bindings
            for target in node.targets if isinstance(target, ast.Name) and target.id != node.value.id]


def _module_flags(module: str) -> set[str]:
    top = module.split(".")[0]
    flags = set()
    if top == "tfm_ref" or (top == "tfm_widgets" and _reexported(module)):
        flags.add("imports-reference")
    if top in GRADER:
        flags.add("imports-grader")
    if top in _COMMAND_MODULES or module in ("os.system", "os.popen"):
        flags.add("runs-commands")
    if top in ("importlib", "builtins") or top in _DESERIALIZERS or module == "sys.modules":
        flags.add("dynamic-code")
    plain_inspect = top == "inspect" and (module == "inspect" or module.partition(".")[2] in _PLAIN_INSPECT)
    if (top in _INTROSPECTION_MODULES or module in _INTROSPECTION_MODULES or
            module.rpartition(".")[2] in _INTROSPECTION_ATTRIBUTES) and module not in _PLAIN_NAMES and not plain_inspect:
        flags.add("introspection")
    if top == "torch" and (set(module.split(".")[1:]) & (_TORCH_INTERNALS | _TORCH_HOOKS)
                           or any(_private(part) for part in module.split(".")[1:])):
        flags.add("torch-internals")
    return flags


def _private(name: str) -> bool:
    """A private torch name (``_decomp``, ``_softmax``): public work under a name the delegation flag may not know."""
    return name.startswith("_") and not name.startswith("__")


def audit(sources: list[str], forbidden_names: frozenset[str] = frozenset()) -> list[str]:
    """Flags for the student's code cells, sorted and unique.

    Cells share one namespace: an import in one is that module in every cell, and a name bound to several
    modules is read as each. ``forbidden_names``: forbidden PyTorch helpers written in Python, which no torch
    mode sees run: naming one is ``forbidden-call``."""
    flags: set[str] = set()
    trees = []
    for source in sources:
        if len(source) > MAX_AUDITED_CHARS:
            flags.add("unaudited-code")
            continue
        try:
            trees.append(ast.parse(source))
        except SyntaxError:
            flags.add("syntax-error")
        except (RecursionError, MemoryError, ValueError):  # nested too deeply for the parser
            flags.add("unaudited-code")
    bindings: dict[str, list[str]] = {}
    for tree in trees:
        for name, module in _imports(tree):
            _bind(bindings, name, [module])
            flags |= _module_flags(module)
    for tree in trees:  # a module handed to another name (`s = sys`) is that module under that name too
        for name, modules in _aliases(tree, bindings):
            _bind(bindings, name, modules)
    if forbidden_names and any(isinstance(node, (ast.Name, ast.Attribute)) and
                               (node.id if isinstance(node, ast.Name) else node.attr) in forbidden_names
                               for tree in trees for node in ast.walk(tree)):
        flags.add("forbidden-call")
    readings = max((len(modules) for modules in bindings.values()), default=1)
    for reading in range(readings):
        imported = {name: modules[min(reading, len(modules) - 1)] for name, modules in bindings.items()}
        for tree in trees:
            flags |= _node_flags(tree, imported)
    return sorted(flags)


def _node_flags(tree: ast.AST, imported: dict[str, str]) -> set[str]:
    """What the code of one cell does, read with ``imported`` (local name → module)."""
    flags: set[str] = set()
    called = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    plain_inspect = {id(node.value) for node in ast.walk(tree)
                     if isinstance(node, ast.Attribute) and node.attr in _PLAIN_INSPECT}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "__annotations__" for t in targets):
                flags.add("dynamic-code")  # strings that eval_str or get_type_hints would run
            for target in targets:
                if isinstance(target, (ast.Attribute, ast.Subscript)):
                    root = _root_name(target)
                    attr = target.attr if isinstance(target, ast.Attribute) else ""
                    if _guarded(imported.get(root)) or root in ("sys", "builtins", "__builtins__") \
                            or attr.startswith("__"):
                        flags.add("patches-modules")
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            root = _root_name(func) if isinstance(func, ast.Attribute) else None
            plain = isinstance(func, ast.Name) and _plain_attribute_call(node, imported)
            if name in _PATCH_CALLS and not plain:
                flags.add("patches-modules")
            # exec, eval and compile as builtins: `model.eval()` and `torch.compile` are not them
            if name in _DYNAMIC - _PATCH_CALLS and not plain and (name not in _CODE_BUILTINS
                                                                  or isinstance(func, ast.Name)
                                                                  or root in ("builtins", "__builtins__")):
                flags.add("dynamic-code")
            if name == "open" or (name in _FILE_CALLS and (root is None or imported.get(root, root).split(".")[0] in _FILE_MODULES)):
                if name not in ("load", "copy") or root is not None:
                    flags.add("reads-files")
            if name in _PROCESS_CALLS and imported.get(root, root) == "os":
                flags.add("runs-commands")
            if name in ("attrgetter", "methodcaller"):  # getattr by another name
                flags.add("dynamic-code")
            if name in _EVALUATES or any(keyword.arg == "eval_str" for keyword in node.keywords):
                flags.add("dynamic-code")  # inspect.signature(f, eval_str=True) evaluates f's annotations
            if name == "format" and isinstance(func, ast.Attribute) and _reads_attributes(func.value):
                flags.add("dynamic-code")  # "{0.modules}".format(sys): getattr in a format string
        elif isinstance(node, ast.Name) and (node.id in ("__builtins__", "__loader__") or node.id in _DYNAMIC
                                             and id(node) not in called):
            flags.add("dynamic-code")  # `g = getattr`: the builtin under another name
        elif isinstance(node, ast.Name) and imported.get(node.id, node.id) == "inspect" \
                and id(node) not in plain_inspect:
            flags.add("introspection")  # inspect.currentframe(), inspect.stack(), the module handed on
        elif isinstance(node, (ast.Constant, ast.BinOp)) and _spelled(node) in _INTROSPECTION_ATTRIBUTES:
            flags.add("introspection")  # getattr(error, "__traceback__"), "f_" + "back": the attribute in a string
        elif isinstance(node, (ast.Constant, ast.BinOp)) and _spelled(node) in _TORCH_HOOKS:
            flags.add("torch-internals")  # type("M", (mode,), {"__torch_dispatch__": f}): a hook without a def
        elif isinstance(node, ast.FunctionDef) and node.name in _TORCH_HOOKS:
            flags.add("torch-internals")  # a Tensor subclass's hook
        elif isinstance(node, ast.FunctionDef) and node.name == "__del__":
            flags.add("introspection")  # a finalizer runs where the grader frees the object, outside any check
        if isinstance(node, ast.Attribute):
            flags |= _attribute_flags(node, imported)
        elif isinstance(node, ast.Call) and _spelled_getattr(node):  # getattr(module, "name") reads as module.name
            flags |= _attribute_flags(ast.Attribute(value=node.args[0], attr=node.args[1].value), imported)
    return flags


def _spelled(node: ast.AST) -> str | None:
    """The string a constant or a sum of constants spells ("f_" + "back"), or None."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _spelled(node.left), _spelled(node.right)
        return left + right if left is not None and right is not None else None
    return None


def _reads_attributes(template: ast.AST) -> bool:
    """Is ``template`` a format string with a field that reads an attribute or an item ("{0.f_back}", "{0[x]}")?"""
    text = _spelled(template)
    try:
        fields = [field for _, field, _, _ in string.Formatter().parse(text)] if text is not None else []
    except ValueError:  # not a valid format string: str.format would raise
        return False
    return any(field and ("." in field or "[" in field) for field in fields)


def _spelled_getattr(call: ast.Call) -> bool:
    return isinstance(call.func, ast.Name) and call.func.id in ("getattr", "hasattr") and len(call.args) >= 2 \
        and isinstance(call.args[1], ast.Constant) and isinstance(call.args[1].value, str)


def _attribute_flags(node: ast.Attribute, imported: dict[str, str]) -> set[str]:
    """What reading ``node`` (``x.name``, or ``getattr(x, "name")``) does."""
    flags: set[str] = set()
    root = _root_name(node) or ""
    bound = imported.get(root, root)  # `torch` unimported in this cell: the setup cell's
    own_class = isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name) \
        and node.value.func.id == "super"  # super().__setattr__ in a module's own __setattr__
    if node.attr in _INTROSPECTION_ATTRIBUTES and not own_class:
        flags.add("introspection")
    if ((node.attr in _TORCH_INTERNALS or _private(node.attr)) and bound.split(".")[0] == "torch") \
            or node.attr == "as_subclass" or node.attr in _TORCH_HOOKS:
        flags.add("torch-internals")
    if node.attr == "modules" and bound == "sys":
        flags.add("dynamic-code")
    if node.attr in ("threading", "_thread"):  # a module's own import of them (queue.threading)
        flags.add("introspection")
    # a widget module: what it re-exports of the reference is the reference
    if bound.startswith("tfm_widgets.") and isinstance(node.value, ast.Name) and _reexported(f"{bound}.{node.attr}"):
        flags.add("imports-reference")
    return flags
