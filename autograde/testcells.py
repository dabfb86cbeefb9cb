"""What a graded test cell asks for: the checks it runs, read from its source, never executed.

A test cell holds only ``from autograde import check`` and ``check("chapter.key", name[, hidden=True])``
calls: a student's kernel runs it; grading reads the calls and runs the checks itself (`autograde.session`).
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

__all__ = ["CheckCall", "GradedCellError", "parse_test_cell"]


@dataclass(frozen=True)
class CheckCall:
    key: str  # "ch01_attention.softmax"
    name: str  # the student's function or class, a name in the notebook
    hidden: bool


class GradedCellError(ValueError):
    """A graded test cell that is not only check calls."""


def parse_test_cell(source: str) -> list[CheckCall]:
    """The check calls of a test cell, in order; GradedCellError if it holds anything else than the import and calls."""
    calls = []
    for statement in ast.parse(source).body:
        if isinstance(statement, ast.ImportFrom) and statement.module == "autograde" \
                and [a.name for a in statement.names] == ["check"] and statement.names[0].asname is None:
            continue
        call = _check_call(statement)
        if call is None:
            raise GradedCellError("a graded test cell may hold only `from autograde import check` and "
                                f"check(\"chapter.key\", name[, hidden=True]) calls; found: {ast.unparse(statement)}")
        calls.append(call)
    if not calls:
        raise GradedCellError("a graded test cell runs no check")
    return calls


def _check_call(statement: ast.stmt) -> CheckCall | None:
    if not (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)):
        return None
    call = statement.value
    if not (isinstance(call.func, ast.Name) and call.func.id == "check" and len(call.args) == 2):
        return None
    key, name = call.args
    if not (isinstance(key, ast.Constant) and isinstance(key.value, str) and isinstance(name, ast.Name)):
        return None
    hidden = False
    for keyword in call.keywords:
        if keyword.arg != "hidden" or not (isinstance(keyword.value, ast.Constant) and isinstance(keyword.value.value, bool)):
            return None
        hidden = keyword.value.value
    return CheckCall(key.value, name.id, hidden)
