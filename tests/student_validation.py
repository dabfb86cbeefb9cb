"""`nbgrader validate` as a student runs it: in the notebook's folder, where the students' settings are."""
import subprocess
import sys
from pathlib import Path


def validate(folder: Path, name: str) -> str:
    """What ``nbgrader validate NAME``, run in ``folder``, prints."""
    nbgrader = Path(sys.executable).with_name("nbgrader")
    result = subprocess.run([str(nbgrader), "validate", name], cwd=folder, capture_output=True, text=True, timeout=300)
    return result.stdout + result.stderr
