"""Where things are: the course root, the assignments (found by folder), the nbgrader config.

An assignment is a folder ``solutions/<id>/`` holding ``<id>.md`` (MyST markdown with nbgrader
metadata). Nothing else registers it.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from traitlets.config import Config
from traitlets.config.loader import PyFileConfigLoader

__all__ = ["ROOT", "SOLUTIONS", "CONFIG_FILE", "assignment_ids", "source_markdown", "released_notebook", "nbgrader_config",
           "tools_on_path"]

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions"
CONFIG_FILE = Path(__file__).resolve().parent / "nbgrader_config.py"


def assignment_ids(solutions: Path = SOLUTIONS) -> list[str]:
    """Every ``solutions/<id>/<id>.md``, sorted by id."""
    return sorted(p.parent.name for p in solutions.glob("*/*.md") if p.stem == p.parent.name)


def source_markdown(assignment: str, solutions: Path = SOLUTIONS) -> Path:
    path = solutions / assignment / f"{assignment}.md"
    if not path.is_file():
        raise ValueError(f"no assignment {assignment!r}: {path} does not exist (have {assignment_ids(solutions)})")
    return path


def released_notebook(assignment: str, root: Path = ROOT) -> Path:
    """Where nbgrader writes the student version: ``release/<id>/<id>.ipynb``."""
    return root / "release" / assignment / f"{assignment}.ipynb"


def nbgrader_config(db_url: str | None = None, root: Path = ROOT) -> Config:
    """``autograde/nbgrader_config.py``, with the course root and gradebook URL overridable."""
    config = PyFileConfigLoader(CONFIG_FILE.name, path=str(CONFIG_FILE.parent)).load_config()
    config.CourseDirectory.root = str(root)
    if db_url:
        config.CourseDirectory.db_url = db_url
    return config


def tools_on_path() -> None:
    """nbgrader's gradebook runs the ``alembic`` command: make this interpreter's scripts findable
    when it was started by path (``.venv/bin/python -m autograde``) without activating the venv."""
    scripts = str(Path(sys.executable).parent)
    if scripts not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = scripts + os.pathsep + os.environ.get("PATH", "")
