"""Integrity of a check: the student's code may not borrow the answer, nor bend the grader.

Two guards, both used by `autograde.checking` around every call of a student's code:

* `Forbid` — while a student's function runs, calling the reference (anything in `tfm_ref`)
  or a library function that does the exercise (``torch.softmax``, ``F.scaled_dot_product_attention``,
  ``nn.MultiheadAttention`` …) raises `ForbiddenCall`. It is a profile hook (``sys.setprofile``),
  so it catches the call however the function was reached: ``torch.softmax``, ``x.softmax``,
  ``from torch.nn.functional import softmax as s``, ``import tfm_ref as t; t.softmax``, or
  ``softmax = tfm_ref.softmax`` handed in as the answer; a Tensor subclass's method; ``torch.ops``;
  a copy of a documented reference function loaded from another file (its code and docstring,
  not its file and line, are compared). A torch-function mode sees the PyTorch calls made from C
  (``functools.partial``, ``map``). Starting a thread or a process, reading or switching the hook
  or the mode, or setting a signal handler or mask, is refused: code there would run out of its
  sight. A refusal sticks: the check fails when the guard is left even if the code caught the
  error (CPython drops a profile hook that raised), and so does a hook or mode found switched
  off. The grader builds the
  reference before entering the guard, so it needs no exemption. (`other_threads` lets the runner
  refuse a check while a thread started earlier still runs; the runner also fails a check during
  which its PID namespace gave out a new thread or process id.)
* `Snapshot` — the namespaces the grader relies on (``torch``, ``torch.Tensor``, ``numpy``,
  ``math``, ``builtins``, ``tfm_ref``, ``autograde`` …), recorded before any student code runs
  and put back before every check: a student cell that rebinds ``torch.allclose``, swaps a
  function's ``__code__`` or replaces ``sys.modules["autograde.checking"]`` changes no grade.
"""
from __future__ import annotations

import _posixsubprocess
import _signal
import _thread
import contextlib
import functools
import os
import sys
import threading
import types
import weakref
from collections.abc import Callable, Iterable, Iterator

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._device import DeviceContext

__all__ = ["ForbiddenCall", "Forbid", "Snapshot", "PROTECTED_MODULES", "nested_code", "type_name"]

PROTECTED_MODULES = (
    "builtins", "math", "numpy", "numpy.testing", "torch", "torch.nn",
    "torch.nn.functional", "torch.special", "torch.testing", "torch.linalg", "torch.autograd",
    "tfm_ref", "autograde",
)
"""Module prefixes whose attributes `Snapshot` restores (a prefix covers its submodules)."""


class ForbiddenCall(RuntimeError):
    """A student's function called the reference or the library function that does the exercise."""


def nested_code(code: types.CodeType) -> Iterator[types.CodeType]:
    """``code`` and the code of every function, class body and comprehension defined in it."""
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from nested_code(const)


def _functions_of(obj: object, seen: set[int]) -> Iterator[types.FunctionType]:
    """Every Python function reachable from a module or class namespace (methods, properties)."""
    if id(obj) in seen:
        return
    seen.add(id(obj))
    namespace = vars(obj) if isinstance(obj, (types.ModuleType, type)) else {}
    owner = getattr(obj, "__name__", "")
    for value in list(namespace.values()):
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if isinstance(value, property):
            yield from (f for f in (value.fget, value.fset, value.fdel) if isinstance(f, types.FunctionType))
        elif isinstance(value, types.FunctionType):
            yield value
        elif isinstance(value, type) and value.__module__.startswith(owner if isinstance(obj, types.ModuleType) else "\0"):
            yield from _functions_of(value, seen)


# Where students reach library functions, so that a message names one as they wrote it (torch.softmax),
# not by the internal module or class that defines it. The first namespace that holds the item wins.
_PUBLIC_NAMESPACES = ("torch", "torch.nn.functional", "torch.nn", "torch.special", "torch.linalg")
_REFERENCE_PACKAGES = ("tfm_ref.", "autograde.")


def _public_name(item: object) -> str:
    """The dotted name a student would write for ``item``, or its defining module's name for it."""
    qualname, short = getattr(item, "__qualname__", None), getattr(item, "__name__", None)
    # the plain name first: a builtin's qualified name goes through the C++ class that holds it
    paths = [p for p in (short, short and short.removeprefix("special_"), qualname) if isinstance(p, str)]
    for namespace in _PUBLIC_NAMESPACES:
        for path in paths:
            found = sys.modules.get(namespace)
            for attr in path.split("."):
                found = getattr(found, attr, None)
            if found is item:
                return f"{namespace}.{path}"
    return f"{getattr(item, '__module__', None) or ''}.{qualname or repr(item)}".lstrip(".")


def _package_dir(name: str) -> str | None:
    module = sys.modules.get(name)
    path = getattr(module, "__file__", None)
    return os.path.dirname(os.path.abspath(path)) + os.sep if path else None


# Taking the guard's torch-function mode off the stack
_MODE_SWITCHES = (torch._C._pop_torch_function_stack, torch._C._set_torch_function_state)
_MODE_SWITCH_IDS = frozenset(map(id, _MODE_SWITCHES))
# `with DisableTorchFunction():` switches every torch-function mode off, the guard's too, and makes no call the hook
# sees: the state it leaves is what shows it
_torch_function_state, _FunctionState = torch._C._get_torch_function_state, torch._C._TorchFunctionState
_ALL_DISABLED = _FunctionState.ALL_DISABLED
_FUNCTION = types.FunctionType
_DISPATCH_CODE = torch.overrides.handle_torch_function.__code__


def _dispatching(frame: types.FrameType) -> bool:
    """Is this pop of the mode stack PyTorch's own, stepping past the guard's mode to call it: `_pop_mode` in
    `_pop_mode_temporarily`, entered by `handle_torch_function` (a Python-level torch function's dispatch)?"""
    entered = frame.f_back and frame.f_back.f_back and frame.f_back.f_back.f_back
    return entered is not None and entered.f_code is _DISPATCH_CODE


# Taken now, before any student code runs: a cell may rebind sys.setprofile or the builtins the guard uses.
_setprofile, _getprofile, _getframe = sys.setprofile, sys.getprofile, sys._getframe
_HOOK_SWITCHES = (sys.setprofile, sys.settrace, sys.getprofile, sys.gettrace, threading.setprofile, threading.settrace)
# A signal handler runs between any two steps of the runner's own code: the runner holds signals back until its reply
# is sent (autograde.lockdown), and these would let one through (the C functions under signal's Python wrappers)
_SIGNAL_SWITCHES = (_signal.signal, _signal.pthread_sigmask)
_mode_depth, _mode_at, _pop_mode = (torch._C._len_torch_function_stack, torch._C._get_function_stack_at,
                                    torch._C._pop_torch_function_stack)
_dispatch_depth, _dispatch_mode_at, _pop_dispatch_mode = (torch._C._len_torch_dispatch_stack,
                                                          torch._C._get_dispatch_stack_at,
                                                          torch._C._pop_torch_dispatch_stack)
id, getattr, type, any, isinstance = id, getattr, type, any, isinstance  # noqa: A001  (module globals first)


def _modes_left_on() -> str:
    """The torch modes on before a check, named ("" for none): a student's mode sees every operation, and in a
    runner the outcome's bytes are made by operations too. PyTorch's own default device (`torch.set_default_device`,
    `with torch.device(...)`) is a mode of an exact class that computes nothing, and so is a guard's own."""
    modes = [_mode_at(i) for i in range(_mode_depth())] + [_dispatch_mode_at(i) for i in range(_dispatch_depth())]
    return ", ".join(type_name(type(m)) for m in modes if type(m) is not DeviceContext and type(m) is not _RefuseListed)


# Where code runs out of the hook's sight: a new thread (threading and asyncio.to_thread start theirs here) or
# a new process.
_ESCAPES = tuple(f for f in (_thread.start_new_thread, getattr(_thread, "start_joinable_thread", None), os.fork,
                             os.forkpty, os.posix_spawn, os.posix_spawnp, os.system, os.execv, os.execve,
                             _posixsubprocess.fork_exec) if f is not None)


_OPERATORS = "torch.ops"
_FOREIGN_DISPATCH = "torch.overrides.handle_torch_function"  # given the student's own function: see _RefuseListed
# Where PyTorch's code lives: torch.ops.<namespace>.<op> runs the Python of one file of it (called from a student's
# code, refused), torch.compile's compiled functions run through its _dynamo folder.
_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_OPERATORS_FILE = sys.modules[type(torch.ops).__module__].__file__
_COMPILER_DIR = os.path.join(_TORCH_DIR, "_dynamo", "")
_COMPILED = "a function compiled by torch.compile"
# Where Python and the installed packages live: code from there is no student's copy of anything.
_INSTALLED = tuple(os.path.join(p, "") for p in {sys.prefix, sys.base_prefix, sys.exec_prefix})
# The grader's own code, and its exercises: their catalogues of mistakes hold right implementations but for one
# keyword, and their helpers whole steps of an exercise, so a student's code may not call into them.
_GRADER_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_EXERCISES_DIR = os.path.join(_GRADER_DIR, "exercises", "")
_SIGNATURES: weakref.WeakKeyDictionary[types.CodeType, tuple] = weakref.WeakKeyDictionary()  # while the code lives
_HANDMADE = "a function whose code was made by hand (CodeType.replace)"
# Code that compiling makes holds only these constants and plain str names: the hook may hash it and call its
# names' methods. Code made by hand may hold an object of the student's whose __hash__ or startswith would run
# inside the hook, where nothing is watched.
_CONSTANT_TYPES = frozenset({str, bytes, int, float, complex, bool, type(None), type(...), types.CodeType})
# id → a weak reference to code found ordinary; its callback forgets the id as the code is freed, before any
# other code can take that id, so re-run cells do not pile up here
_ORDINARY: dict[int, weakref.ref] = {}


def _plain_constant(value: object) -> bool:
    kind = type(value)
    if kind is tuple or kind is frozenset:
        return all(_plain_constant(v) for v in value)
    return kind in _CONSTANT_TYPES and (kind is not types.CodeType or _ordinary(value))


def _ordinary(code: types.CodeType) -> bool:
    """Is ``code`` as compiling makes it: plain constants, and names that are str, not a subclass of it? Worked out
    once per code object, touching nothing of the student's (no hash, no method)."""
    if id(code) in _ORDINARY:
        return True
    names = (code.co_filename, code.co_name, code.co_qualname, *code.co_names, *code.co_varnames,
             *code.co_freevars, *code.co_cellvars)
    if not (all(type(name) is str for name in names) and _plain_constant(code.co_consts)):
        return False
    # the table bound now: at the interpreter's exit the module's globals are cleared before the last code is freed
    _ORDINARY[id(code)] = weakref.ref(code, lambda _, key=id(code), known=_ORDINARY: known.pop(key, None))
    return True


def _signature(code: types.CodeType) -> tuple:
    """What a function's code does, without where it was loaded from or at which line."""
    if code not in _SIGNATURES:
        consts = tuple(_signature(c) if isinstance(c, types.CodeType) else (type(c).__name__, repr(c))
                       for c in code.co_consts)
        _SIGNATURES[code] = (code.co_code, code.co_names, code.co_varnames, code.co_freevars, consts)
    return _SIGNATURES[code]


@functools.cache
def _reference_signatures(packages: tuple[str, ...]) -> dict[tuple, str]:
    """The signature of every function of the loaded modules of ``packages`` → its name."""
    found: dict[tuple, str] = {}
    for name, module in list(sys.modules.items()):
        if module is not None and any(name == p or name.startswith(p + ".") for p in packages):
            for function in _functions_of(module, set()):
                for code in nested_code(function.__code__):
                    found.setdefault(_signature(code), f"{function.__module__}.{function.__qualname__}")
    return found


# where a student reaches the escapes and signal's switches
_PUBLIC_MODULES = {"posix": "os", "_posixsubprocess": "subprocess", "_signal": "signal"}


def other_threads() -> list[str]:
    """The Python threads running beside this one (their names where threading knows them): code there runs
    outside a guard entered here."""
    names = {t.ident: t.name for t in threading.enumerate()}
    here = threading.get_ident()
    running = [names.get(ident, f"thread {ident}") for ident in sys._current_frames() if ident != here]
    unseen = _thread._count() - len(running)  # threads that run C code now (a queue's get) have no Python frame
    return running + [f"{unseen} waiting in C code"] * (unseen > 0)


def _not_the_graders(frame: types.FrameType | None, entry: types.FrameType | None) -> bool:
    """Was this call into the grader's exercise code made by other code (the student's, or tfm_ref's, which an
    allowed method can pass anything on to)? Python's, the installed packages' and the grader's own frames outside
    its exercises pass a call on (torch, an asyncio loop, `Call.map_tensors` call what they are given): the first
    frame below them decides, and none down to the guard's ``entry`` is the grader's."""
    while frame is not None and frame is not entry:
        filename = frame.f_code.co_filename
        if filename.startswith(_EXERCISES_DIR):
            return False
        if not filename.startswith((*_INSTALLED, _GRADER_DIR)):
            return True
        frame = frame.f_back
    return False


_EVERYWHERE: frozenset[types.CodeType] = frozenset()
_FACTORY_MADE: frozenset[tuple] = frozenset()


def forbid_everywhere(items: Iterable[object]) -> None:
    """Refuse the code of ``items`` in every guard, wherever it is called from: the grader's catalogued mistakes.
    Called once, before any student code runs; frozensets, which no cell can empty (and `Snapshot` puts the
    module's attributes back). Of the closures among them (made by a factory such as `_online_variant`, right with
    its default keywords) a copy is refused too, under whatever name or file: no student writes one by chance,
    as they could a short wrong function."""
    global _EVERYWHERE, _FACTORY_MADE
    _EVERYWHERE = frozenset(key for item in items for kind, key, _ in _entries(item) if kind == "code")
    _FACTORY_MADE = frozenset(_signature(code) for code in _EVERYWHERE if code.co_freevars)


@functools.lru_cache(maxsize=None)
def _entries(item: object) -> tuple[tuple[str, object, str], ...]:
    """What `Forbid` records for a listed ``item``, as (kind, key, name): the code of its functions, the id of a
    builtin, or a Tensor method's name (worked out once per item: a check's guard lists some 400)."""
    name = _public_name(item)
    if isinstance(item, type):
        return tuple(("code", function.__code__, name) for function in _functions_of(item, set()))
    if isinstance(item, types.FunctionType):
        return (("code", item.__code__, name),)
    if type(item).__name__ in ("method_descriptor", "wrapper_descriptor", "getset_descriptor"):
        return (("method", item.__name__, f"Tensor.{item.__name__}"), ("builtin", id(item), f"Tensor.{item.__name__}"))
    return (("builtin", id(item), name),)


class Forbid:
    """Context manager: while active, the listed callables and packages raise `ForbiddenCall`.

    Args:
        items: functions, builtins, Tensor methods (``torch.Tensor.softmax``), classes (all their
            methods) — the library functions that would do the exercise for the student.
        packages: package names whose every function is off limits (``"tfm_ref"``).
        allowed: functions of those packages the exercise lets the student use (helpers).
    """

    def __init__(self, items: Iterable[object] = (), packages: Iterable[str] = ("tfm_ref",),
                 allowed: Iterable[Callable] = ()):
        self._codes: dict[types.CodeType, str] = {}
        self._builtins: dict[int, str] = {}
        self._tensor_methods: dict[str, str] = {}
        for item in items:
            self._add(item)
        # Turning the hook off from inside, or reaching the hook object to empty it, would defeat it; code run in
        # another thread or process runs where the hook does not.
        self._guard_switches, self._escapes, self._signal_switches = {_FOREIGN_DISPATCH}, set(), set()
        for functions, names in (((*_HOOK_SWITCHES, *_MODE_SWITCHES), self._guard_switches),
                                 (_SIGNAL_SWITCHES, self._signal_switches), (_ESCAPES, self._escapes)):
            for function in functions:
                module = function.__module__
                self._builtins[id(function)] = f"{_PUBLIC_MODULES.get(module, module)}.{function.__name__}"
                names.add(self._builtins[id(function)])
        self._packages = tuple(packages)
        self._dirs = tuple(d for d in map(_package_dir, packages) if d)
        self._allowed = {code for f in allowed if hasattr(f, "__code__") for code in nested_code(f.__code__)}
        self._allowed_copies = {_signature(code) for code in self._allowed}
        self._previous: list[tuple] = []
        self._entry: types.FrameType | None = None  # the frame that entered the guard (`__enter__`)
        self.refused: list[ForbiddenCall] = []

    def _add(self, item: object) -> None:
        try:
            entries = _entries(item)
        except TypeError:  # an unhashable item: worked out again
            entries = _entries.__wrapped__(item)
        tables = {"code": self._codes, "builtin": self._builtins, "method": self._tensor_methods}
        for kind, key, name in entries:
            tables[kind][key] = name

    def _blocked(self, frame: types.FrameType, event: str, arg: object) -> str | None:
        caller = frame.f_back if event == "call" else frame
        if event == "call":
            code = frame.f_code
            if not _ordinary(code):  # before anything hashes it or calls a method of its names
                return _HANDMADE
            if code in self._allowed:
                return None
            if code in self._codes:
                return self._codes[code]
            if self._dirs and code.co_filename.startswith(self._dirs) and caller is not None \
                    and not caller.f_code.co_filename.startswith(self._dirs):
                return f"{frame.f_globals.get('__name__', '?')}.{code.co_name}"
            if code in _EVERYWHERE or code.co_filename.startswith(_EXERCISES_DIR) and _not_the_graders(caller,
                                                                                                     self._entry):
                return f"{frame.f_globals.get('__name__', '?')}.{code.co_qualname}"
            if code.co_filename.startswith(_COMPILER_DIR) and caller is not None \
                    and not caller.f_code.co_filename.startswith(_TORCH_DIR):
                return _COMPILED
            if code.co_filename == _OPERATORS_FILE and caller is not None:
                if caller.f_code is _MODE_CODE:  # an operator the guard's mode passes on: whose call was it?
                    caller = caller.f_back
                if caller is not None and not caller.f_code.co_filename.startswith(_TORCH_DIR):
                    return _OPERATORS
            if not code.co_filename.startswith(_INSTALLED + self._dirs):  # the student's code: is it a copy?
                if code.co_freevars and _signature(code) in _FACTORY_MADE:
                    return f"a copy of autograde.exercises' {code.co_name}"
                copied = self._copy_of(code)
                if copied is not None:
                    return f"a copy of {copied}"
        elif event == "c_call":
            key, method = id(arg), getattr(arg, "__name__", None)
            if key not in self._builtins and method not in self._tensor_methods:
                return None  # most C calls: decided without reading the frame's code, an audit event in the runner
            if frame.f_code is _EXIT_CODE:  # the guard switching itself off
                return None
            if key in _MODE_SWITCH_IDS and _dispatching(frame):
                return None
            if key in self._builtins:
                return self._builtins[key]
            owner = getattr(arg, "__self__", None)
            # a Tensor subclass's method too (x.as_subclass(T).softmax()), by the true MRO, which no class can fake
            if any(type_name(c) == "Tensor" for c in _MRO.__get__(type(owner))):
                return self._tensor_methods[method]
        return None

    def _copy_of(self, code: types.CodeType) -> str | None:
        """The reference function or listed item whose code ``code`` repeats, docstring and all, wherever it was
        loaded from and at whatever line (a package copied to /tmp, a file shifted by a blank line). Only a
        function with a docstring is compared: a short undocumented one can be written alike on one's own."""
        if not (code.co_consts and isinstance(code.co_consts[0], str)):
            return None
        signature = _signature(code)
        if signature in self._allowed_copies:
            return None
        return self._listed_copies.get(signature) or _reference_signatures(self._packages).get(signature)

    @functools.cached_property
    def _listed_copies(self) -> dict[tuple, str]:
        """The signature of each listed function → its name (worked out once, when a copy is first looked for)."""
        return {_signature(code): name for code, name in self._codes.items()}

    def listed(self, func: object) -> str | None:
        """The name of ``func`` if it is one of the listed items (a builtin, a Tensor method, a function)."""
        if id(func) in self._builtins:
            return self._builtins[id(func)]
        # not getattr: an operator packet (torch.ops.…) answers any attribute with Python code of its own
        return self._codes.get(func.__code__) if type(func) is types.FunctionType else None

    def refuse(self, what: str, message: str | None = None) -> ForbiddenCall:
        """The error for calling ``what``, kept until the guard is left: code that catches it still fails its
        check (CPython drops a profile hook that raised, so that code would go on unwatched)."""
        error = ForbiddenCall(message or f"your code called {what}, which is off limits while a check runs: "
                              + self._why(what))
        self.refused.append(error)
        return error

    def _profile(self, frame: types.FrameType, event: str, arg: object) -> None:
        if event in ("call", "c_call"):
            if _torch_function_state() == _ALL_DISABLED:
                raise self.refuse("", _MODES_DISABLED)
            what = self._blocked(frame, event, arg)
            if what is not None:
                raise self.refuse(what)

    def _why(self, what: str) -> str:
        if what in self._guard_switches:
            return "it would switch off the grader's guard. This part earns nothing while it does."
        if what == _COMPILED:
            return ("compiled code runs where the grader's guard cannot follow it. Check the plain function; "
                    "compile it after the checks if you like. This part earns nothing while it is compiled.")
        if what == _HANDMADE:
            return ("code put together by hand can run where the grader's guard cannot see it. Write plain "
                    "functions. This part earns nothing while it does.")
        if what == _OPERATORS:
            return ("the operators under PyTorch's functions reach what an exercise forbids by another door. This "
                    "part earns nothing while it does.")
        if what in self._signal_switches:
            return ("a signal handler of yours would run where the check cannot see it. Leave signals alone in the "
                    "functions you write. This part earns nothing while they do.")
        if what in self._escapes:
            return ("a check runs your code in this thread alone, and this would run code in another thread or "
                    "process. This part earns nothing while it does.")
        original = what.removeprefix("a copy of ")
        kind = "the grader's own code" if original.startswith("autograde.") else \
            "the course's reference" if original.startswith(_REFERENCE_PACKAGES) else \
            "a library function that does this exercise's work"
        return f"{kind}. Write it with basic tensor operations; this part earns nothing while it does."

    def __enter__(self) -> Forbid:
        self._entry = _getframe(1)  # what lies below it (a notebook cell's check(...), say) is not the checked code
        left_on = _modes_left_on()
        if left_on:
            self.refuse("", f"your notebook left a torch mode on ({left_on}): it would see every operation of the "
                            "check, under the grader's guard or not. Leave the `with` block of a TorchFunctionMode "
                            "or TorchDispatchMode before the cell ends. This part earns nothing while one is on.")
        dispatch_depth = _dispatch_depth()
        mode = _RefuseListed(self)
        mode.__enter__()
        hook = self._profile  # this very object, to know the hook again when leaving
        self._previous.append((_getprofile(), mode, hook, _mode_depth(), dispatch_depth))
        _setprofile(hook)
        return self

    def __exit__(self, *exc: object) -> None:
        """Switch off; then fail the check if anything was refused in it, even where the code caught that, or if
        the hook or the mode was switched off from C, where neither could see it."""
        profile, mode, hook, depth, dispatch_depth = self._previous.pop()
        hooked = _getprofile() is hook
        _setprofile(profile)
        moded = _mode_depth() == depth and _mode_at(depth - 1) is mode and _torch_function_state() != _ALL_DISABLED
        while _mode_depth() >= depth:  # the guard's mode, and any mode the code left above it
            _pop_mode()
        if _dispatch_depth() != dispatch_depth and not self.refused:
            self.refuse("", "your code left a TorchDispatchMode on, which would see the operations after the check, "
                            "outside its guard. This part earns nothing while it does.")
        while _dispatch_depth() > dispatch_depth:
            _pop_dispatch_mode(None)  # None: the top of the stack of user modes
        if not (hooked and moded) and not self.refused:
            self.refuse("", "your code switched off the grader's guard (from C, where it could not see the call). "
                            "This part earns nothing while it does.")
        if self.refused:
            raise self.refused[0]


_MODES_DISABLED = ("your code switched PyTorch's function modes off (DisableTorchFunction), and with them the "
                   "grader's guard. This part earns nothing while it does.")


class _RefuseListed(TorchFunctionMode):
    """Sees every call of a PyTorch function, from Python or from C (``functools.partial(torch.softmax)``,
    ``map``, a Tensor subclass), where the profile hook sees only calls made from Python."""

    def __init__(self, guard: Forbid) -> None:
        super().__init__()
        self.guard = guard

    def __torch_function__(self, func, types, args=(), kwargs=None):
        what = self.guard.listed(func)
        if what is not None:
            raise self.guard.refuse(what)
        if type(func) is _FUNCTION and not str(func.__module__).startswith("torch"):
            # handle_torch_function(<the student's own function>, …) would run it with this mode stepped aside
            raise self.guard.refuse(_FOREIGN_DISPATCH)
        return func(*args, **(kwargs or {}))


_EXIT_CODE = Forbid.__exit__.__code__
_MODE_CODE = _RefuseListed.__torch_function__.__code__
_MRO = type.__dict__["__mro__"]
_class_name = type.__dict__["__name__"].__get__  # a class's own name: a metaclass's __name__ property is not read


def type_name(cls: type) -> str:
    """The class's own name, as a plain str: a name set to a str subclass would run its methods wherever it is used."""
    return "".join((_class_name(cls),))


class Snapshot:
    """The attributes of the protected modules (and classes in them), to put back later.

    ``take()`` records every attribute of every loaded module under the protected prefixes, of
    the classes those modules define (``torch.Tensor``) and of the grader's own objects they hold
    (an exercise's ``forbidden``), and every function's ``__code__`` and ``__defaults__``;
    ``restore()`` puts back every recorded attribute that was rebound or deleted since, and the
    ``sys.modules`` entries.
    Restoring compares identities only, so it costs a few milliseconds.
    """

    def __init__(self, prefixes: Iterable[str] = PROTECTED_MODULES):
        self._prefixes = tuple(prefixes)
        self._modules: dict[str, types.ModuleType] = {}
        self._namespaces: list[tuple[object, dict[str, object]]] = []
        self._code: list[tuple[types.FunctionType, types.CodeType, object, object]] = []

    @property
    def taken(self) -> bool:
        return bool(self._namespaces)

    def _protected(self, name: str) -> bool:
        return any(name == p or name.startswith(p + ".") for p in self._prefixes)

    def take(self) -> Snapshot:
        self._modules = {n: m for n, m in list(sys.modules.items()) if m is not None and self._protected(n)}
        seen: set[int] = set()
        self._namespaces, self._code = [], []
        for module in self._modules.values():
            self._record(module, seen)
        return self

    def _record(self, obj: object, seen: set[int]) -> None:
        if id(obj) in seen:
            return
        seen.add(id(obj))
        namespace = dict(vars(obj))
        self._namespaces.append((obj, namespace))
        for value in namespace.values():
            kind = type(value)  # not isinstance: that would run a deprecated object's __class__ property
            if kind is types.FunctionType:
                self._code.append((value, value.__code__, value.__defaults__, value.__kwdefaults__))
            elif issubclass(kind, type) and self._protected(str(vars(value).get("__module__", ""))):
                self._record(value, seen)
            elif str(vars(kind).get("__module__", "")).startswith("autograde.") and "__dict__" in dir(kind):
                self._record(value, seen)  # an object of the grader's own, such as an Exercise

    def restore(self) -> list[str]:
        """Put everything back; returns what had been changed (for the audit)."""
        changed: list[str] = []
        for name, module in self._modules.items():
            if sys.modules.get(name) is not module:
                sys.modules[name] = module
                changed.append(f"sys.modules[{name!r}]")
        for obj, saved in self._namespaces:
            # Names added since are left alone: imports add submodules (numpy.ma) as attributes.
            current = vars(obj)
            label = getattr(obj, "__name__", "?")
            for key, value in saved.items():
                if current.get(key, _MISSING) is not value:
                    _set(obj, key, value)
                    changed.append(f"{label}.{key}")
        for function, code, defaults, kwdefaults in self._code:
            if function.__code__ is not code or function.__defaults__ is not defaults \
                    or function.__kwdefaults__ is not kwdefaults:
                function.__code__, function.__defaults__, function.__kwdefaults__ = code, defaults, kwdefaults
                changed.append(f"{function.__module__}.{function.__qualname__}.__code__")
        return changed


_MISSING = object()


def _set(obj: object, key: str, value: object) -> None:
    with contextlib.suppress(AttributeError, TypeError):  # a few C types refuse; nothing to restore there
        if isinstance(obj, type):
            type.__setattr__(obj, key, value)
        else:  # past a frozen dataclass's own __setattr__, as the student's change went
            object.__setattr__(obj, key, value)
