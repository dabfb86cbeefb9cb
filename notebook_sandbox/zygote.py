"""The pristine process (``python -m notebook_sandbox.zygote CONTROL_FD``, one per slot) that forks a fresh, isolated
runner per notebook: warmed once, it only forks, so every runner starts warm from the same state. A *warden*
enters fresh namespaces and shows only the assignment's tfm_ref; the *runner* is PID 1 below it::

    {"op": "spawn", "id": 7, "assignment": "ch01_attention", "limits": {...}, "language": "zh_CN"}
                                                            + data fd → {"id": 7}
    {"op": "end", "id": 7}                                  → {"id": 7, "status": "signal SIGKILL"}
"""
from __future__ import annotations

import json
import os
import signal
import socket
import sys

from .words import ENVIRONMENT

__all__ = ["main"]

ENV = {"HOME": "/tmp", "TMPDIR": "/tmp", "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
       "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
"""The runner's whole environment (and the zygote's), with the notebook's language as `ENVIRONMENT`."""
GRADING = "/grading"
"""Where the sandbox shows the staged folder (`autograde.sandbox_tree`): this module runs from it."""
TREE = os.path.join(GRADING, "tfm")
"""Where a runner sees its assignment's tfm_ref."""


def describe_status(code: int) -> str:
    """The warden's exit code (the runner's fate, see `_warden`) in words."""
    if code >= 128:
        try:
            return f"signal {signal.Signals(code - 128).name}"
        except ValueError:
            return f"signal {code - 128}"
    return f"exit status {code}"


def _warm_up() -> None:
    """Import and exercise what a runner uses once, so that each forked runner starts warm."""
    import torch

    torch.set_num_threads(1)  # one core per slot; keeps OpenMP idle so that fork stays safe
    from . import runner  # noqa: F401  (imported here, before any student code, like everything else)
    from .building import build, module_parameters
    from .evaluation import evaluate
    from .inputs import Call
    from .words import languages, translations

    for name in languages():  # each runner finds the checks' words read
        translations(name)
    plan = {"kind": "module", "kwargs": {"in_features": 4, "out_features": 3}, "load": True, "training": False}
    weights = torch.nn.Linear(4, 3).state_dict()
    evaluate(lambda: build(plan, torch.nn.Linear, weights, torch.float32), Call(torch.randn(2, 4)), grad=True,
             seed=0, parameters=module_parameters, watch=("_softmax",))


def _runner(data_fd: int, limits: dict, language: str) -> None:
    """PID 1 of the notebook's namespaces: drop everything, then serve the grader's requests."""
    from . import isolation
    from .channel import Channel
    from .runner import serve

    isolation.drop_privileges(signal.SIGKILL)
    isolation.refuse_processes_and_hidden_memory()
    isolation.limit_resources(processes=limits["processes"], open_files=256, file_mb=limits["tmp_mb"],
                              memory_mb=None if limits["cgroup"] else limits["memory_mb"])
    isolation.close_other_fds(keep=data_fd)
    os.environ.clear()
    os.environ.update(ENV)
    os.environ[ENVIRONMENT] = language
    os.chdir("/tmp")
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    sys.path.insert(0, TREE)
    serve(Channel(socket.socket(fileno=data_fd)))


def _warden(data_fd: int, assignment: str, limits: dict, language: str) -> None:
    """Enter fresh namespaces, show the assignment's tree, fork the runner, wait for it; SIGTERM kills the runner."""
    from . import isolation

    # Dumpable again, to write its own uid map. Its runner still cannot ptrace it or read its
    # /proc files: the warden keeps capabilities in the new user namespace that the runner lacks.
    isolation.set_dumpable(True)
    isolation.enter_fresh_namespaces(limits["tmp_mb"])
    trees = os.path.join(GRADING, "trees")
    if assignment not in os.listdir(trees):
        raise ValueError(f"no staged tree for assignment {assignment!r}")
    isolation.show_only(os.path.join(trees, assignment), TREE, hide=trees)
    pid = os.fork()
    if pid == 0:
        try:
            _runner(data_fd, limits, language)
        finally:
            os._exit(0)
    os.close(data_fd)
    signal.signal(signal.SIGTERM, lambda *_: os.kill(pid, signal.SIGKILL))
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    _, status = os.waitpid(pid, 0)
    os._exit(128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else min(os.WEXITSTATUS(status), 127))


def _spawn(control: socket.socket, data_fd: int, assignment: str, limits: dict, language: str) -> int:
    # SIGTERM stays blocked in the warden until its handler is in place: ending a notebook at
    # once must kill the runner, never orphan it.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    pid = os.fork()
    if pid == 0:
        try:
            control.close()
            _warden(data_fd, assignment, limits, language)
        except BaseException as error:
            print(f"notebook_sandbox.zygote: could not isolate a runner: {error}", file=sys.stderr, flush=True)
        finally:
            os._exit(126)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    os.close(data_fd)
    return pid


def _end(pid: int) -> str:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    _, status = os.waitpid(pid, 0)
    return describe_status(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))


def main(control_fd: int) -> None:
    control = socket.socket(fileno=control_fd)
    _warm_up()
    from .isolation import set_dumpable

    set_dumpable(False)  # runners cannot ptrace this process nor read its memory
    control.send(json.dumps({"ready": True}).encode())
    wardens: dict[int, int] = {}
    while True:
        message, fds, _, _ = socket.recv_fds(control, 65536, 1)
        if not message:
            return
        command = json.loads(message)
        reply = {"id": command["id"]}
        if command["op"] == "spawn":
            wardens[command["id"]] = _spawn(control, fds[0], command["assignment"], command["limits"],
                                            command["language"])
        elif command["op"] == "end":
            reply["status"] = _end(wardens.pop(command["id"]))
        control.send(json.dumps(reply).encode())


if __name__ == "__main__":
    main(int(sys.argv[1]))
