"""A grading pool that runs no notebook: every check of every submission passes (full marks), and the rest is
the grader's own: the row (`autograde.slot.graded_row`), nbgrader's autograde step into the gradebook with the
submission's time and the late penalty, the feedback page. `grade` with it (``monkeypatch.setattr(
"autograde.grade.SlotPool", TrustingPool)``) tests what happens around the sandbox in seconds, without one."""
from pathlib import Path

from autograde.autograded import Recorder
from autograde.course import nbgrader_config
from autograde.notebook import merge
from autograde.release import assignment_notebooks
from autograde.slot import graded_row


class TrustingPool:
    def __init__(self, jobs: int, config: dict, start_timeout: float = 0.0):
        self.config = config

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def grade(self, tasks, timeout, fallback, progress=True):
        root, staging = Path(self.config["root"]), Path(self.config["staging"]) / "trusting"
        recorder = Recorder(staging, Path(self.config["out"]), nbgrader_config(self.config["db_url"], root))
        rows = []
        for task in tasks:
            assignment = task["assignment"]
            cells = merge(*assignment_notebooks(assignment, root), None)
            results = [{"status": "ok", "stdout": "", "error": ""} for _ in cells]
            rows.append(graded_row(task, cells, results, list(task["flags"]), staging, recorder))
        return rows
