"""The sandbox one grading slot runs notebooks in, seen from the trusted side.

A `Sandbox` is a bubblewrap container around the slot's pristine process (`notebook_sandbox.zygote`): no network,
read-only system, Python and staged tree (the grader writes it: `autograde.sandbox_tree`), a clean environment, as
``nobody`` when the grader is root. `Sandbox.spawn` gives a fresh `Runner` per notebook; `Limits` say what it may use.
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from .cgroups import MemoryCgroup
from .channel import BadMessage, Channel
from .words import language
from .zygote import ENV, GRADING

__all__ = ["Limits", "Sandbox", "SandboxError", "Runner", "sandbox_available", "remove_leftovers", "leftover_prefix",
           "log_tail", "COURSE_PACKAGES"]

SYSTEM = ("/usr", "/bin", "/lib", "/lib64", "/lib32", "/sbin")
ETC = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/nsswitch.conf", "/etc/passwd",
       "/etc/group", "/etc/localtime")
"""What of /etc the runner sees: the dynamic loader's files and user names, no secrets."""
SANDBOX_USER = (65534, 65534)
"""``nobody``: the sandbox's user when the grader runs as root."""


COURSE_PACKAGES = ("autograde", "notebook_sandbox", "intake", "class_report", "tfm_ref", "tfm_lab", "tfm_widgets",
                   "editions")
"""The course's packages: a copy installed in site-packages (a non-editable install) is hidden in the sandbox,
which imports the staged tree alone."""


def _installed_copies() -> list[str]:
    import site

    return [os.path.join(folder, name) for folder in site.getsitepackages() for name in COURSE_PACKAGES
            if os.path.isdir(os.path.join(folder, name))]


class SandboxError(RuntimeError):
    """The sandbox could not start, or stopped answering (not the student's doing)."""


def sandbox_available() -> bool:
    return shutil.which("bwrap") is not None


def log_tail(log: IO[bytes], chars: int = 2000) -> str:
    """The end of what a process wrote to ``log`` (a temporary file), as text."""
    log.seek(0)
    return log.read().decode(errors="replace")[-chars:].strip() or "(no output)"


def leftover_prefix(pid: int) -> str:
    """How the cgroup and the staging folder of process ``pid``'s sandboxes are named."""
    return f"autograde-{pid}-"


def remove_leftovers(pid: int) -> None:
    """Remove the cgroups and staging folders of process ``pid``'s sandboxes, left when it was killed."""
    MemoryCgroup.remove_named(leftover_prefix(pid))
    for stage in Path(tempfile.gettempdir()).glob(leftover_prefix(pid) + "*"):
        shutil.rmtree(stage, ignore_errors=True)


@dataclass(frozen=True)
class Limits:
    """What one notebook may use."""

    cell_timeout: float = 30.0  # seconds per cell (a test cell: all its checks)
    memory_mb: int = 2048  # above what the warm process already uses
    processes: int = 64  # tasks at once: threads, since no new process may start (a seccomp filter)
    tmp_mb: int = 64  # /tmp and /dev/shm, each; also the largest file it may write
    notebook_mb: float = 20.0  # the submitted file
    output_chars: int = 8000  # kept of one cell's printed output
    notebook_output_chars: int = 200_000  # kept of the whole notebook's
    message_chars: int = 20_000  # kept of an error message or traceback

    @property
    def notebook_timeout(self) -> float:
        return 6 * self.cell_timeout


class Runner:
    """One notebook's runner: each request has a fresh unguessable id, and a reply counts only if it answers it."""

    def __init__(self, number: int, channel: Channel, assignment: str):
        self.number, self.channel, self.assignment = number, channel, assignment
        self.unlocked = False  # has it been sent tfm_ref's code for the checks' models (`autograde.sandbox_tree`)?

    def request(self, header: dict, blobs: list[bytes], deadline: float) -> tuple[dict, list[bytes]]:
        self._nothing_unasked()
        request_id = secrets.token_hex(8)
        self.channel.send({**header, "id": request_id}, blobs, deadline)
        reply, reply_blobs = self.channel.receive(deadline)
        if reply.get("id") != request_id:
            raise BadMessage("a reply to another request than the one just sent (forged or out of order)")
        self._nothing_unasked()  # more right behind the reply: charged to the request that caused it
        return reply, reply_blobs

    def execute(self, index: int, source: str, deadline: float, output_chars: int) -> dict:
        """Run one cell; its reply ``{"id", "status", "stdout", "error"}`` (shape checked)."""
        reply, _ = self.request({"op": "exec", "index": index, "source": source, "output_chars": output_chars}, [],
                                deadline)
        if set(reply) != {"id", "status", "stdout", "error"} or reply["status"] not in ("ok", "error") \
                or type(reply["stdout"]) is not str or type(reply["error"]) is not str:
            raise BadMessage("a malformed reply to a cell")
        return reply

    def _nothing_unasked(self) -> None:
        if self.channel.pending():
            raise BadMessage("a message nobody asked for (a forged or duplicated reply?)")


class Sandbox:
    """One slot's container (see the module docstring): `launch`, `wait_ready`, then `spawn`/`end`."""

    def __init__(self, limits: Limits, tree: Path, name: str = "slot"):
        if not sandbox_available():
            raise SandboxError("grading needs bubblewrap (the `bwrap` command): install the Debian package "
                               "`bubblewrap` (make test does it)")
        self.limits, self.tree, self.name = limits, tree, name
        self._process: subprocess.Popen | None = None
        self._control: socket.socket | None = None
        self._log = tempfile.TemporaryFile()
        self._stage: str | None = None
        self._spawned = 0
        self.cgroup: MemoryCgroup | None = None

    # ------------------------------------------------------------------ life cycle

    def launch(self) -> None:
        """Start the container; it warms up while the caller does something else."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.cgroup = MemoryCgroup.create(f"{leftover_prefix(os.getpid())}{self.name}-{secrets.token_hex(3)}")
        command = [sys.executable, "-m", "notebook_sandbox.launcher"]
        if self.cgroup:
            command += ["--cgroup", str(self.cgroup.procs)]
        binds = self._binds()
        if os.geteuid() == 0:
            command += ["--user", "%d:%d" % SANDBOX_USER]
            binds = self._staged(binds, command)
        command += ["--", *self._bwrap(binds), sys.executable, "-m", "notebook_sandbox.zygote", str(theirs.fileno())]
        self._process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=self._log, pass_fds=[theirs.fileno()], cwd="/",
                                         env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                                              "PYTHONPATH": str(Path(__file__).resolve().parent.parent)})
        theirs.close()
        self._control = ours

    def wait_ready(self, timeout: float = 300.0) -> None:
        reply = self._receive(timeout, "start")
        if not reply.get("ready"):
            raise SandboxError(f"the sandbox said {reply!r} instead of ready")
        if self.cgroup:
            self.cgroup.limit_above_usage(self.limits.memory_mb * 2**20)

    def start(self, timeout: float = 300.0) -> Sandbox:
        self.launch()
        self.wait_ready(timeout)
        return self

    def close(self) -> None:
        if self._control is not None:
            self._control.close()
            self._control = None
        if self._process is not None:
            self._process.kill()
            self._process.wait()
            self._process = None
        if self.cgroup:
            self.cgroup.remove()
            self.cgroup = None
        if self._stage:
            shutil.rmtree(self._stage, ignore_errors=True)  # empty folders: the binds lived in the launcher only
            self._stage = None

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ runners

    def spawn(self, assignment: str, timeout: float = 60.0) -> Runner:
        """A fresh runner for a notebook of ``assignment``, ready for requests."""
        self._spawned += 1
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        limits = {"memory_mb": self.limits.memory_mb, "processes": self.limits.processes,
                  "tmp_mb": self.limits.tmp_mb, "cgroup": self.cgroup is not None}
        try:  # the notebook's language: what the runner says is in it
            self._command({"op": "spawn", "id": self._spawned, "assignment": assignment, "limits": limits,
                           "language": language()}, timeout, (theirs.fileno(),))
        finally:
            theirs.close()
        runner = Runner(self._spawned, Channel(ours), assignment)
        try:
            hello, _ = runner.channel.receive(time.monotonic() + timeout)
        except Exception as error:
            status = self.end(runner)
            raise SandboxError(f"a runner did not start ({status}): {log_tail(self._log)}") from error
        if hello != {"ready": True}:
            self.end(runner)
            raise SandboxError("a runner did not say ready")
        return runner

    def end(self, runner: Runner, timeout: float = 30.0) -> str:
        """Kill the runner and everything it started; how the runner ended, in words."""
        runner.channel.close()
        return str(self._command({"op": "end", "id": runner.number}, timeout).get("status"))

    def oom_kills(self) -> int:
        return self.cgroup.oom_kills() if self.cgroup else 0

    # ------------------------------------------------------------------ helpers

    def _command(self, command: dict, timeout: float, fds: tuple[int, ...] = ()) -> dict:
        """Send the zygote ``command`` (and ``fds``: a new runner's channel); its reply, which repeats the id."""
        try:
            socket.send_fds(self._control, [json.dumps(command).encode()], fds)
        except OSError as error:
            raise SandboxError(f"the sandbox stopped taking commands ({error})") from error
        reply = self._receive(timeout, command["op"])
        if reply.get("id") != command["id"]:
            raise SandboxError("the sandbox answered another command")
        return reply

    def _receive(self, timeout: float, what: str) -> dict:
        self._control.settimeout(timeout)
        try:
            message = self._control.recv(65536)
        except TimeoutError:
            raise SandboxError(f"the sandbox did not answer ({what}) within {timeout:g} s: "
                               f"{log_tail(self._log)}") from None
        except OSError as error:
            raise SandboxError(f"the sandbox's control socket failed ({error})") from None
        if not message:
            raise SandboxError(f"the sandbox stopped ({what}): {log_tail(self._log)}")
        return json.loads(message)

    def _binds(self) -> list[tuple[str, str]]:
        """Every (host path, sandbox path) shown read-only besides the system's: this Python and its environment,
        and the staged tree at ``/grading``; never the checkout's own packages."""
        paths = {sys.base_prefix, sys.prefix, os.path.dirname(os.path.realpath(sys.executable))}
        paths = sorted(p for p in paths if os.path.exists(p))
        paths = [p for p in paths if not any(p.startswith(other + os.sep) for other in paths)]  # nested: covered
        return [(p, p) for p in paths] + [(str(self.tree), GRADING)]

    def _staged(self, binds: list[tuple[str, str]], command: list[str]) -> list[tuple[str, str]]:
        """As root: each bind's source is first mounted by the launcher under a folder ``nobody`` may enter."""
        self._stage = tempfile.mkdtemp(prefix=leftover_prefix(os.getpid()))
        os.chmod(self._stage, 0o755)
        staged = []
        for index, (path, inside) in enumerate(binds):
            target = os.path.join(self._stage, str(index))
            os.mkdir(target) if os.path.isdir(path) else open(target, "w").close()
            command += ["--bind", f"{path}:{target}"]
            staged.append((target, inside))
        return staged

    def _bwrap(self, binds: list[tuple[str, str]]) -> list[str]:
        args = [shutil.which("bwrap"), "--tmpfs", "/tmp"]  # first: binds stack in order, and Python may live under /tmp
        for path in (*SYSTEM, *ETC):
            args += ["--ro-bind-try", path, path]
        for source, target in binds:
            args += ["--ro-bind", source, target]
        for hidden in _installed_copies():
            args += ["--tmpfs", hidden]
        args += ["--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev", "--remount-ro", "/",
                 "--unshare-all", "--die-with-parent", "--new-session", "--chdir", "/tmp", "--clearenv"]
        # PYTORCH_JIT=0: torch.jit.script gives back the Python function, which the delegation watch sees run
        for key, value in {**ENV, "PYTORCH_JIT": "0", "PYTHONPATH": os.path.join(GRADING, "runtime")}.items():
            args += ["--setenv", key, value]
        return args
