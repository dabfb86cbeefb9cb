"""JupyterHub for the course: every user's Jupyter server runs as that user's system account (their
files and processes are theirs), with nbgrader's exchange between students and instructors.

    sudo COURSE_ROOT=/home/teacher/course COURSE_INSTRUCTORS=teacher \
        /opt/course/bin/jupyterhub -f /etc/jupyterhub/course/jupyterhub_config.py

Set by environment:
    COURSE_ROOT         the instructors' checkout of the course (solutions/, release/, submitted/, the
                        gradebook), inside an instructor's home: no student may read it
    COURSE_INSTRUCTORS  comma-separated accounts that release and grade; the others are students
    NBGRADER_EXCHANGE   the exchange folder, created writable by all if missing [/srv/nbgrader/exchange]

The users' servers run this hub's Python environment (which has the course's packages, not its
solutions) and read the nbgrader settings beside this file through JUPYTER_CONFIG_PATH: ``all/``
(everyone: the course id, read from the course's own config, and the exchange), ``instructors/``
(the course root and its autograde/nbgrader_config.py) or ``students/`` (no formgrader, no
assignment-creation tools). So the environment and this folder must be readable by all. Run the
hub as root: it starts servers as other users.
"""
import os
import sys
from pathlib import Path

from traitlets.config.loader import PyFileConfigLoader

if not os.environ.get("COURSE_ROOT") or not os.environ.get("COURSE_INSTRUCTORS"):
    raise SystemExit("jupyterhub_config.py: set COURSE_ROOT (the instructors' checkout of the course) and "
                     "COURSE_INSTRUCTORS (their accounts, comma-separated)")
HERE = Path(__file__).resolve().parent
COURSE_ROOT = Path(os.environ["COURSE_ROOT"]).resolve()
INSTRUCTORS = set(os.environ["COURSE_INSTRUCTORS"].split(","))
EXCHANGE = Path(os.environ.get("NBGRADER_EXCHANGE", "/srv/nbgrader/exchange"))
COURSE_ID = PyFileConfigLoader("nbgrader_config.py", path=str(COURSE_ROOT / "autograde")).load_config() \
    .CourseDirectory.course_id

if not EXCHANGE.exists():  # nbgrader's exchange: every user writes into it, the modes of what is inside keep them apart
    EXCHANGE.mkdir(parents=True)
    EXCHANGE.chmod(0o777)

c = get_config()  # noqa: F821 (provided by JupyterHub when it loads this file)

c.JupyterHub.authenticator_class = "pam"  # the machine's accounts and passwords
c.Authenticator.allow_all = True  # every account may log in; restrict with c.PAMAuthenticator.allowed_groups
c.Authenticator.admin_users = INSTRUCTORS
c.JupyterHub.spawner_class = "localprocess"
c.Spawner.cmd = [str(Path(sys.executable).parent / "jupyterhub-singleuser")]  # this environment's, with nbgrader
c.Spawner.default_url = "/lab"
c.Spawner.start_timeout = c.Spawner.http_timeout = 120


def configure_nbgrader(spawner):
    """The nbgrader settings of the user's role; an instructor's server opens at the course root,
    where formgrader finds the course."""
    role = "instructors" if spawner.user.name in INSTRUCTORS else "students"
    spawner.environment.update({
        "JUPYTER_CONFIG_PATH": os.pathsep.join([str(HERE / role), str(HERE / "all")]),
        "NBGRADER_COURSE_ID": COURSE_ID,
        "NBGRADER_EXCHANGE": str(EXCHANGE),
        "COURSE_ROOT": str(COURSE_ROOT),
    })
    if role == "instructors":
        spawner.notebook_dir = str(COURSE_ROOT)


c.Spawner.pre_spawn_hook = configure_nbgrader
