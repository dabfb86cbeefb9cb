"""The course's part of the hub's configuration on Zero to JupyterHub: the chart runs it as
``hub.extraConfig.course`` (``helm ... --set-file hub.extraConfig.course=deploy/kubernetes/course_hub.py``),
after its own, with ``c`` in scope. Its settings come from ``custom.course`` in values.yaml.

Each user's server runs under a uid of its own, as each account does on one machine, so nbgrader's
exchange keeps students apart by the modes of its files; the hub writes who has which uid where the
exchange's clerk reads it (exchange_clerk.py). An instructor's server also mounts the course root,
opens there and runs formgrader; a student's mounts the exchange alone.
"""
import json
import os
from pathlib import Path

from z2jh import get_config  # the chart's reader of the values, beside its jupyterhub_config.py

COURSE = get_config("custom.course")
INSTRUCTORS = set(COURSE["instructors"])
UID_BASE = COURSE["uidBase"]
RECORDS = Path(COURSE["records"])  # in the hub's pod: hub.extraVolumeMounts
SHARED = "course-shared"
"""The volume (values.yaml, singleuser.storage.extraVolumes) of the exchange, the course root and the
clerk's records, each a folder (subPath) of it; every server mounts the exchange, an instructor's the rest."""


def user_uid(spawner) -> int:
    """A uid no other user has: the hub's id of the user, past every system account."""
    return UID_BASE + spawner.user.id


def record_uid(name: str, uid: int) -> None:
    """``users.json``, the clerk's list of whose is each uid, with ``name``'s; replaced whole, never half written."""
    path = RECORDS / "users.json"
    users = json.loads(path.read_text()) if path.exists() else {}
    if users.get(name) != uid:
        users[name] = uid
        partial = path.with_name(f".{path.name}.{os.getpid()}")
        partial.write_text(json.dumps(users, indent=1, sort_keys=True))
        partial.replace(path)


def configure_course(spawner) -> None:
    """The nbgrader settings of the user's role, and for an instructor the course root and the times."""
    record_uid(spawner.user.name, user_uid(spawner))
    if spawner.user.name not in INSTRUCTORS:
        return
    spawner.environment["JUPYTER_CONFIG_PATH"] = "/etc/course/instructors:/etc/course/all"
    spawner.environment["COURSE_ROOT"] = COURSE["root"]
    spawner.volume_mounts = [*spawner.volume_mounts,
                             {"name": SHARED, "subPath": "course", "mountPath": COURSE["root"]},
                             {"name": SHARED, "subPath": "records", "mountPath": COURSE["records"], "readOnly": True}]
    spawner.notebook_dir = COURSE["root"]


# ``c``: the chart's configuration object, in scope where the chart runs this file.
c.Authenticator.admin_users = INSTRUCTORS  # noqa: F821
c.KubeSpawner.uid = user_uid  # noqa: F821
c.KubeSpawner.pre_spawn_hook = configure_course  # noqa: F821
