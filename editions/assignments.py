"""Where the exercises are: ``solutions/<id>/<id>.md`` (an assignment: MyST markdown with nbgrader metadata;
nothing else registers it) and the student notebooks released from it. The repository is one course root; a test
or a deployment may make others.
"""
from __future__ import annotations

from pathlib import Path

__all__ = ["ROOT", "SOLUTIONS", "assignment_ids", "source_markdown", "released_notebook", "translated_notebook"]

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions"


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


def translated_notebook(assignment: str, language: str, root: Path = ROOT) -> Path:
    """Where release writes the student version in another language: ``release/<language>/<id>/<id>.ipynb``."""
    return root / "release" / language / assignment / f"{assignment}.ipynb"
