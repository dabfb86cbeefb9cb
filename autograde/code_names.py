"""What a student's function or class reaches by name: its code objects and the objects they name, as the
kernel's check (`autograde.checking`) and the sandbox's withheld tree (`autograde.sandbox_tree`) read them.
"""
from __future__ import annotations

import contextlib
import types

__all__ = ["functions_of", "code_of", "named_objects"]


def functions_of(impl: object) -> list[types.FunctionType]:
    """A function itself, or the methods of a class and of its own bases (not PyTorch's or the builtins')."""
    if type(impl) is types.FunctionType:
        return [impl]
    if isinstance(impl, type):
        return [f for klass in impl.__mro__ if not klass.__module__.startswith(("torch", "builtins"))
                for f in vars(klass).values() if type(f) is types.FunctionType]
    return []


def code_of(impl: object) -> list[types.CodeType]:
    """The code objects (nested ones too) of a function, or of the methods of a class and its own bases."""
    found, todo = [], [f.__code__ for f in functions_of(impl)]
    while todo:
        code = todo.pop()
        found.append(code)
        todo += [c for c in code.co_consts if isinstance(c, types.CodeType)]
    return found


def named_objects(function: types.FunctionType) -> list[object]:
    """The globals a function's code names (a named module's attributes it names too: ``tfm_ref.softmax``) and
    the values its closures hold."""
    found = []
    for cell in function.__closure__ or ():
        with contextlib.suppress(ValueError):  # a closure variable not assigned yet
            found.append(cell.cell_contents)
    names = {n for code in code_of(function) for n in code.co_names}
    for name in names:
        value = function.__globals__.get(name)
        found += [getattr(value, n, None) for n in names] if isinstance(value, types.ModuleType) else [value]
    return found
