"""What an instructor notebook (``solutions/<id>/<id>.md``) defines, for tests that run its solutions."""
from __future__ import annotations

import jupytext

from editions.assignments import source_markdown


def solution_namespace(assignment: str) -> dict:
    """The names the notebook's setup and solution cells define, once executed."""
    namespace: dict = {}
    for cell in jupytext.read(source_markdown(assignment)).cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and (meta.get("solution") or meta.get("grade_id") == "setup"):
            exec(cell.source, namespace)
    return namespace
