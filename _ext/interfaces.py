"""The ``{interface}`` directive: a definition of the course's code shown as its interface, not its answer.

```{interface} tfm_ref/blocks.py EncoderBlock
```

shows the signature and docstring of ``EncoderBlock`` (a class: with its methods'), each body cut to ``...``:
what an exercise asks the reader to write stays theirs to write (tests/test_site.py finds no solution in the
site), while the page still shows where each piece sits and what it takes and returns.
"""
from __future__ import annotations

import ast
from pathlib import Path

from docutils import nodes
from sphinx.util.docutils import SphinxDirective

ROOT = Path(__file__).resolve().parents[1]


def interface(source: str, name: str) -> str:
    """The top-level function or class ``name`` of ``source`` with every body cut to its docstring and ``...``.

    Raises:
        LookupError: ``source`` defines no function or class ``name``.
    """
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return ast.unparse(_cut(node))
    raise LookupError(f"no function or class {name!r}")


def _cut(node: ast.AST) -> ast.AST:
    docstring = ast.get_docstring(node, clean=False)
    kept = [ast.Expr(ast.Constant(docstring))] if docstring else []
    if isinstance(node, ast.ClassDef):
        methods = [_cut(child) for child in node.body if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))]
        node.body = kept + methods or [ast.Expr(ast.Constant(...))]
    else:
        node.body = kept + [ast.Expr(ast.Constant(...))]
    return node


class Interface(SphinxDirective):
    required_arguments = 2  # the file (from the repository's root), the name

    def run(self) -> list[nodes.Node]:
        path, name = self.arguments
        self.env.note_dependency(str(ROOT / path))
        try:
            code = interface((ROOT / path).read_text(encoding="utf-8"), name)
        except (OSError, LookupError, SyntaxError) as error:
            return [self.state.document.reporter.error(f"{{interface}} {path} {name}: {error}", line=self.lineno)]
        block = nodes.literal_block(code, code, language="python")
        caption = nodes.caption(path, "", nodes.literal(path, path))
        container = nodes.container("", caption, block, classes=["literal-block-wrapper"], literal_block=True)
        self.set_source_info(container)
        return [container]


def setup(app):
    app.add_directive("interface", Interface)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
