"""The course's own packages: those pyproject.toml installs (its ``packages.find`` include list)."""
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def course_packages() -> tuple[str, ...]:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return tuple(pattern.rstrip("*") for pattern in pyproject["tool"]["setuptools"]["packages"]["find"]["include"])
