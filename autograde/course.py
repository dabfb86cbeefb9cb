"""The course's nbgrader settings: ``autograde/nbgrader_config.py`` under a course root (the assignments and
their notebooks are found by `editions.assignments`), and what Jupyter's config path adds for a deployment.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from jupyter_core.paths import jupyter_config_path
from traitlets.config import Config
from traitlets.config.loader import PyFileConfigLoader

from editions.assignments import ROOT

__all__ = ["CONFIG_NAME", "default_root", "nbgrader_config", "tools_on_path", "course_options"]

CONFIG_NAME = "nbgrader_config.py"


def _deployment_config() -> Config:
    """Every nbgrader_config.py on Jupyter's config path, the first path winning, as nbgrader loads them."""
    config = Config()
    for folder in reversed(jupyter_config_path()):
        if os.path.isfile(os.path.join(folder, CONFIG_NAME)):
            config.merge(PyFileConfigLoader(CONFIG_NAME, path=folder).load_config())
    return config


def default_root() -> Path:
    """The course root that nbgrader's config on Jupyter's path names (an instructor's on JupyterHub), else this one."""
    return Path(_deployment_config().CourseDirectory.get("root", ROOT)).resolve()


def course_options() -> argparse.ArgumentParser:
    """``--root`` and ``--db``, the options of every instructor's command that reads the course (a parent parser)."""
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument("--root", type=Path, help="the course root (default: the one your nbgrader config names, "
                         "as on the course's JupyterHub, else this repository)")
    options.add_argument("--db", help="gradebook SQLAlchemy URL (default: the nbgrader config's, else gradebook.db "
                         "at the course root)")
    return options


def nbgrader_config(db_url: str | None = None, root: Path = ROOT) -> Config:
    """What nbgrader's commands read in ``root/autograde``: every nbgrader_config.py on Jupyter's config path, then
    the course's; the gradebook is ``db_url``, else the configured one, else ``root/gradebook.db``. Raises
    ValueError if ``root`` has no ``autograde/nbgrader_config.py``."""
    from nbgrader.coursedir import CourseDirectory

    course_config = root / "autograde" / CONFIG_NAME
    if not course_config.is_file():
        raise ValueError(f"{root} is not a course root: it has no autograde/{CONFIG_NAME}")
    config = _deployment_config()
    config.merge(PyFileConfigLoader(CONFIG_NAME, path=str(course_config.parent)).load_config())
    config.CourseDirectory.root = str(root)
    config.CourseDirectory.db_url = db_url or CourseDirectory(config=config).db_url
    return config


def tools_on_path() -> None:
    """Put this interpreter's scripts on PATH: nbgrader's gradebook runs ``alembic``, even from an unactivated venv."""
    scripts = str(Path(sys.executable).parent)
    if scripts not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = scripts + os.pathsep + os.environ.get("PATH", "")
