"""The student's side of grading: one process per notebook (forked by `notebook_sandbox.zygote`) that runs the cells
it is sent and, when asked, builds the student's object as a plan says (`notebook_sandbox.building`), calls it and
returns the output as plain data (`notebook_sandbox.wire`). It checks nothing and holds no answer. What the
student's code prints goes into ``stdout``, cut at ``output_chars``; its fds 1 and 2 lead nowhere.

Requests → replies (`notebook_sandbox.channel`; each reply repeats its request's ``id``)::

    {"op": "exec", "index", "source", "output_chars"} → {"status": "ok" | "error", "stdout", "error"}
    {"op": "evaluate", "name", "plan", "call", "weights", "dtype", "grad", "seed", "watch", "allowed",
     "output_chars"} → {"outcome": {...}, "stdout"} | {"failed": why, "stdout"}
    {"op": "unlock", "sources": [[module, source], ...]} → {"status", "error"}  (the checks' models' code)
"""
from __future__ import annotations

import builtins
import contextlib
import importlib
import io
import linecache
import sys

import torch

from . import wire
from .building import build, module_parameters
from .channel import Channel, ChannelClosed
from .evaluation import CheckFailed, describe_error, evaluate, student_traceback
from .inputs import Call
from .words import _

__all__ = ["serve"]

TEXT_LIMIT = 20000
"""Characters kept of an error message or a traceback."""


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


@contextlib.contextmanager
def _captured(limit: int):
    out = _Capped(limit)
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        yield out


def serve(channel: Channel) -> None:
    """Say ready, then answer requests until the grader closes the channel."""
    namespace: dict = {"__name__": "__main__", "__builtins__": builtins}
    handlers = {"exec": _execute, "evaluate": _evaluate, "unlock": _unlock}
    channel.send({"ready": True})
    while True:
        try:
            request, blobs = channel.receive()
        except ChannelClosed:
            return
        reply, reply_blobs = handlers[request["op"]](request, blobs, namespace)
        channel.send({"id": request.get("id"), **reply}, reply_blobs)


def _execute(request: dict, blobs: list[bytes], namespace: dict) -> tuple[dict, list[bytes]]:
    source, filename = request["source"], f"<cell {request['index']}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)  # the student's lines in tracebacks
    status, error = "ok", ""
    with _captured(request["output_chars"]) as out:
        try:
            exec(compile(source, filename, "exec", dont_inherit=True), namespace)  # not runner.py's __future__ imports
        except BaseException as exc:  # SystemExit and KeyboardInterrupt from a cell are its failure too
            status, error = "error", student_traceback(exc)
    return {"status": status, "stdout": out.getvalue(), "error": error[:TEXT_LIMIT]}, []


def _unlock(request: dict, blobs: list[bytes], namespace: dict) -> tuple[dict, list[bytes]]:
    """Load tfm_ref's real code for the modules named, in order, then the checks' models made of it."""
    try:
        for name, source in request["sources"]:
            module = importlib.import_module(name)
            exec(compile(source, module.__file__, "exec"), vars(module))
            package = sys.modules["tfm_ref"]
            for exported in getattr(module, "__all__", ()):
                if hasattr(package, exported):
                    setattr(package, exported, getattr(module, exported))
        importlib.import_module("notebook_sandbox.check_models")
    except Exception as error:
        return {"status": "error", "error": describe_error(error)[:TEXT_LIMIT]}, []
    return {"status": "ok", "error": ""}, []


def _evaluate(request: dict, blobs: list[bytes], namespace: dict) -> tuple[dict, list[bytes]]:
    arguments = wire.decode(request["call"], blobs, modules=True)
    call = Call(*arguments["args"], **arguments["kwargs"])
    weights = wire.decode(request["weights"], blobs)
    dtype, name = wire.DTYPES[request["dtype"]], request["name"]
    torch.set_num_threads(1)  # the slot is given one core
    with _captured(request["output_chars"]) as out:
        if not callable(namespace.get(name)):
            if name not in namespace:
                why = f"name {name!r} is not defined (did the cell that defines it run without error?)"
            else:
                why = f"`{name}` should be a function or class, got {type(namespace[name]).__name__}"
            return {"failed": why, "stdout": out.getvalue()}, []
        impl = namespace[name]
        try:
            outcome = evaluate(lambda: build(request["plan"], impl, weights, dtype), call, grad=request["grad"],
                               seed=request["seed"], parameters=module_parameters, watch=tuple(request["watch"]),
                               allowed=tuple(map(tuple, request["allowed"])))
            reply_blobs: list[bytes] = []
            encoded = {"output": wire.encode(outcome.output, reply_blobs, path=_("your output")),
                       "grads": wire.encode(outcome.grads, reply_blobs, path=_("the gradients")),
                       "error": _text(outcome.error), "error_type": _text(outcome.error_type),
                       "trace": outcome.trace[:TEXT_LIMIT], "changed": outcome.changed,
                       "delegated": outcome.delegated}
        except (CheckFailed, wire.WireError) as failure:
            return {"failed": str(failure)[:TEXT_LIMIT], "stdout": out.getvalue()}, []
    return {"outcome": encoded, "stdout": out.getvalue()}, reply_blobs


def _text(value: str | None) -> str | None:
    return None if value is None else value[:TEXT_LIMIT]
