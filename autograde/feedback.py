"""The feedback a student receives: one self-contained HTML page per notebook.

It shows what the student saw — the released cells, hidden tests removed — with each test
cell's score and the check's message (the likely mistake and the smallest failing input).
Hidden test cells show their released comment line and only the exception message, never
their source or a traceback into it.
"""
from __future__ import annotations

import html
from pathlib import Path

import mistune

from .notebook import GradedCell

__all__ = ["feedback_html", "feedback_path", "write_feedback"]

_STYLE = """
body{font-family:system-ui,sans-serif;max-width:960px;margin:2em auto;padding:0 1em;color:#222}
pre{background:#f6f8fa;padding:.6em;overflow-x:auto;border-radius:4px}
.cell{margin:1em 0}.out{background:#fff;border-left:3px solid #ccc}.err{border-left:3px solid #c33;background:#fff5f5}
.score{font-weight:bold;float:right}.ok{color:#070}.bad{color:#b00}
"""


def feedback_html(title: str, cells: list[GradedCell], results: list[dict], score: float, max_score: float) -> str:
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
             f"<style>{_STYLE}</style></head><body>",
             f"<h1>{html.escape(title)}</h1><p class='score'>Score: {score:g} / {max_score:g}</p>"]
    for cell, result in zip(cells, results):
        if cell.kind == "markdown":
            parts.append(f"<div class='cell'>{mistune.html(cell.shown)}</div>")
            continue
        parts.append("<div class='cell'>")
        if cell.kind == "test":
            earned = cell.points if result["status"] == "ok" else 0.0
            css = "ok" if earned else "bad"
            parts.append(f"<p class='score {css}'>{earned:g} / {cell.points:g} points</p>")
        parts.append(f"<pre>{html.escape(cell.shown)}</pre>")
        if result.get("stdout"):
            parts.append(f"<pre class='out'>{html.escape(result['stdout'])}</pre>")
        if result["status"] not in ("ok", "skipped") or (result["status"] == "skipped" and cell.kind == "test"):
            parts.append(f"<pre class='out err'>{html.escape(result.get('error') or result['status'])}</pre>")
        parts.append("</div>")
    parts.append("</body></html>")
    return "\n".join(parts)


def feedback_path(out: Path, student_id: str, assignment: str) -> Path:
    """``OUT/feedback/<student_id>/<assignment>/<assignment>.html``, where nbgrader puts feedback."""
    return out / "feedback" / student_id / assignment / f"{assignment}.html"


def write_feedback(path: Path, *args, **kwargs) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(feedback_html(*args, **kwargs), encoding="utf-8")
    return path
