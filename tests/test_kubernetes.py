"""The course on Zero to JupyterHub (deploy/kubernetes/), checked without a cluster: the values use only keys
the chart documents; the hub's configuration, loaded as the chart loads it, builds a real KubeSpawner
whose pods have the course's image, resources, uids and volumes; the exchange's clerk records times no
student can move earlier, in the file the grader reads; and the image's installation, made in a clean
virtual environment, imports everything the notebooks and the grader import.
"""
import ast
import asyncio
import os
import re
import shutil
import subprocess
import sys
import types
from datetime import datetime, timedelta, timezone
from pathlib import Path

import jupytext
import pytest
import yaml
from jupyterhub.traitlets import ByteSpecification
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.config import kube_config
from kubespawner import KubeSpawner
from traitlets.config import Config
from course_packages import course_packages

from intake.submission_times import read_submission_times
from editions.assignments import ROOT

HERE = ROOT / "deploy" / "kubernetes"
VALUES = yaml.safe_load((HERE / "values.yaml").read_text())
sys.path.insert(0, str(HERE))  # exchange_clerk.py is a script of the image, not a package
from exchange_clerk import Clerk  # noqa: E402

SPAWNER_KEYS = {  # singleuser.<key> -> KubeSpawner.<trait>, as the chart's jupyterhub_config.py maps them (4.4.0)
    "memory.limit": "mem_limit", "memory.guarantee": "mem_guarantee", "cpu.limit": "cpu_limit",
    "cpu.guarantee": "cpu_guarantee", "extraEnv": "environment", "defaultUrl": "default_url",
    "uid": "uid", "fsGid": "fs_gid", "profileList": "profile_list", "startTimeout": "start_timeout",
}
"""What this test's loader maps; a key of values.yaml outside it fails the test rather than go unchecked."""


def _documented_keys() -> tuple[set[str], list[str]]:
    lines = [l for l in (HERE / "chart-keys.txt").read_text().splitlines() if l and not l.startswith("#")]
    return {l for l in lines if not l.endswith(".*")}, [l[:-1] for l in lines if l.endswith(".*")]


def _undocumented(values: dict, prefix: str = "") -> list[str]:
    """The key paths of ``values`` the chart's schema does not name (lists and scalars are values)."""
    keys, free = _documented_keys()
    found = []
    for key, value in values.items():
        path = f"{prefix}{key}"
        if any(path.startswith(f) for f in free):
            continue
        if path not in keys:
            found.append(path)
        elif isinstance(value, dict):
            found += _undocumented(value, f"{path}.")
    return found


def _get(values: dict, key: str, default=None):
    for part in key.split("."):
        if not isinstance(values, dict) or part not in values:
            return default
        values = values[part]
    return values


def _leaves(values: dict, prefix: str = "") -> list[str]:
    return [p for k, v in values.items() for p in
            (_leaves(v, f"{prefix}{k}.") if isinstance(v, dict) and v else [f"{prefix}{k}"])]


def chart_config(values: dict, records: Path) -> Config:
    """The hub's configuration as the chart's jupyterhub_config.py builds it from ``values`` (the parts the
    course uses), then ``hub.extraConfig.course`` (course_hub.py) run as the chart runs it, with z2jh's
    ``get_config``. ``custom.course.records`` is ``records``: the hub's volume, here a folder."""
    values = {**values, "custom": {"course": {**values["custom"]["course"], "records": str(records)}}}
    c = Config()
    singleuser = values["singleuser"]
    unmapped = [k for k in _leaves(singleuser) if not k.startswith(("image.", "storage."))
                and not any(k == key or k.startswith(f"{key}.") for key in SPAWNER_KEYS)]
    assert not unmapped, f"values.yaml sets singleuser keys this test does not load: {unmapped}"
    for key, trait in SPAWNER_KEYS.items():
        if (value := _get(singleuser, key)) is not None:
            c.KubeSpawner[trait] = value
    c.KubeSpawner.image = f"{singleuser['image']['name']}:{singleuser['image']['tag']}"
    storage = singleuser["storage"]
    c.KubeSpawner.volumes = [{"name": "home", "persistentVolumeClaim": {"claimName": "claim-{username}"}},
                             *storage.get("extraVolumes", [])]
    c.KubeSpawner.volume_mounts = [{"name": "home", "mountPath": "/home/jovyan"}, *storage.get("extraVolumeMounts", [])]
    c.KubeSpawner.storage_capacity = storage["capacity"]
    cull = values["cull"]
    if cull["enabled"]:
        command = ["python3", "-m", "jupyterhub_idle_culler", f"--timeout={cull['timeout']}",
                   f"--cull-every={cull['every']}"]
        command += [] if cull.get("adminUsers", True) else ["--cull-admin-users=false"]
        c.JupyterHub.services = [{"name": "jupyterhub-idle-culler", "command": command}]
    for section, settings in values["hub"].get("config", {}).items():
        c[section].update(settings)
    z2jh = types.ModuleType("z2jh")
    z2jh.get_config = lambda key, default=None: _get(values, key, default)
    sys.modules["z2jh"] = z2jh
    try:
        exec(compile((HERE / "course_hub.py").read_text(), "course_hub.py", "exec"), {"c": c})
    finally:
        del sys.modules["z2jh"]
    return c


def _bytes(size: str) -> int:
    """``1G`` as JupyterHub reads a memory size (powers of 1024)."""
    return ByteSpecification().validate(None, size)


class _User:
    def __init__(self, name: str, id: int):
        self.name, self.id, self.url, self.escaped_name = name, id, f"/user/{name}/", name
        self.server, self.spawners, self.orm_user = None, {}, None


def _pod(config: Config, name: str, id: int):
    """The container of the pod the hub's KubeSpawner asks for, for user ``name`` (the hub's id ``id``), its
    hook run: as the API server would receive it (JSON, camelCase)."""
    async def manifest():  # in an event loop, as in the hub: the spawner's client belongs to one
        spawner = KubeSpawner(config=config, user=_User(name, id), _mock=True)
        spawner.pre_spawn_hook(spawner)
        async with ApiClient() as client:
            return client.sanitize_for_serialization(await spawner.get_pod_manifest())
    return asyncio.run(manifest())["spec"]["containers"][0]


KUBECONFIG = """
apiVersion: v1
kind: Config
clusters: [{name: none, cluster: {server: "http://127.0.0.1:9"}}]
users: [{name: none, user: {}}]
contexts: [{name: none, context: {cluster: none, user: none}}]
current-context: none
"""
"""A cluster no one is asked about: making a pod's manifest needs none, the spawner's client a config."""


@pytest.fixture
def config(tmp_path, monkeypatch):
    (tmp_path / "kubeconfig").write_text(KUBECONFIG)
    monkeypatch.setattr(kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(tmp_path / "kubeconfig"))  # as KUBECONFIG=
    return chart_config(VALUES, tmp_path / "records")


def test_values_use_only_keys_the_chart_documents():
    assert _undocumented(VALUES) == []
    assert _undocumented({"singleuser": {"memory": {"limt": "2G"}, "extraEnv": {"ANY": "1"}}, "cul": {}}) == \
        ["singleuser.memory.limt", "cul"]


def test_a_students_pod_has_the_course_image_resources_and_exchange(config, tmp_path):
    (tmp_path / "records").mkdir()
    container = _pod(config, "ada", 7)
    singleuser = VALUES["singleuser"]
    assert container["image"] == f"{singleuser['image']['name']}:{singleuser['image']['tag']}"
    for side, key in (("limits", "limit"), ("requests", "guarantee")):
        assert container["resources"][side] == {"cpu": float(singleuser["cpu"][key]),
                                                      "memory": _bytes(singleuser["memory"][key])}
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["NBGRADER_EXCHANGE"] == "/srv/nbgrader/exchange" and env["JUPYTERHUB_DEFAULT_URL"] == "/lab"
    assert "JUPYTER_CONFIG_PATH" not in env and "JUPYTERHUB_ROOT_DIR" not in env  # the image's: students/, the home
    assert container["securityContext"]["runAsUser"] == VALUES["custom"]["course"]["uidBase"] + 7
    mounts = {m["mountPath"]: m.get("subPath") for m in container["volumeMounts"]}
    assert mounts == {"/home/jovyan": None, "/srv/nbgrader/exchange": "exchange"}


def test_an_instructors_pod_has_the_course_root_the_times_and_formgrader(config, tmp_path):
    (tmp_path / "records").mkdir()
    course = VALUES["custom"]["course"]
    container = _pod(config, course["instructors"][0], 1)
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["JUPYTER_CONFIG_PATH"].split(":") == ["/etc/course/instructors", "/etc/course/all"]
    mounts = {m["mountPath"]: (m.get("subPath"), m.get("readOnly", False)) for m in container["volumeMounts"]}
    assert mounts[course["root"]] == ("course", False) and mounts[str(tmp_path / "records")] == ("records", True)
    assert env["JUPYTERHUB_ROOT_DIR"] == course["root"] and env["COURSE_ROOT"] == course["root"]


def test_each_user_gets_a_uid_of_their_own_recorded_for_the_clerk(config, tmp_path):
    (tmp_path / "records").mkdir()
    uids = {name: _pod(config, name, id)["securityContext"]["runAsUser"] for name, id in (("ada", 7), ("bo", 8))}
    assert len(set(uids.values())) == 2
    assert yaml.safe_load((tmp_path / "records" / "users.json").read_text()) == uids


def test_idle_servers_are_culled(config):
    culler, = (s for s in config.JupyterHub.services if s["name"] == "jupyterhub-idle-culler")
    assert f"--timeout={VALUES['cull']['timeout']}" in culler["command"]


def test_the_clerk_watches_the_exchange_the_servers_use():
    clerk, = VALUES["hub"]["extraContainers"]
    arguments = dict(zip(clerk["command"][2::2], clerk["command"][3::2]))
    singleuser = VALUES["singleuser"]
    assert arguments["--course"] == singleuser["extraEnv"]["NBGRADER_COURSE_ID"]
    assert arguments["--records"] == VALUES["custom"]["course"]["records"]
    exchange, = (m for m in singleuser["storage"]["extraVolumeMounts"] if m["mountPath"] == arguments["--exchange"])
    assert exchange["mountPath"] == singleuser["extraEnv"]["NBGRADER_EXCHANGE"]
    assert {(m["name"], m["subPath"]) for m in clerk["volumeMounts"]} == {(exchange["name"], "exchange"),
                                                                        (exchange["name"], "records")}


def _submit(exchange: Path, student: str, assignment: str, text: str, claimed: str = "2026-01-01 00:00:00") -> Path:
    folder = exchange / "course" / "inbound" / f"{student}+{assignment}+{claimed}+r4nd"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{assignment}.ipynb").write_text(text)
    (folder / "timestamp.txt").write_text(claimed)
    return folder


def test_the_clerk_records_when_a_submission_changed_never_what_the_student_wrote(tmp_path):
    exchange, records = tmp_path / "exchange", tmp_path / "records"
    records.mkdir()
    me = os.getuid()
    (records / "users.json").write_text(f'{{"ada": {me}, "bo": {me}, "cy": {me + 1}}}')
    start = datetime(2026, 11, 20, 16, 0, tzinfo=timezone.utc)
    ada = _submit(exchange, "ada", "ch01_attention", "first")
    _submit(exchange, "bo", "ch01_attention", "on time")
    _submit(exchange, "cy", "ch01_attention", "not cy's: owned by another uid")
    assert Clerk(exchange, "course", records).look(lambda: start) == ["cy+ch01_attention+2026-01-01 00:00:00+r4nd"]
    (ada / "ch01_attention.ipynb").write_text("edited after the deadline")
    os.utime(ada / "ch01_attention.ipynb", (0, 0))  # an mtime from 1970 changes nothing
    clerk = Clerk(exchange, "course", records)  # after a restart, what it saw before still counts
    clerk.look(lambda: start + timedelta(hours=2))
    clerk.look(lambda: start + timedelta(hours=3))  # nothing changed: nothing moves
    times = read_submission_times(records / "times.csv").times
    assert set(times) == {("ada", "ch01_attention"), ("bo", "ch01_attention")}
    assert times["ada", "ch01_attention"][0] == (start + timedelta(hours=2)).strftime("%Y-%m-%d %H:%M:%S.%f %Z")
    assert times["bo", "ch01_attention"][0] == start.strftime("%Y-%m-%d %H:%M:%S.%f %Z")


def _dockerfile_sources() -> list[str]:
    """What the Dockerfile copies in before it installs (``COPY SRC... /src/...``)."""
    sources = []
    for line in (HERE / "Dockerfile").read_text().splitlines():
        if m := re.match(r"COPY (.+) (/src/\S*)$", line):
            sources += m.group(1).split()
    return sources


def _imported_by_notebooks() -> set[str]:
    """The top-level modules the chapters' pages and the exercise notebooks (with their tests) import."""
    modules = set()
    for page in [*ROOT.glob("book/*.md"), *ROOT.glob("solutions/*/*.md")]:
        notebook = jupytext.read(page)
        for cell in notebook.cells:
            if cell.cell_type != "code":
                continue
            source = "\n".join(l for l in cell.source.splitlines() if not l.lstrip().startswith(("%", "!")))
            for node in ast.walk(ast.parse(source)):
                if isinstance(node, ast.Import):
                    modules |= {a.name.split(".")[0] for a in node.names}
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    modules.add(node.module.split(".")[0])
    return modules


def _course_modules() -> set[str]:
    """Every module of the course's packages (the grader's too), by its dotted name."""
    names = set()
    for package in course_packages():
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] not in ("__main__", "nbgrader_config"):  # a CLI; a file traitlets runs
                names.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def test_the_images_servers_are_students_unless_the_hub_says_instructor():
    dockerfile = (HERE / "Dockerfile").read_text()
    path = re.search(r"JUPYTER_CONFIG_PATH=(\S+)", dockerfile).group(1).split(":")
    assert path == ["/etc/course/students", "/etc/course/all"]  # formgrader off (students/jupyter_server_config.json)
    for role in ("students", "instructors", "all"):
        assert f"COPY deploy/jupyterhub/{role} /etc/course/{role}" in dockerfile


def test_the_image_never_holds_the_solutions():
    assert not [s for s in _dockerfile_sources() if s.split("/")[0] in ("solutions", ".", "release")]


@pytest.mark.slow
def test_the_images_installation_imports_what_the_notebooks_and_the_grader_import(tmp_path):
    source = tmp_path / "src"
    for path in _dockerfile_sources():
        copy = shutil.copytree if (ROOT / path).is_dir() else shutil.copy2
        (source / path).parent.mkdir(parents=True, exist_ok=True)
        copy(ROOT / path, source / path)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    installed = subprocess.run([str(source / "deploy" / "kubernetes" / "install.sh"), str(venv)],
                               capture_output=True, text=True, timeout=900)
    assert installed.returncode == 0, installed.stderr[-3000:]
    servers = {"jupyterhub", "jupyterlab", "nbgrader", "nbgitpuller"}  # jupyterhub-singleuser, its extensions
    modules = sorted(_imported_by_notebooks() | _course_modules() | servers)
    probe = "import importlib, sys\nfor m in sys.argv[1:]:\n    importlib.import_module(m)\n"
    imported = subprocess.run([str(venv / "bin" / "python"), "-c", probe, *modules], cwd=tmp_path, capture_output=True,
                              text=True, timeout=600, env={"PATH": os.environ["PATH"], "MPLBACKEND": "Agg"})
    assert imported.returncode == 0, imported.stderr[-3000:]
    assert not (source / "solutions").exists()


def test_the_capacity_plan_s_measurement_reads_a_kernel_s_peak_memory_and_cpu_time(tmp_path):
    """deploy/kubernetes/measure_kernel.py, which the capacity plan's table names, on a notebook that holds 200 MiB
    for a moment and spends CPU time: the peak sees the 200 MiB, what the kernel holds after does not."""
    import nbformat

    sys.path.insert(0, str(HERE))
    from measure_kernel import measure

    notebook = tmp_path / "heavy.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import time\nblock = bytearray(200 * 2**20)\nfor i in range(0, len(block), 4096):\n    block[i] = 1\n"
        "del block\nstart = time.process_time()\nwhile time.process_time() - start < 0.5:\n    pass")]), notebook)
    peak, held, cpu = measure(notebook)
    assert peak - held > 150  # MiB: the 200 MiB were held at the peak, and given back
    assert cpu >= 0.5
