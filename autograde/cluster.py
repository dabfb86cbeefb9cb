"""The grading slots of one ``grade --scheduler tcp://HOST:PORT`` run: a Dask cluster's workers.

Each thread of each Dask worker grades through a trusted slot process of its own (`autograde.slot`, the very
process `autograde.pool` starts on one machine: its own sandbox, student code only inside it). The slots start
on every worker before anything is graded; one that cannot stops the run with an error naming its worker. Then
each submission is one Dask task, which carries the notebook's bytes (the workers need not see where it was
unpacked) and returns the row; the main process writes the class's records from the rows, as on one machine.
What a lost worker, a slot that dies and a worker that joins late cost, and what a worker needs: autograde/README.md
("More than one machine").
"""
from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from distributed import Client, as_completed, get_worker
from distributed.comm import connect
from tqdm import tqdm

from .pool import Slot, SlotError

__all__ = ["ClusterSlots", "SandboxDown"]

CONNECT_TIMEOUT, WORKERS_TIMEOUT, START_TIMEOUT = 10.0, 60.0, 600.0  # seconds
_SLOTS: dict[int, Slot] = {}  # in a worker: the slot of each of its threads


class SandboxDown(SlotError):
    """A worker's slot could not start its sandbox."""


def _slot(config: dict) -> Slot:
    """The calling worker thread's slot for this run (``config["run"]``), started if it has none."""
    ident, worker = threading.get_ident(), get_worker()
    slot = _SLOTS.get(ident)
    if slot is not None and slot.config["run"] == config["run"] and slot.process is not None:
        return slot
    if slot is not None:
        _SLOTS.pop(ident).close()  # an earlier run's, or one that failed
    staging = Path(worker.local_directory) / "autograde-staging"
    slot = Slot({**config, "staging": str(staging), "name": f"slot{ident}"})
    try:
        slot.start()
        slot.wait_ready(START_TIMEOUT)
    except (SlotError, OSError) as error:
        slot.close()
        raise SandboxDown(f"the grading sandbox could not start on worker {worker.address}: {error}") from None
    _SLOTS[ident] = slot
    return slot


def _start(config: dict) -> None:
    """A Dask task: start this worker thread's slot."""
    _slot(config)


def _grade(task: dict, notebook: bytes | None, mtime: float | None, config: dict, timeout: float) -> dict:
    """A Dask task: the row of one submission, graded by this worker thread's slot."""
    slot, worker = _slot(config), get_worker()
    with tempfile.TemporaryDirectory(prefix="autograde-task-", dir=worker.local_directory) as tmp:
        if notebook is not None:  # the submission as the main process read it, for the slot (and submitted/)
            path = Path(tmp) / Path(task["path"]).name
            path.write_bytes(notebook)
            os.utime(path, (mtime, mtime))
            task = {**task, "path": str(path)}
        try:
            return slot.grade(task, timeout)
        except SlotError as error:
            slot.close()
            raise SlotError(f"worker {worker.address}: {error}") from None


def _close(run: str) -> None:
    """Run on each worker at the end: stop this run's slots."""
    for ident, slot in list(_SLOTS.items()):
        if slot.config["run"] == run:
            slot.close()
            _SLOTS.pop(ident, None)


async def _reach(address: str) -> None:
    comm = await connect(address, timeout=CONNECT_TIMEOUT)
    await comm.close()


class ClusterSlots:
    """The slots of the workers of the Dask scheduler at ``address``; used as `autograde.pool.SlotPool` is."""

    def __init__(self, address: str, config: dict):
        self.address, self.config = address, {**config, "run": secrets.token_hex(8)}
        self.client: Client | None = None

    def __enter__(self) -> ClusterSlots:
        try:
            asyncio.run(_reach(self.address))  # a plain error, before a client that would fail noisily
        except (OSError, ValueError) as error:
            raise SlotError(f"cannot reach the Dask scheduler at {self.address}: {error}") from None
        self.client = Client(self.address, timeout=CONNECT_TIMEOUT, set_as_default=False)
        try:
            try:
                self.client.wait_for_workers(1, timeout=WORKERS_TIMEOUT)
            except TimeoutError:
                raise SlotError(f"no Dask worker joined the scheduler at {self.address} within "
                                f"{WORKERS_TIMEOUT:g} s") from None
            starts = {self.client.submit(_start, self.config, workers=[address], allow_other_workers=False,
                                         pure=False): address
                      for address, n in self.client.nthreads().items() for _ in range(n)}
            with contextlib.suppress(TimeoutError):
                for _ in as_completed(starts, loop=self.client.loop, timeout=START_TIMEOUT):
                    pass
            failed = sorted({str(f.exception()) if f.status == "error" else
                             f"the grading sandbox did not start on worker {address} within {START_TIMEOUT:g} s"
                             for f, address in starts.items() if f.status != "finished"})
            if failed:
                raise SlotError("; ".join(failed))
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.client is not None:
            with contextlib.suppress(OSError, TimeoutError):  # a scheduler gone: its workers' slots went with them
                self.client.run(_close, self.config["run"], on_error="ignore")
            self.client.close()
            self.client = None

    def grade(self, tasks: list[dict], timeout: float, fallback: Callable[[dict, str], dict],
              progress: bool = True) -> list[dict]:
        """One row per task, in the order of ``tasks``: Dask reruns a task whose worker was lost, and each
        task's row is taken once."""
        futures = {}
        for index, task in enumerate(tasks):
            path = Path(task["path"]) if task["path"] else None
            notebook, mtime = (path.read_bytes(), path.stat().st_mtime) if path else (None, None)
            futures[self.client.submit(_grade, task, notebook, mtime, self.config, timeout, pure=False,
                                       key=f"autograde-{self.config['run']}-{index}")] = index
        rows: list[dict | None] = [None] * len(tasks)
        with tqdm(total=len(tasks), desc="grading", unit="notebook", disable=not progress) as bar:
            for future in as_completed(futures, loop=self.client.loop):
                index = futures[future]
                try:
                    rows[index] = future.result()
                except Exception as error:  # a slot that died or hung; a notebook whose workers all died
                    flag = "sandbox-failed" if isinstance(error, SandboxDown) else "grader-crashed"
                    rows[index] = fallback(tasks[index], flag)
                    rows[index]["errors"].append(f"{flag}: {error}")
                    tqdm.write(f"{flag}: {error}", file=sys.stderr)
                bar.update()
        return rows
