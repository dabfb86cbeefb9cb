"""A memory cgroup (v1 or v2) for one grading slot's sandbox, where the machine lets the grader make one.

It holds the slot's pristine process and its notebook; once warm, its limit is what it uses plus the
notebook's allowance, so the kernel stops a notebook however many processes it spreads its memory over.
Without a cgroup the runner's address-space rlimit is the limit (`notebook_sandbox.isolation.limit_resources`).
"""
from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

__all__ = ["MemoryCgroup"]

_V1_FILES = {"limit": "memory.limit_in_bytes", "usage": "memory.usage_in_bytes", "events": "memory.oom_control"}
_V2_FILES = {"limit": "memory.max", "usage": "memory.current", "events": "memory.events"}


class MemoryCgroup:
    """A child of this process's memory cgroup (see the module docstring)."""

    def __init__(self, path: Path, files: dict[str, str]):
        self.path, self._files = path, files

    @classmethod
    def create(cls, name: str) -> MemoryCgroup | None:
        """A new cgroup ``name`` under this process's own, or None where that is not possible."""
        for parent, files in _candidates():
            path = parent / name
            try:
                path.mkdir()
            except OSError:
                continue
            if (path / files["limit"]).exists():
                return cls(path, files)
            with contextlib.suppress(OSError):
                path.rmdir()
        return None

    @classmethod
    def remove_named(cls, prefix: str) -> None:
        """Remove this process's child cgroups whose names start with ``prefix`` (see `remove`)."""
        for parent, files in _candidates():
            for path in parent.glob(prefix + "*"):
                cls(path, files).remove()

    @property
    def procs(self) -> Path:
        """Write a process id here to move that process in (its later children follow)."""
        return self.path / "cgroup.procs"

    def limit_above_usage(self, extra_bytes: int) -> None:
        usage = int((self.path / self._files["usage"]).read_text())
        (self.path / self._files["limit"]).write_text(str(usage + extra_bytes))

    def oom_kills(self) -> int:
        """Processes the kernel has killed for going over the limit, so far."""
        for line in (self.path / self._files["events"]).read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def remove(self, timeout: float = 5.0) -> None:
        """Remove the cgroup once its processes are gone (waits up to ``timeout`` s for them)."""
        stop = time.monotonic() + timeout
        while True:
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() > stop:
                    return
                time.sleep(0.05)


def _candidates() -> list[tuple[Path, dict[str, str]]]:
    """This process's memory cgroup directories, v2 and v1, with their file names."""
    found = []
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        _, controllers, relative = line.split(":", 2)
        relative = relative.lstrip("/")
        if controllers == "":
            for mount in (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified")):
                if "memory" in _read(mount / relative / "cgroup.subtree_control").split():
                    found.append((mount / relative, _V2_FILES))
        elif "memory" in controllers.split(","):
            found.append((Path("/sys/fs/cgroup/memory") / relative, _V1_FILES))
    return [(p, f) for p, f in found if os.access(p, os.W_OK)]


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""
