"""_ext/interfaces.py: the whole-model page shows each piece's interface, never the body an exercise asks for."""
import ast
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("interfaces", ROOT / "_ext" / "interfaces.py")
interfaces = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(interfaces)


def _bodies(tree: ast.AST) -> list[list[ast.stmt]]:
    return [node.body for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]


@pytest.mark.parametrize(("path", "name"), [("tfm_ref/attention.py", "softmax"),
                                            ("tfm_ref/blocks.py", "EncoderBlock"),
                                            ("tfm_ref/multihead.py", "MultiHeadAttention")])
def test_an_interface_keeps_signatures_and_docstrings_and_cuts_every_body(path, name):
    source = (ROOT / path).read_text(encoding="utf-8")
    shown = ast.parse(interfaces.interface(source, name))
    original = next(node for node in ast.parse(source).body if getattr(node, "name", None) == name)
    assert ast.get_docstring(shown.body[0]) == ast.get_docstring(original)
    for body in _bodies(shown):
        assert isinstance(body[-1].value, ast.Constant) and body[-1].value.value is Ellipsis
        assert all(isinstance(statement, ast.Expr) for statement in body)  # a docstring and `...`, nothing else
    if isinstance(original, ast.ClassDef):  # every method is shown, none of their code
        methods = {f.name for f in original.body if isinstance(f, ast.FunctionDef)}
        assert {f.name for f in shown.body[0].body if isinstance(f, ast.FunctionDef)} == methods


def test_an_unknown_name_is_named():
    with pytest.raises(LookupError, match="no function or class 'nothing'"):
        interfaces.interface("def something():\n    pass\n", "nothing")
