"""The sandbox: the executor worker runs under bubblewrap (``bwrap``).

Inside: no network (all namespaces unshared), a read-only view of the system, of Python and
of the two packages it needs (``autograde``, ``tfm_ref``), an empty ``/tmp``, and nothing else
of the course: not ``solutions/``, not the gradebook, not the submissions (notebooks reach the
worker through its stdin). Time and memory are limited per cell by the executor.

Without ``bwrap`` the worker runs unsandboxed and every row gets the flag ``unsandboxed``.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

__all__ = ["bwrap_command", "Worker", "sandbox_available"]

_PACKAGES = ("autograde", "tfm_ref")


def sandbox_available() -> bool:
    return shutil.which("bwrap") is not None


def bwrap_command(argv: list[str]) -> list[str]:
    """``argv`` wrapped in bwrap with the read-only binds the worker needs."""
    root = Path(__file__).resolve().parent.parent
    # The empty /tmp first: binds are stacked in order, and Python or the course may live under /tmp.
    binds: list[str] = ["--tmpfs", "/tmp"]
    for path in ("/usr", "/bin", "/lib", "/lib64", "/lib32", "/etc", "/sbin"):
        binds += ["--ro-bind-try", path, path]
    for path in {sys.base_prefix, sys.prefix, os.path.dirname(os.path.realpath(sys.executable))}:
        binds += ["--ro-bind-try", path, path]
    for package in _PACKAGES:
        binds += ["--ro-bind", str(root / package), str(root / package)]
    return ["bwrap", *binds, "--proc", "/proc", "--dev", "/dev",
            "--unshare-all", "--die-with-parent", "--new-session", "--chdir", "/tmp",
            "--setenv", "HOME", "/tmp", "--setenv", "MPLBACKEND", "Agg", "--setenv", "OMP_NUM_THREADS", "1",
            *argv]


class Worker:
    """One warm executor process (sandboxed when possible); ``run(job)`` → per-cell results.

    If the worker itself dies (it should not: student code runs in its forked children), the
    next `run` starts a new one.
    """

    def __init__(self, sandboxed: bool | None = None):
        self.sandboxed = sandbox_available() if sandboxed is None else sandboxed
        self._process: subprocess.Popen | None = None

    def _start(self) -> subprocess.Popen:
        argv = [sys.executable, "-m", "autograde.executor"]
        env = {**os.environ, "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
        process = subprocess.Popen(bwrap_command(argv) if self.sandboxed else argv, stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
                                   cwd="/tmp")
        ready = process.stdout.readline()
        if not ready.startswith('{"ready"'):
            process.kill()
            raise RuntimeError("the grading worker did not start (is the package importable? is bwrap usable?)")
        return process

    def run(self, job: dict) -> list[dict]:
        for _ in range(2):
            if self._process is None or self._process.poll() is not None:
                self._process = self._start()
            try:
                self._process.stdin.write(json.dumps(job) + "\n")
                self._process.stdin.flush()
                line = self._process.stdout.readline()
                if line:
                    return json.loads(line)["results"]
            except (BrokenPipeError, json.JSONDecodeError):
                pass
            self.close()
        raise RuntimeError("the grading worker died twice on the same notebook")

    def close(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.wait()
            self._process = None

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
