"""Grading on a Dask cluster: a real scheduler and two real workers (processes of their own) grade a class exactly as
one machine does, a worker killed while it grades costs nothing, and a worker that cannot start its sandbox is
named, with nothing graded."""
import contextlib
import csv
import json
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from distributed import Client
from nbgrader.api import Gradebook

from courses import run_cli

from autograde.classroom import solved_notebook, untouched_notebook, write_submission
from autograde.feedback import feedback_path
from autograde.grade import GradingError, grade
from notebook_sandbox.container import sandbox_available

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not sandbox_available(), reason="needs bubblewrap (bwrap)")]

A = "ch01_attention"
WRONG_AXIS = ("def softmax(x, dim=-1):\n    e = torch.exp(x - x.amax(dim=-1, keepdim=True))\n"
              "    return e / e.sum(dim=-1, keepdim=True)")
UNSTABLE = "def softmax(x, dim=-1):\n    e = torch.exp(x)\n    return e / e.sum(dim=dim, keepdim=True)"
# student -> answers: full marks, and two mistakes whose feedback shows the failing inputs
ANSWERS = {"ada": None, "ben": None, "wrong_axis": {"softmax": WRONG_AXIS}, "unstable": {"softmax": UNSTABLE}}
SEED = 1234  # one class seed for every run: the feedback shows the checks' inputs, which follow it


@pytest.fixture(scope="module")
def course(tmp_path_factory, released_course):
    """A course and its class: four submissions and one untouched notebook."""
    tmp = tmp_path_factory.mktemp("distributed")
    course = released_course(tmp / "course", [A])
    for student, answers in ANSWERS.items():
        write_submission(tmp / "class", student, A, solved_notebook(A, answers, course))
    write_submission(tmp / "class", "untouched", A, untouched_notebook(A, course))
    return course, tmp / "class"


def _grade(course, subs, out: Path, **options) -> dict:
    """One run into ``out`` with a gradebook of its own, at the class seed: what it wrote, to compare (the feedback
    without the seconds each check took)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("autograde.grade.secrets.randbelow", lambda n: SEED)
        grade(subs, out, db_url=f"sqlite:///{out}.db", root=course, progress=False, **options)
    with Gradebook(f"sqlite:///{out}.db") as gb:
        scores = {s: gb.find_submission_notebook(A, A, s).score for s in [*ANSWERS, "untouched"]}
    return {"grades.csv": (out / "grades.csv").read_text(), "scores": scores,
            "feedback": {s: re.sub(r"\(\d+\.\d+ s\)", "(… s)", feedback_path(out, s, A).read_text()) for s in scores}}


@contextlib.contextmanager
def _cluster(tmp: Path, n_workers: int, env=None):
    """A ``dask scheduler`` on a free port and ``n_workers`` ``dask worker`` processes (one thread each, no nanny:
    killing one kills the worker): the scheduler's address and the workers' processes."""
    info, processes = tmp / "scheduler.json", []

    def dask(*args, log, **kwargs):
        processes.append(subprocess.Popen([sys.executable, "-m", "dask", *args, "--no-dashboard"],
                                          stdout=subprocess.DEVNULL, stderr=(tmp / log).open("w"), **kwargs))
        return processes[-1]

    try:
        dask("scheduler", "--host", "127.0.0.1", "--port", "0", "--scheduler-file", str(info), log="scheduler.log")
        deadline = time.monotonic() + 60
        while not info.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        address = json.loads(info.read_text())["address"]
        workers = [dask("worker", address, "--nthreads", "1", "--no-nanny", "--local-directory", str(tmp / f"w{i}"),
                        log=f"w{i}.log", env=env) for i in range(n_workers)]
        with Client(address, set_as_default=False) as client:
            client.wait_for_workers(n_workers, timeout=120)
        yield address, workers
    finally:
        for process in reversed(processes):
            process.terminate()
        for process in processes:
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()


def _kill_once_grading(worker: subprocess.Popen, folder: Path, killed: threading.Event) -> None:
    """Kill ``worker`` as soon as it holds a submission (its task folder exists): mid-notebook."""
    while worker.poll() is None:
        if any(folder.rglob("autograde-task-*")):
            worker.send_signal(signal.SIGKILL)
            killed.set()
            return
        time.sleep(0.02)


def test_a_cluster_grades_as_one_machine_does_and_a_killed_worker_costs_nothing(course, tmp_path):
    root, subs = course
    local = _grade(root, subs, tmp_path / "local", jobs=1)
    assert local["scores"]["ada"] == 10 and local["scores"]["untouched"] == 0 < local["scores"]["unstable"] < 10
    with _cluster(tmp_path, 2) as (address, workers):
        assert _grade(root, subs, tmp_path / "cluster", scheduler=address) == local
        killed = threading.Event()
        watcher = threading.Thread(target=_kill_once_grading, args=(workers[0], tmp_path / "w0", killed))
        watcher.start()
        after_kill = _grade(root, subs, tmp_path / "killed", scheduler=address)
        watcher.join(5)
    assert killed.is_set() and workers[0].poll() == -signal.SIGKILL
    assert after_kill == local
    with (tmp_path / "killed" / "grades.csv").open() as f:
        students = [row["student_id"] for row in csv.DictReader(f)]
    assert sorted(students) == sorted([*ANSWERS, "untouched"])  # one row each


def test_a_worker_that_cannot_start_its_sandbox_is_named_and_nothing_is_graded(course, tmp_path, bwrap_refused):
    root, subs = course
    with _cluster(tmp_path, 1, env=bwrap_refused) as (address, _):
        result = run_cli("grade", str(subs), "--root", str(root), "--out", str(tmp_path / "out"), "--scheduler", address)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "the grading sandbox could not start on worker tcp://127.0.0.1:" in result.stderr
    assert "Permission denied" in result.stderr and not (tmp_path / "out" / "grades.csv").exists()


def test_a_scheduler_that_cannot_be_reached_grades_nothing(course, tmp_path, monkeypatch):
    root, subs = course
    monkeypatch.setattr("autograde.cluster.CONNECT_TIMEOUT", 1.0)
    with pytest.raises(GradingError, match="cannot reach the Dask scheduler at tcp://127.0.0.1:9"):
        grade(subs, tmp_path / "out", root=root, progress=False, scheduler="tcp://127.0.0.1:9")
    assert not (tmp_path / "out" / "grades.csv").exists()
