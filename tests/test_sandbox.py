"""The sandbox a notebook runs in: unprivileged, no network, nothing of the course or the instructor,
read-only but for an empty /tmp, and nothing left from one notebook for the next."""
import ast
import errno
import os
import time
from pathlib import Path

import pytest

from notebook_sandbox.channel import ChannelClosed
from editions.assignments import ROOT
from notebook_sandbox.container import Limits, Sandbox, sandbox_available
from autograde.messages import ENGLISH, ENVIRONMENT, _, speaking
from autograde.sandbox_tree import staged
from notebook_sandbox.zygote import ENV

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not sandbox_available(), reason="needs bubblewrap (bwrap)")]

SECRET = "AUTOGRADE_INSTRUCTOR_SECRET"


@pytest.fixture(scope="module")
def sandbox():
    os.environ[SECRET] = "s3cr3t-token"  # in the grader's environment, as an instructor's API key would be
    try:
        with Sandbox(Limits(cell_timeout=20, tmp_mb=8, processes=16), staged()).start() as box:
            yield box
    finally:
        del os.environ[SECRET]


def run(sandbox, *sources):
    """Each source in one fresh runner, in order; the value of each cell's last line, printed."""
    runner = sandbox.spawn("ch01_attention")
    try:
        results = []
        for index, source in enumerate(sources):
            reply = runner.execute(index, source, time.monotonic() + 20, 10_000)
            assert reply["status"] == "ok", reply["error"]
            results.append(reply["stdout"].strip())
        return results
    finally:
        sandbox.end(runner)


def value(sandbox, source):
    (out,) = run(sandbox, source)
    return ast.literal_eval(out)


def test_the_runner_has_no_privileges(sandbox):
    status = value(sandbox, "print(dict(l.split(':\\t', 1) for l in open('/proc/self/status').read().splitlines() "
                            "if ':\\t' in l))")
    assert status["CapEff"] == status["CapPrm"] == status["CapBnd"] == "0000000000000000"
    assert status["NoNewPrivs"] == "1" and status["Uid"].split()[0] != "0"
    assert value(sandbox, "import os\nprint(os.getpid())") == 1  # PID 1 of a namespace of its own


def test_the_environment_is_the_runners_own_and_no_process_shows_the_graders(sandbox, monkeypatch):
    monkeypatch.setenv(ENVIRONMENT, "zh_CN")  # the grader's own: the runner's is the notebook's, from the slot
    with speaking(ENGLISH):
        assert value(sandbox, "import os\nprint(dict(os.environ))") == {**ENV, ENVIRONMENT: ENGLISH}
    found = value(sandbox, f"""
import os
seen = []
for pid in [p for p in os.listdir('/proc') if p.isdigit()]:
    try:
        seen.append(open(f'/proc/{{pid}}/environ', 'rb').read())
    except OSError:
        pass
print([b'{SECRET}' in text for text in seen])""")
    assert not any(found)


def test_nothing_of_the_course_is_visible(sandbox):
    # A checkout under /tmp is hidden whole by the runner's own /tmp.
    visible = value(sandbox, f"import os\nprint(sorted(os.listdir({str(ROOT)!r})) if os.path.isdir({str(ROOT)!r}) else [])")
    assert set(visible) <= {"autograde", "tfm_ref", ".venv"}
    home = value(sandbox, "import os\nprint([p for p in ('/root', '/home') if os.path.isdir(p) and os.listdir(p) "
                          "and p not in __import__('sys').prefix])")
    assert all(ROOT.is_relative_to(p) or os.path.realpath(p) in __import__("sys").base_prefix for p in home)


def test_there_is_no_network(sandbox):
    reached = value(sandbox, """
import socket
try:
    socket.create_connection(('1.1.1.1', 53), timeout=2)
    print(True)
except OSError:
    print(False)""")
    assert reached is False
    interfaces = value(sandbox, "print([l.split(':')[0].strip() for l in open('/proc/self/net/dev').readlines()[2:]])")
    assert interfaces == ["lo"]


def test_only_the_fresh_tmp_and_shm_are_writable(sandbox):
    writable = value(sandbox, """
import os
found = []
for top, dirs, _ in os.walk('/', topdown=True):
    dirs[:] = [d for d in dirs if not os.path.join(top, d).startswith(('/proc', '/sys'))]
    try:
        open(os.path.join(top, '.probe'), 'w').close()
        found.append(top)
    except OSError:
        pass
print(found)""")
    assert sorted(writable) == ["/dev/shm", "/tmp"]


def test_one_descriptor_leads_out_and_it_is_the_runners_own_socket(sandbox):
    fds = value(sandbox, "import os\nnames = os.listdir('/proc/self/fd')\n"  # one of them was listdir's own
                         "print({int(f): os.readlink(f'/proc/self/fd/{f}') for f in names if os.path.exists(f'/proc/self/fd/{f}')})")
    sockets = [link for fd, link in fds.items() if link.startswith("socket:")]
    assert len(sockets) == 1 and all(fds[fd] == "/dev/null" for fd in (0, 1, 2))


def test_nothing_survives_into_the_next_runner(sandbox):
    run(sandbox, """
import threading, time, socket
open('/tmp/left-behind', 'w').write('x')
open('/dev/shm/left-behind', 'w').write('x')
threading.Thread(target=time.sleep, args=(987654,), daemon=True).start()
listener = socket.socket(socket.AF_UNIX)
listener.bind('\\0autograde-left-behind')
listener.listen()""")
    after = value(sandbox, """
import os, socket, threading
try:
    socket.socket(socket.AF_UNIX).connect('\\0autograde-left-behind')
    listening = True
except OSError:
    listening = False
print([os.listdir('/tmp'), os.listdir('/dev/shm'), threading.active_count(), len(os.listdir('/proc/self/task')),
       listening])""")
    assert after == [[], [], 1, 1, False]


def test_a_runner_starts_no_process_and_holds_no_memory_out_of_its_limits_sight(sandbox):
    """A process left by one cell could outlive its notebook's runner or answer a later check; a memfd holds memory
    the address-space limit does not count. Threads, which PyTorch uses, still start. The system calls ctypes
    reaches are refused alike (tests/test_seccomp.py)."""
    refused = value(sandbox, """
import errno, os, subprocess, threading
def refused(attempt):
    try:
        attempt()
    except OSError as error:
        return error.errno == errno.EPERM
    return False
ran = []
thread = threading.Thread(target=lambda: ran.append(True))
thread.start()
thread.join()
print([refused(os.fork), refused(lambda: subprocess.run(['true'])), refused(lambda: os.posix_spawn('/bin/true', ['true'], {})),
       refused(lambda: os.memfd_create('hidden')), ran == [True]])""")
    assert refused == [True] * 5


def test_a_runner_opens_no_socket_but_a_unix_one_nor_an_eventfd_or_a_pidfd(sandbox):
    """Netlink, vsock and IP sockets are each a way to the kernel or the host of their own, the empty network
    namespace notwithstanding. What a cell reaches without ctypes; the filter call by call: tests/test_seccomp.py."""
    said = value(sandbox, """
import os, socket
def answer(attempt):
    try:
        attempt()
    except OSError as error:
        return error.errno
    return 'ok'
print([answer(lambda: socket.socket(socket.AF_UNIX)), answer(lambda: socket.socketpair()),
       answer(lambda: socket.socket(40, socket.SOCK_STREAM)),  # AF_VSOCK
       answer(lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW)),
       answer(lambda: socket.socket(socket.AF_INET)),
       answer(lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)),
       answer(lambda: socket.socketpair(socket.AF_INET)),
       answer(socket.if_nameindex),  # through netlink
       answer(lambda: os.eventfd(0)), answer(lambda: os.pidfd_open(os.getpid()))])""")
    assert said == ["ok"] * 2 + [errno.EAFNOSUPPORT] * 6 + [errno.EPERM] * 2


def test_proc_sys_is_read_only(sandbox):
    """The sandbox's /proc is writable, and a sysctl file's own mode lets anyone open some for writing
    (``kernel/ns_last_pid``, 0666)."""
    said = value(sandbox, """
import os
def opened(path):
    try:
        open(path, 'w').close()
        return 'ok'
    except OSError as error:
        return error.errno
writable = [os.path.join(top, name) for top, _, names in os.walk('/proc/sys') for name in names
            if opened(os.path.join(top, name)) == 'ok']
print([writable, opened('/proc/sys/kernel/ns_last_pid'), open('/proc/sys/kernel/ns_last_pid').read().isspace()])""")
    assert said == [[], errno.EROFS, False]  # still readable


def test_limits_stop_a_thread_bomb_a_full_disk_and_a_memory_hog(sandbox):
    threads = value(sandbox, """
import threading, time
n = 0
try:
    for _ in range(100):
        threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
        n += 1
except RuntimeError:
    pass
print(n)""")
    assert threads < sandbox.limits.processes
    full = value(sandbox, """
try:
    with open('/tmp/fill', 'wb') as f:
        for _ in range(100):
            f.write(b'x' * 2**20)
    print(False)
except OSError:
    print(True)""")
    assert full
    runner = sandbox.spawn("ch01_attention")
    try:
        reply = runner.execute(0, "hog = [bytearray(2**30) for _ in range(64)]", time.monotonic() + 60, 1000)
        assert sandbox.cgroup is None and "MemoryError" in reply["error"]  # the address-space rlimit
    except ChannelClosed:
        assert sandbox.oom_kills() > 0  # the cgroup's limit killed the runner
    finally:
        sandbox.end(runner)


def test_without_a_cgroup_the_address_space_limit_stops_a_memory_hog(monkeypatch):
    monkeypatch.setattr("notebook_sandbox.container.MemoryCgroup.create", lambda name: None)
    with Sandbox(Limits(memory_mb=256), staged()).start() as box:
        runner = box.spawn("ch01_attention")
        try:
            reply = runner.execute(0, "hog = bytearray(2**30)", time.monotonic() + 60, 1000)
        finally:
            box.end(runner)
    assert "MemoryError" in reply["error"]


def test_the_sandbox_runs_the_tree_the_grader_runs_not_the_installed_one(tmp_path):
    """A second checkout, imported first: its grader starts its own launcher and stages its own runner and tfm_ref,
    not the environment's installed copies."""
    import shutil
    import subprocess
    import sys

    for package in ("autograde", "notebook_sandbox", "tfm_ref"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__", "checkpoints"))
    for module in ("tfm_ref/__init__.py", "notebook_sandbox/runner.py"):
        with (tmp_path / module).open("a") as file:
            file.write("\nCHECKOUT = 'the second one'\n")
    launcher = tmp_path / "notebook_sandbox" / "launcher.py"
    launcher.write_text(launcher.read_text().replace(
        "from __future__ import annotations\n",
        f"from __future__ import annotations\nopen({str(tmp_path / 'launched')!r}, 'w').write(__file__)\n", 1))
    cell = ("import tfm_ref, notebook_sandbox.runner as runner\n"
            "print(getattr(tfm_ref, 'CHECKOUT', 'installed'), getattr(runner, 'CHECKOUT', 'installed'))")
    script = f"""
import time
from autograde.sandbox_tree import staged
from notebook_sandbox.container import Limits, Sandbox
with Sandbox(Limits(), staged()).start() as box:
    runner = box.spawn("ch01_attention")
    reply = runner.execute(0, {cell!r}, time.monotonic() + 30, 1000)
    print(reply["stdout"].strip() or reply["error"])
    box.end(runner)
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                            env={**os.environ, "PYTHONPATH": str(tmp_path)}, cwd=tmp_path)
    assert result.stdout.strip().splitlines()[-1:] == ["the second one the second one"], result.stderr[-2000:]
    assert Path((tmp_path / "launched").read_text()).resolve() == launcher.resolve()


def test_the_runner_speaks_the_notebook_s_language_from_the_staged_catalogues(sandbox):
    """What the runner says itself (an output it cannot send, a module it cannot build) is in the notebook's
    language: the slot names it at spawn, and the checks' catalogues are staged beside the runner's modules."""
    said = "from notebook_sandbox.words import _\nprint(_('your output'))"
    with speaking("zh_CN"):
        chinese = _("your output")
        assert run(sandbox, said) == [chinese]
    with speaking(ENGLISH):
        assert run(sandbox, said) == ["your output"]
    assert chinese != "your output"
