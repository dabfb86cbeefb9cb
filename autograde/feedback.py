"""The feedback a student receives: ``feedback/<student>/<assignment>/<assignment>.html``.

Written for each graded notebook, where nbgrader's ``generate_feedback`` puts its pages and with
what ``nbgrader release_feedback`` needs beside it (``timestamp.txt``, ``submission_secret.txt``).
The page is made from the autograded notebook, hidden tests removed by nbgrader's own
``ClearHiddenTests``: each test cell with its score and the check's message (the likely mistake
and the smallest failing input), the student's code and what it printed, and the late penalty.

It stands alone: math is MathML (converted here, drawn by the browser, nothing fetched), long
messages wrap, it follows the reader's light or dark mode, and a recognised mistake's fix is
folded behind "How to fix it", so that the hint comes first. "Try it" widget cells are not run
when grading: the page leaves them, and the text that introduces them, out.

After grading by hand in formgrader, ``nbgrader generate_feedback --force`` remakes the pages
with nbgrader's own template (the course config hides hidden tests there too).
"""
from __future__ import annotations

import html
import re
import shutil
from pathlib import Path

import mistune
import nbformat
from latex2mathml.converter import convert as tex_to_mathml

from .checking import FIX_PREFIX
from .notebook import is_widget

__all__ = ["feedback_path", "feedback_html", "write_feedback"]


_STYLE = """
:root{color-scheme:light dark;--fg:#1f2328;--bg:#fff;--code:#f6f8fa;--line:#d0d7de;--bad:#b42318;--badbg:#fff5f5;--ok:#1a7f37}
@media (prefers-color-scheme:dark){:root{--fg:#e6edf3;--bg:#0d1117;--code:#161b22;--line:#30363d;--bad:#ff7b72;
--badbg:#2d1214;--ok:#3fb950}}
body{font-family:system-ui,sans-serif;max-width:960px;margin:2em auto;padding:0 1em;color:var(--fg);background:var(--bg);
line-height:1.5}
pre{background:var(--code);padding:.6em;border-radius:4px;white-space:pre-wrap;overflow-wrap:anywhere;margin:.4em 0}
code{overflow-wrap:anywhere}
table{border-collapse:collapse;display:block;overflow-x:auto;max-width:100%}td,th{border:1px solid var(--line);padding:.2em .6em}
.cell{margin:1em 0}.out{border-left:3px solid var(--line)}.err{border-left:3px solid var(--bad);background:var(--badbg)}
.points{font-weight:bold;margin:.2em 0}.ok{color:var(--ok)}.bad{color:var(--bad)}
details.fix{margin:.2em 0 .6em 1em}details.fix summary{cursor:pointer;font-weight:bold}
math[display=block]{overflow-x:auto;overflow-y:hidden;max-width:100%}
"""


class _MathRenderer(mistune.HTMLRenderer):
    """Markdown with $…$ and $$…$$ drawn as MathML."""

    def inline_math(self, text: str) -> str:
        return _mathml(text, "inline")

    def block_math(self, text: str) -> str:
        return _mathml(text, "block")


def _mathml(tex: str, display: str) -> str:
    try:
        return tex_to_mathml(tex, display=display)
    except Exception:  # a macro the converter does not know: the source is still readable
        return f"<code>{html.escape(tex)}</code>"


_markdown = mistune.create_markdown(renderer=_MathRenderer(escape=False), plugins=["math", "table", "strikethrough"])


def feedback_path(out: Path, student_id: str, assignment: str) -> Path:
    """Where nbgrader puts the feedback page of one notebook, under the course root ``out``."""
    return out / "feedback" / student_id / assignment / f"{assignment}.html"


def _text(value: object) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def _message(lines: list[str]) -> str:
    """A check's message (an error output's lines), its fix folded behind a toggle."""
    shown = [line for line in lines if not line.startswith(FIX_PREFIX)]
    fixes = [line.removeprefix(FIX_PREFIX) for line in lines if line.startswith(FIX_PREFIX)]
    return (f"<pre class='out err'>{html.escape(chr(10).join(shown))}</pre>"
            + "".join(f"<details class='fix'><summary>How to fix it</summary><pre>{html.escape(fix)}</pre></details>"
                      for fix in fixes))


def _outputs(cell: nbformat.NotebookNode) -> str:
    parts = []
    for output in cell.get("outputs", []):
        if output.output_type == "stream":
            parts.append(f"<pre class='out'>{html.escape(_text(output.text))}</pre>")
        elif output.output_type == "error":
            parts.append(_message([line for entry in output.traceback for line in _text(entry).splitlines()]))
    return "".join(parts)


def _anchor(grade_id: str) -> str:
    return "cell-" + re.sub(r"[^A-Za-z0-9_-]", "-", grade_id)


def feedback_html(title: str, notebook: nbformat.NotebookNode, scores: dict[str, float], penalty: float = 0.0) -> str:
    """The page for ``notebook`` (hidden tests already removed), ``scores`` by test cell's grade_id."""
    points = {c.metadata["nbgrader"]["grade_id"]: float(c.metadata["nbgrader"].get("points", 0))
              for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade") and c.cell_type == "code"}
    total, maximum = sum(scores.get(g, 0.0) for g in points), sum(points.values())
    late = f" — Late submission penalty: {penalty:g} points taken off" if penalty else ""
    rows = "".join(
        f"<tr><td><a href='#{_anchor(g)}'>{html.escape(g)}</a></td><td class='{'ok' if scores.get(g) else 'bad'}'>"
        f"{'✓' if scores.get(g) else '✗'} {scores.get(g, 0.0):g} / {p:g}</td></tr>" for g, p in points.items())
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
             "<meta name='viewport' content='width=device-width, initial-scale=1'>",
             f"<style>{_STYLE}</style></head><body>", f"<h1>{html.escape(title)}</h1>",
             f"<p class='points'>Score: {max(total - penalty, 0.0):g} / {maximum:g}{late}</p>",
             f"<table><thead><tr><th>check</th><th>points</th></tr></thead><tbody>{rows}</tbody></table>"]
    cells = notebook.cells
    for index, cell in enumerate(cells):
        introduces_widget = index + 1 < len(cells) and is_widget(cells[index + 1])
        if is_widget(cell) or (cell.cell_type == "markdown" and introduces_widget):
            continue  # "try it" cells are not run when grading
        if cell.cell_type == "markdown":
            parts.append(f"<div class='cell'>{_markdown(_text(cell.source))}</div>")
            continue
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in points:
            earned = scores.get(grade_id, 0.0)
            parts.append(f"<div class='cell' id='{_anchor(grade_id)}'><p class='points {'ok' if earned else 'bad'}'>"
                         f"{earned:g} / {points[grade_id]:g} points</p>")
        else:
            parts.append("<div class='cell'>")
        parts.append(f"<pre>{html.escape(_text(cell.source))}</pre>{_outputs(cell)}</div>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_feedback(out: Path, student_id: str, assignment: str, scores: dict[str, float], penalty: float = 0.0) -> Path:
    """The page of ``out/autograded/<student>/<assignment>/<assignment>.ipynb``, and the files
    ``release_feedback`` reads, at `feedback_path`."""
    from nbgrader.preprocessors import ClearHiddenTests

    autograded = out / "autograded" / student_id / assignment
    notebook = nbformat.read(autograded / f"{assignment}.ipynb", as_version=4)
    notebook, _ = ClearHiddenTests(enforce_metadata=False).preprocess(notebook, {})
    page = feedback_path(out, student_id, assignment)
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(feedback_html(f"{assignment} — {student_id}", notebook, scores, penalty), encoding="utf-8")
    for name in ("timestamp.txt", "submission_secret.txt"):
        if (autograded / name).exists():
            shutil.copyfile(autograded / name, page.parent / name)
    return page
