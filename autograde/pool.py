"""The grading slots of one ``grade`` run, seen from the main process.

``jobs`` slot processes (`autograde.slot`) start together, each with its own sandbox; a slot
that cannot start its sandbox stops the whole run before anything is graded. Then each slot
takes the next submission from a shared queue. A slot that dies or stops answering costs the
submission it was grading (its row is made by ``fallback`` with the flag ``grader-crashed``)
and is started again.
"""
from __future__ import annotations

import json
import os
import queue
import select
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator

from tqdm import tqdm

from notebook_sandbox.container import log_tail, remove_leftovers

__all__ = ["SlotPool", "Slot", "SlotError"]


class SlotError(RuntimeError):
    """A slot could not start (its sandbox, usually), or died."""


class Slot:
    """One slot process: a JSON line out, a JSON line back, each with a deadline."""

    def __init__(self, config: dict):
        self.config = config
        self.log = tempfile.TemporaryFile()
        self.process: subprocess.Popen | None = None
        self._buffer = b""

    def start(self) -> None:
        self.process = subprocess.Popen([sys.executable, "-m", "autograde.slot"], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=self.log)
        self._send(self.config)

    def wait_ready(self, timeout: float) -> None:
        reply = self._receive(timeout)
        if not reply.get("ready"):
            raise SlotError(str(reply.get("error") or reply))

    def grade(self, task: dict, timeout: float) -> dict:
        self._send(task)
        return self._receive(timeout)

    def close(self, grace: float = 15.0) -> None:
        """Stop the slot: its input ends, so it closes its sandbox and exits; killed after
        ``grace`` seconds, what its sandbox left on the host is removed here."""
        if self.process is None:
            return
        try:
            self.process.stdin.close()
            self.process.wait(grace)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait()
        remove_leftovers(self.process.pid)
        self.process = None
        self._buffer = b""

    def _send(self, message: dict) -> None:
        try:
            self.process.stdin.write(json.dumps(message).encode() + b"\n")
            self.process.stdin.flush()
        except OSError as error:
            raise SlotError(f"the slot is gone ({error})") from None

    def _receive(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        out = self.process.stdout.fileno()
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([out], [], [], remaining)[0]:
                raise SlotError(f"the slot did not answer within {timeout:g} s")
            chunk = os.read(out, 1 << 16)
            if not chunk:
                raise SlotError(f"the slot stopped: {log_tail(self.log, 3000)}")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)


class SlotPool:
    """``jobs`` slots (see the module docstring). Use as a context manager."""

    def __init__(self, jobs: int, config: dict, start_timeout: float = 600.0):
        self.slots = [Slot({**config, "name": f"slot{i}"}) for i in range(max(1, jobs))]
        self.start_timeout = start_timeout

    def __enter__(self) -> SlotPool:
        try:
            for slot in self.slots:
                slot.start()
            for slot in self.slots:
                slot.wait_ready(self.start_timeout)
        except (SlotError, OSError) as error:
            self.close()
            raise SlotError(f"the grading sandbox could not start: {error}") from None
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for slot in self.slots:
            slot.close()

    def grade(self, tasks: list[dict], timeout: float, fallback: Callable[[dict, str], dict],
              progress: bool = True) -> list[dict]:
        """One row per task, in the order of ``tasks``."""
        todo: queue.Queue[int] = queue.Queue()
        for index in range(len(tasks)):
            todo.put(index)
        rows: list[dict | None] = [None] * len(tasks)
        finished: queue.Queue[int] = queue.Queue()

        def work(slot: Slot) -> None:
            for index in _drain(todo):
                try:
                    rows[index] = slot.grade(tasks[index], timeout)
                except SlotError:
                    rows[index] = fallback(tasks[index], "grader-crashed")
                    slot.close()
                    try:
                        slot.start()
                        slot.wait_ready(self.start_timeout)
                    except (SlotError, OSError):
                        finished.put(index)
                        return  # this slot is lost; the others take the rest
                finished.put(index)

        threads = [threading.Thread(target=work, args=(slot,), daemon=True) for slot in self.slots]
        for thread in threads:
            thread.start()
        with tqdm(total=len(tasks), desc="grading", unit="notebook", disable=not progress) as bar:
            for _ in tasks:
                while True:
                    try:
                        finished.get(timeout=1.0)
                        break
                    except queue.Empty:
                        if not any(t.is_alive() for t in threads):
                            break
                bar.update()
        for thread in threads:
            thread.join()
        return [row if row is not None else fallback(tasks[i], "grader-crashed") for i, row in enumerate(rows)]


def _drain(todo: queue.Queue[int]) -> Iterator[int]:
    while True:
        try:
            yield todo.get_nowait()
        except queue.Empty:
            return
