"""The notebook executor: a warm worker that runs one notebook per forked child.

A kernel per notebook costs seconds (start, ``import torch``). Instead one worker process
per job slot imports torch, tfm_ref and every chapter's checks once, warms them up, records
the protected namespaces (`autograde.checking.SNAPSHOT`), and then, for each notebook, forks
a child that executes the cells in a fresh namespace and reports each cell as it finishes.

What goes wrong costs only the cells it touches: a cell that runs past ``cell_timeout``, or
that kills the child (``os._exit``, a segfault, the memory limit), is recorded as failed and
the notebook is run again from the start without it (at most ``MAX_RESTARTS`` times).

Before each test cell the child restores the protected namespaces and switches off any trace
or profile hook, so a student cell cannot change how the checks behave. Test cells report
only the exception's message: their source (hidden tests) never reaches a traceback.

Protocol (the worker is ``python -m autograde.executor``, normally inside the sandbox): one
JSON line per job on stdin ``{"cells": [{"source", "kind"}], "cell_timeout", "total_timeout",
"memory_mb"}``; one JSON line per job on stdout ``{"results": [{"status", "stdout", "error"}]}``.
``kind`` is ``student`` (the student's code), ``test`` (a test cell, restored from the source)
or ``locked`` (setup code from the source). ``status`` is ok / error / timeout / crashed / skipped.
"""
from __future__ import annotations

import contextlib
import io
import json
import linecache
import os
import resource
import select
import signal
import sys
import time
import traceback

__all__ = ["run_job", "serve", "MAX_RESTARTS"]

MAX_RESTARTS = 6
OUTPUT_LIMIT = 8000  # characters kept of a cell's printed output


class _Capped(io.StringIO):
    """stdout/stderr of a cell, truncated to OUTPUT_LIMIT characters."""

    def write(self, text: str) -> int:
        room = OUTPUT_LIMIT - self.tell()
        if room > 0:
            super().write(text[:room])
        return len(text)


def _student_trace(error: BaseException) -> str:
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename.startswith("<cell")]
    return "".join(traceback.format_list(frames) + traceback.format_exception_only(type(error), error)).rstrip()


def _run_cell(index: int, cell: dict, namespace: dict) -> dict:
    from autograde.checking import SNAPSHOT

    filename = f"<cell {index}>"
    if cell["kind"] == "student":
        # Show the student's own lines in their tracebacks (test cells stay unregistered).
        linecache.cache[filename] = (len(cell["source"]), None, cell["source"].splitlines(True), filename)
    else:
        sys.settrace(None)
        sys.setprofile(None)
        SNAPSHOT.restore()
    out = _Capped()
    status, error = "ok", ""
    try:
        code = compile(cell["source"], filename, "exec")
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            exec(code, namespace)
    except BaseException as exc:  # SystemExit and KeyboardInterrupt from a cell are its failure too
        status = "error"
        if cell["kind"] == "test":
            error = f"{type(exc).__name__}: {exc}" if type(exc).__name__ != "CheckFailed" else str(exc)
        else:
            error = _student_trace(exc)
    finally:
        sys.settrace(None)
        sys.setprofile(None)
    return {"status": status, "stdout": out.getvalue(), "error": error}


def _child(cells: list[dict], skip: set[int], write_fd: int, memory_mb: int) -> None:
    """Runs in the forked child: execute the cells, one JSON line per cell on ``write_fd``."""
    os.setsid()
    if memory_mb:
        with open("/proc/self/statm") as statm:
            current = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        limit = current + memory_mb * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 2**20, 64 * 2**20))
    namespace: dict = {"__name__": "__main__"}
    pipe = os.fdopen(write_fd, "w")
    for index, cell in enumerate(cells):
        if index in skip:
            continue
        pipe.write(json.dumps({"index": index, **_run_cell(index, cell, namespace)}) + "\n")
        pipe.flush()
    pipe.close()
    os._exit(0)


def _attempt(cells: list[dict], skip: set[int], results: list[dict], cell_timeout: float,
             deadline: float, memory_mb: int) -> int | None:
    """Fork a child and collect its results; the index of the cell that hung or killed it, if any."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        try:
            _child(cells, skip, write_fd, memory_mb)
        finally:
            os._exit(70)
    os.close(write_fd)
    pending = [i for i in range(len(cells)) if i not in skip]
    buffer = b""
    culprit, why = None, ""
    cell_started = time.monotonic()
    with os.fdopen(read_fd, "rb", buffering=0) as pipe:
        while pending:
            wait = min(cell_started + cell_timeout, deadline) - time.monotonic()
            ready = select.select([pipe], [], [], max(wait, 0))[0] if wait > 0 else []
            if not ready:
                culprit, why = pending[0], "timeout"
                break
            chunk = pipe.read(65536)
            if not chunk:
                culprit, why = pending[0], "crashed"
                break
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                result = json.loads(line)
                results[result.pop("index")] = result
                pending.pop(0)
                cell_started = time.monotonic()
    if culprit is not None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    if culprit is not None:
        message = (f"this cell ran longer than {cell_timeout:g} s (an infinite loop?) and was stopped"
                   if why == "timeout" else
                   f"the Python process died while running this cell ({_describe(status)}): os._exit, "
                   "a crash, or more memory than allowed")
        results[culprit] = {"status": why, "stdout": "", "error": message}
    return culprit


def _describe(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"signal {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exit status {os.WEXITSTATUS(status)}" if os.WIFEXITED(status) else "unknown status"


def run_job(job: dict) -> list[dict]:
    """Execute one notebook's cells (see the module docstring for ``job``)."""
    cells = job["cells"]
    results = [{"status": "skipped", "stdout": "", "error": "not run"} for _ in cells]
    deadline = time.monotonic() + job.get("total_timeout", 300)
    skip: set[int] = set()
    for _ in range(MAX_RESTARTS + 1):
        culprit = _attempt(cells, skip, results, job.get("cell_timeout", 30), deadline, job.get("memory_mb", 2048))
        if culprit is None or time.monotonic() >= deadline:
            break
        skip.add(culprit)
    return results


def _warm_up() -> None:
    """Import and exercise everything a notebook uses once, so each forked child starts warm."""
    import torch

    torch.set_num_threads(1)  # one core per worker; also keeps OpenMP idle so fork stays safe
    import autograde
    from autograde.checking import SNAPSHOT
    from autograde.exercises import load_all

    for chapter in load_all():
        for exercise in chapter.EXERCISES:
            exercise.run(exercise.reference, hidden=True, guarded=False, seed=0)
    SNAPSHOT.take()
    del autograde


def serve() -> None:
    """The worker loop: read jobs from stdin, write results to stdout, until stdin closes."""
    _warm_up()
    reply = sys.stdout
    sys.stdout = sys.stderr  # anything else printed must not corrupt the protocol
    reply.write(json.dumps({"ready": True}) + "\n")
    reply.flush()
    for line in sys.stdin:
        if line.strip():
            reply.write(json.dumps({"results": run_job(json.loads(line))}) + "\n")
            reply.flush()


if __name__ == "__main__":
    serve()
