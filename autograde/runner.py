"""The student's side of grading: run a notebook's cells, answer requests to run the student's code.

A runner is one process per notebook (forked by `autograde.zygote` into fresh namespaces).
It never checks anything: it runs the cells the grader sends, and when the grader asks, calls
the student's function on the inputs it was given and returns what came out, as plain data
(`autograde.wire`). The grader (`autograde.session`) computes the reference, compares and scores.

Requests and replies (`autograde.channel` messages; every reply repeats its request's ``id``):

    {"op": "exec", "index": 3, "source": "...", "output_chars": 8001}
        → {"status": "ok" | "error", "stdout": "...", "error": "traceback of the student's lines"}
    {"op": "evaluate", "key": "ch01_attention.softmax", "name": "softmax", "dims": ..., "call": ...,
     "weights": ..., "dtype": "float32", "grad": false, "seed": 123, "output_chars": 8001}
        → {"outcome": {"output": ..., "grads": ..., "error", "error_type", "trace"}, "stdout": "..."}
        | {"invalid": "why the name is not a function or class to check", "stdout": "..."}
        | {"failed": "a check failure found while running (no autograd path, an output that is not plain
                      data)", "stdout": "..."}

Everything the student's code prints goes into ``stdout``, cut at ``output_chars`` characters;
its file descriptors 1 and 2 lead nowhere, and the channel is not them.
"""
from __future__ import annotations

import builtins
import gc
import io
import linecache
import os
import sys
import traceback

import torch

from . import wire
from .channel import Channel, ChannelClosed
from .checking import Case, LocalCandidate, get_exercise, guard_for, protect
from .evaluation import CheckFailed, Outcome, describe_error, plain_error
from .inputs import Call
from .integrity import ForbiddenCall, other_threads, type_name
from .lockdown import SIGNAL_TOOLS, hold_signals, release_signals

__all__ = ["serve", "TEXT_LIMIT"]

TEXT_LIMIT = 20000
"""Characters kept of an error message or a traceback."""
# Bound as the runner loads, before any student code: what runs after a check's guard is left may not look anything
# up where a cell, or the checked code itself, could have put its own (sys.setprofile, builtins.setattr, os.getpid).
_set_num_threads = torch.set_num_threads
_settrace, _setprofile, _getpid, _open = sys.settrace, sys.setprofile, os.getpid, open
_builtins = vars(builtins)
_BUILTINS = dict(_builtins)  # put back after each check: the checked code may have replaced one (a dict store)


class _Capped(io.StringIO):
    """Printed output, truncated to ``limit`` characters."""

    def __init__(self, limit: int):
        super().__init__()
        self.limit = limit

    def write(self, text: str) -> int:
        room = self.limit - self.tell()
        if room > 0:
            super().write(str(text)[:room])
        return len(text)


class _captured:
    """``with _captured(limit) as out``: stdout and stderr into ``out``. The streams are swapped by plain stores, in
    code of this module: contextlib's redirect would call the builtin setattr, and its own class's methods, after
    the check."""

    def __init__(self, limit: int) -> None:
        self.out, self.saved = _Capped(limit), (sys.stdout, sys.stderr)

    def __enter__(self) -> io.StringIO:
        sys.stdout = sys.stderr = self.out
        return self.out

    def __exit__(self, *exc: object) -> None:
        sys.stdout, sys.stderr = self.saved


def serve(channel: Channel) -> None:
    """Say ready, then answer requests until the grader closes the channel."""
    namespace: dict = {"__name__": "__main__", "__builtins__": builtins}
    # this frame's own names, bound before any student code: a cell, or a signal handler of one, may rebind a module's
    hold, release, signal_tools = hold_signals, release_signals, SIGNAL_TOOLS
    channel.send({"ready": True})
    patched = False  # has student code run since the protected namespaces were last put back?
    while True:
        try:
            request, blobs = channel.receive()
        except ChannelClosed:
            return
        if request.get("op") == "exec":
            channel.send({"id": request.get("id"), **_execute(request, namespace)})
            patched = True
            continue
        # Until the reply is sent no handler of the student's runs (it would run between any two steps of what follows,
        # unwatched), so signals are held first, before what a handler could undo is put back
        signals = hold(signal_tools)
        if patched:
            protect()  # best effort: undo the student's patching of torch and of the guard
            patched = False
        # Nor is anything of theirs freed (a finalizer would run unwatched, and could reach the reply): what their code
        # touched is held, and no cycle is collected.
        # A hook that a finalizer of theirs set before (when a cycle was collected between requests, say) is taken off
        # first: a guard puts back the hook it found, and this one would see the next outcome before it is sent.
        gc.disable()
        try:
            _unhook()
            reply, reply_blobs, held = _evaluate(request, blobs, namespace)
            _unhook()
            channel.send({"id": request.get("id"), **reply}, reply_blobs)
            del held  # now their finalizers may run,
            _unhook()  # and what they hooked is taken off
        finally:
            gc.enable()
            release(signals, signal_tools)


def _unhook() -> None:
    _settrace(None)
    _setprofile(None)


def _execute(request: dict, namespace: dict) -> dict:
    source, filename = request["source"], f"<cell {request['index']}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)  # the student's lines in tracebacks
    status, error = "ok", ""
    with _captured(request["output_chars"]) as out:
        try:
            exec(compile(source, filename, "exec", dont_inherit=True), namespace)  # not runner.py's __future__ imports
        except BaseException as exc:  # SystemExit and KeyboardInterrupt from a cell are its failure too
            status, error = "error", _student_trace(exc)
        finally:
            _unhook()
    return {"status": status, "stdout": out.getvalue(), "error": error[:TEXT_LIMIT]}


def _student_trace(error: BaseException) -> str:
    try:
        frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename.startswith("<cell")]
        return "".join(traceback.format_list(frames) + [describe_error(error)]).rstrip()
    except Exception:  # a traceback that cannot be formatted still names the exception
        return describe_error(error)


def _last_pid() -> int | None:
    """The last thread or process id given out in the runner's own PID namespace (None outside a sandbox, where
    other processes share the count)."""
    if _getpid() != 1:
        return None
    try:
        with _open("/proc/sys/kernel/ns_last_pid") as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


def _evaluate(request: dict, blobs: list[bytes], namespace: dict) -> tuple[dict, list[bytes], list]:
    """The reply to an evaluate request, its blobs, and what of the student's is to be kept until it is sent."""
    exercise = get_exercise(request["key"])
    case = Case("", dtype=wire.DTYPES[request["dtype"]], grad=request["grad"])
    try:
        with guard_for(exercise)():  # decoding runs PyTorch's kernels, which a cell may have replaced (torch.library)
            arguments = wire.decode(request["call"], blobs, modules=True)
            dims, weights = wire.decode(request["dims"], blobs), wire.decode(request["weights"], blobs)
    except ForbiddenCall as refused:
        return {"failed": str(refused)[:TEXT_LIMIT], "stdout": ""}, [], [refused]
    call = Call(*arguments["args"], **arguments["kwargs"])
    name = request["name"]
    with _captured(request["output_chars"]) as out:
        try:
            if name not in namespace:
                raise NameError(f"name {name!r} is not defined (did the cell that defines it run without error?)")
            impl = namespace[name]
            if not callable(impl):
                return {"invalid": f"`{name}` should be a function or class, got {type_name(type(impl))}",
                        "stdout": out.getvalue()}, [], []
            running = other_threads()
            if running:
                raise ForbiddenCall(f"your notebook left a thread running ({', '.join(running)}), and code there would "
                                    "run beside the check, outside its guard. Stop (join) the threads a cell starts "
                                    "before it ends. This part earns nothing while one runs.")
            # one thread, as the slot is given one core: a pool of more that a cell asked for would start its
            # threads lazily, inside the check, where a new thread is refused
            _set_num_threads(1)
            started = _last_pid()
            outcome = LocalCandidate(impl).evaluate(exercise, case, call, dims, request["seed"], weights, sealed=True)
            _unhook()
            _builtins.update(_BUILTINS)
            if _last_pid() != started:  # the kernel's count of this sandbox's threads and processes moved
                raise ForbiddenCall("a thread or a process started in your notebook's sandbox during the check (your "
                                    "code's, or one a cell left running); code there runs outside the check's guard. "
                                    "This part earns nothing while it does.")
        except CheckFailed as failure:  # its traceback holds what the student's code touched
            return {"failed": str(failure)[:TEXT_LIMIT], "stdout": out.getvalue()}, [], [failure]
        except BaseException as error:  # the grader's refusals (a student's signal handler cannot run: held)
            outcome = Outcome(error=plain_error(error), error_type=type_name(type(error)), held=[error])  # no code of it
        finally:
            _unhook()
    # encoded under the guard (what could not be fails the check), or an exception's outcome, which holds no tensor:
    # nothing the student's code left behind changes it now
    output, grads, reply_blobs = outcome.sealed or (wire.encode(None, []), wire.encode([], []), [])
    encoded = {"output": output, "grads": grads, "error": _text(outcome.error), "error_type": _text(outcome.error_type),
               "trace": outcome.trace[:TEXT_LIMIT]}
    return {"outcome": encoded, "stdout": out.getvalue()}, reply_blobs, outcome.held


def _text(value: str | None) -> str | None:
    return None if value is None else value[:TEXT_LIMIT]
