"""The course on JupyterHub (deploy/jupyterhub/), end to end, with two system accounts: an instructor
and a student, each with a Jupyter server of their own started by the hub's REST API.

Through the servers' nbgrader endpoints (what JupyterLab's assignment list and formgrader call)
the instructor releases an assignment; the student fetches it, writes the answers and submits;
the instructor collects, grades ``submitted/`` with ``python -m autograde grade`` in their own
account, sees the grades in formgrader and releases the feedback; the student fetches it.

Needs root (it creates the accounts and the hub starts servers as them) and the hub's proxy
(``make test`` installs it). Where what the accounts run lives under a folder they may not enter
(this machine's Python under /root, a clone under a private home or ``mktemp -d``), the hub and the
instructor's commands run in a private mount namespace that shows them Python, the course's
environment and the checkout its packages are installed from, and nothing else of those folders.
"""
import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pytest
import requests

from autograde.classroom import solved_notebook
from editions.assignments import ROOT
from autograde.course import nbgrader_config

A = "ch01_attention"
DEPLOY = ROOT / "deploy" / "jupyterhub"
VENV_BIN = Path(sys.executable).parent
PROXY = shutil.which("configurable-http-proxy", path=f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="creates system accounts and starts servers as them: needs root"),
    pytest.mark.skipif(PROXY is None, reason="needs JupyterHub's configurable-http-proxy (make test installs it)"),
]

REACH = """
stage=$(mktemp -d)
IFS=:
i=0; for path in $KEEP; do i=$((i+1)); mkdir "$stage/$i"; mount --bind "$path" "$stage/$i"; done
for folder in $HIDDEN; do mount -t tmpfs -o mode=755 tmpfs "$folder"; done
i=0; for path in $KEEP; do i=$((i+1)); mkdir -p "$path"; mount --bind "$stage/$i" "$path"; umount "$stage/$i"; done
unset IFS
rm -r "$stage"
exec "$@"
"""
"""Run as root: hide each folder no one else may enter behind an empty one, except for the paths named."""

NEEDED = (Path(sys.base_prefix), Path(sys.prefix).resolve(), ROOT)
"""What every account runs: Python, the course's environment, and the checkout of its editable install."""


def _hidden_ancestor(path: Path) -> Path | None:
    """The outermost folder above ``path`` that other accounts may not enter, if any."""
    return next((p for p in reversed(path.parents) if not p.stat().st_mode & stat.S_IXOTH), None)


def _with_python(command: list[str]) -> list[str]:
    """``command`` where the accounts reach :data:`NEEDED`, wherever it lives."""
    hidden = {path: folder for path in NEEDED if (folder := _hidden_ancestor(path)) is not None}
    if not hidden:
        return command
    keep = [p for p in hidden if not any(q in p.parents for q in hidden)]  # the venv inside the checkout goes with it
    folders = {f for f in hidden.values() if not any(g in f.parents for g in hidden.values())}
    return ["unshare", "--mount", "--propagation", "private", "env", f"KEEP={':'.join(map(str, keep))}",
            f"HIDDEN={':'.join(map(str, folders))}", "sh", "-euc", REACH, "sh", *command]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _until(what: str, check, timeout: float):
    """Poll ``check`` until it returns something true, for at most ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if result := check():
            return result
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


class Hub:
    """The running hub, its accounts and their servers; see the module docstring."""

    def __init__(self, base: Path):
        tag = secrets.token_hex(3)
        self.base, self.instructor, self.student = base, f"tpbp-teach-{tag}", f"tpbp-learn-{tag}"
        self.token = secrets.token_hex(16)
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.exchange = base / "exchange"
        self.homes = base / "home"
        self.course = self.homes / self.instructor / "course"
        self.process: subprocess.Popen | None = None
        self.users: list[str] = []

    def add_account(self, name: str) -> None:
        subprocess.run(["useradd", "--create-home", "--home-dir", str(self.homes / name), "--user-group",
                        "--shell", "/bin/sh", name], check=True, capture_output=True, timeout=60)
        self.users.append(name)

    def env(self) -> dict:
        return {"PATH": f"{VENV_BIN}:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8", "HOME": str(self.base / "hub"),
                "COURSE_ROOT": str(self.course), "COURSE_INSTRUCTORS": self.instructor,
                "NBGRADER_EXCHANGE": str(self.exchange)}

    def start(self) -> None:
        state = self.base / "hub"
        state.mkdir()
        config = state / "jupyterhub_config.py"
        config.write_text(f"""
load_subconfig({str(DEPLOY / 'jupyterhub_config.py')!r})
c.JupyterHub.authenticator_class = "dummy"  # the test's accounts have no passwords
c.JupyterHub.bind_url = {self.url!r}
c.JupyterHub.hub_bind_url = "http://127.0.0.1:{_free_port()}"
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{_free_port()}"
c.ConfigurableHTTPProxy.command = [{PROXY!r}]
c.JupyterHub.db_url = "sqlite:///{state}/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = "{state}/cookie_secret"
c.JupyterHub.services = [{{"name": "course-test", "api_token": {self.token!r}}}]
c.JupyterHub.load_roles = [{{"name": "course-test", "services": ["course-test"],
                            "scopes": ["admin:users", "admin:servers", "access:servers"]}}]
""")
        log = (state / "hub.log").open("w")
        self.process = subprocess.Popen(_with_python([str(VENV_BIN / "jupyterhub"), "-f", str(config)]), cwd=state,
                                        env=self.env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        _until("the hub's API", lambda: self._answers(f"{self.url}/hub/api/"), 90)

    def _answers(self, url: str) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"the hub stopped:\n{self.log_tail()}")
        try:
            return requests.get(url, timeout=5).status_code == 200
        except requests.ConnectionError:
            return False

    def log_tail(self) -> str:
        return (self.base / "hub" / "hub.log").read_text()[-4000:]

    def api(self, method: str, path: str, **kwargs) -> requests.Response:
        """The hub's REST API (``/hub/api/...``) or a user's server (``/user/<name>/...``), as the test's service."""
        return requests.request(method, f"{self.url}{path}", headers={"Authorization": f"token {self.token}"},
                                timeout=300, **kwargs)

    def start_server(self, name: str) -> None:
        assert self.api("POST", f"/hub/api/users/{name}").status_code in (201, 409)  # 409: an admin, made at start
        assert self.api("POST", f"/hub/api/users/{name}/server").status_code in (201, 202)
        _until(f"{name}'s server", lambda: self.api("GET", f"/hub/api/users/{name}").json()["servers"].get("", {})
               .get("ready"), 150)

    def run_as(self, name: str, *command: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
        """A command in ``name``'s account, as in a terminal of their server."""
        account = pwd.getpwnam(name)
        environment = {**env, "HOME": account.pw_dir, "USER": name}
        return subprocess.run(_with_python(["runuser", "-u", name, "--", "env", "-i",
                                            *(f"{k}={v}" for k, v in environment.items()), *command]),
                              cwd=cwd, capture_output=True, text=True, timeout=900)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)  # the hub stops the users' servers and its proxy
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
        for name in self.users:  # anything the test's accounts still run was started by this test
            uid = pwd.getpwnam(name).pw_uid
            for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
                try:
                    if os.stat(f"/proc/{pid}").st_uid == uid:
                        os.kill(pid, signal.SIGKILL)
                except (FileNotFoundError, ProcessLookupError):
                    pass
            subprocess.run(["userdel", "--remove", name], capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def hub(released_course):
    base = Path(tempfile.mkdtemp(prefix="course-hub-"))  # other accounts must reach it: not pytest's 0700 tmp
    base.chmod(0o755)
    hub = Hub(base)
    try:
        (base / "home").mkdir(mode=0o755)
        hub.add_account(hub.instructor)
        hub.add_account(hub.student)
        (hub.homes / hub.instructor).chmod(0o700)  # the course, solutions included, is the instructor's alone
        released_course(hub.course, [A])
        shutil.chown(hub.course, hub.instructor, hub.instructor)
        for path in hub.course.rglob("*"):
            shutil.chown(path, hub.instructor, hub.instructor)
        hub.start()
        hub.start_server(hub.instructor)
        hub.start_server(hub.student)
        yield hub
    finally:
        hub.stop()
        shutil.rmtree(base, ignore_errors=True)


def _ok(response: requests.Response) -> dict:
    assert response.status_code == 200, f"{response.status_code}: {response.text[:2000]}"
    body = response.json()
    assert not isinstance(body, dict) or body.get("success", True), json.dumps(body)[:3000]
    return body


def test_assignment_goes_round_the_exchange_and_the_feedback_comes_back(hub):
    teacher, learner = f"/user/{hub.instructor}", f"/user/{hub.student}"
    course_id = nbgrader_config(root=hub.course).CourseDirectory.course_id
    ids = {"course_id": course_id, "assignment_id": A}

    # The instructor releases it to the exchange.
    _ok(hub.api("POST", f"{teacher}/formgrader/api/assignment/{A}/release"))
    listed = _ok(hub.api("GET", f"{learner}/assignments", params={"course_id": course_id}))["value"]
    assert [(a["assignment_id"], a["status"]) for a in listed] == [(A, "released")]

    # The student fetches it, writes the answers in it and submits it.
    _ok(hub.api("POST", f"{learner}/assignments/fetch", data=ids))
    path = f"{learner}/api/contents/{A}/{A}.ipynb"
    notebook = nbformat.from_dict(_ok(hub.api("GET", path))["content"])
    answers = {c.metadata["nbgrader"]["grade_id"]: c.source for c in solved_notebook(A, root=hub.course).cells
               if c.metadata.get("nbgrader", {}).get("solution")}
    for cell in notebook.cells:
        if cell.metadata.get("nbgrader", {}).get("solution"):
            cell.source = answers[cell.metadata["nbgrader"]["grade_id"]]
    assert hub.api("PUT", path, json={"type": "notebook", "format": "json", "content": notebook}).status_code == 200
    _ok(hub.api("POST", f"{learner}/assignments/submit", data=ids))

    # The instructor collects it and grades it in their own account.
    _ok(hub.api("POST", f"{teacher}/formgrader/api/assignment/{A}/collect"))
    submitted = hub.course / "submitted" / hub.student / A
    assert (submitted / f"{A}.ipynb").exists() and (submitted / "timestamp.txt").exists()
    terminal = {k: v for k, v in hub.env().items() if k != "COURSE_INSTRUCTORS"}
    terminal.update(JUPYTER_CONFIG_PATH=f"{DEPLOY / 'instructors'}:{DEPLOY / 'all'}", NBGRADER_COURSE_ID=course_id)
    graded = hub.run_as(hub.instructor, str(VENV_BIN / "python"), "-m", "autograde", "grade", "submitted",
                        cwd=hub.course, env=terminal)
    assert graded.returncode == 0, graded.stdout[-2000:] + graded.stderr[-3000:]

    # Formgrader shows the graded submission, and its notebook as it ran.
    rows = _ok(hub.api("GET", f"{teacher}/formgrader/api/submissions/{A}"))
    assert [(r["student"], r["autograded"], r["score"], r["max_score"]) for r in rows] == [(hub.student, True, 10, 10)]
    notebooks = _ok(hub.api("GET", f"{teacher}/formgrader/api/submitted_notebooks/{A}/{A}"))
    page = hub.api("GET", f"{teacher}/formgrader/submissions/{notebooks[0]['id']}")
    assert page.status_code == 200 and "softmax_hidden" in page.text

    # The feedback goes back through the exchange to the student.
    _ok(hub.api("POST", f"{teacher}/formgrader/api/assignment/{A}/release_feedback"))
    _ok(hub.api("POST", f"{learner}/assignments/fetch_feedback", data=ids))
    folders = _ok(hub.api("GET", f"{learner}/api/contents/{A}/feedback"))["content"]
    assert len(folders) == 1
    feedback = _ok(hub.api("GET", f"{learner}/api/contents/{folders[0]['path']}/{A}.html"))["content"]
    assert "Score: 10 / 10" in feedback and f"<title>{A} — {hub.student}</title>" in feedback
    assert "BEGIN HIDDEN TESTS" not in feedback


def test_students_have_no_formgrader_and_cannot_read_the_course(hub):
    assert hub.api("GET", f"/user/{hub.student}/formgrader/api/status").status_code == 404
    assert hub.api("GET", f"/user/{hub.instructor}/formgrader/api/status").status_code == 200
    solutions = hub.course / "solutions" / A / f"{A}.md"
    assert hub.run_as(hub.instructor, "cat", str(solutions), cwd=hub.base, env={}).returncode == 0
    assert hub.run_as(hub.student, "cat", str(solutions), cwd=hub.base, env={}).returncode != 0
