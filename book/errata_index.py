"""Find the erratum boxes of the book's pages, for the errata page (book/errata.md).

An erratum box is a MyST admonition of exactly this form (see the team brief)::

    ```{admonition} Erratum — <short title>
    :class: erratum
    **Note:** `<seed file name>` … what the note says …
    **Correct:** … the corrected value …
    ```

The fence may be three or more backticks or colons. Plain code blocks (a fence whose info
string is not a ``{directive}``) are skipped, so an example of the form shown inside one is not
counted; directives such as dropdowns are searched inside. Seed files are named like
``001_157e113c0f4243ed.txt``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Erratum", "find_errata", "errata_table_html"]

_OPEN = re.compile(r"^(?P<fence>`{3,}|:{3,})\{admonition\}\s*Erratum\s*[—–-]\s*(?P<title>.+?)\s*$")
_SEED = re.compile(r"\b\d{3}_[0-9a-f]{16}\.txt\b")
_HEADING = re.compile(r"^#\s+(.+?)\s*$")
_FENCE = re.compile(r"^(?P<fence>`{3,}|~{3,}|:{3,})(?P<info>.*)$")


@dataclass(frozen=True)
class Erratum:
    """One erratum box: where it is, its title and the note files it names."""

    page: str  # file stem, e.g. "01_attention"
    page_title: str
    title: str
    seed_files: tuple[str, ...]
    line: int  # 1-based line of the opening fence
    text: str = ""  # the box's body, for checking its quotes against the notes


def _page_title(lines: list[str]) -> str:
    in_front_matter = bool(lines) and lines[0].strip() == "---"
    for i, line in enumerate(lines):
        if in_front_matter:
            if i > 0 and line.strip() == "---":
                in_front_matter = False
            continue
        match = _HEADING.match(line)
        if match:
            return match.group(1)
    return ""


def find_errata(book_dir: str | Path) -> list[Erratum]:
    """Every erratum box in ``book_dir/*.md``, in page order then line order.

    Raises:
        ValueError: a box without ``:class: erratum`` or without a closing fence.
    """
    found = []
    # The introduction first, then the chapters in file-name order (01_, 02_, …).
    for path in sorted(Path(book_dir).glob("*.md"), key=lambda p: (p.stem != "intro", p.name)):
        lines = path.read_text(encoding="utf-8").splitlines()
        page_title = _page_title(lines)
        directives: list[str] = []  # fences of the directives we are inside
        i = 0
        while i < len(lines):
            stripped = lines[i].strip()
            match = _OPEN.match(stripped)
            fence_line = _FENCE.match(stripped)
            if match:
                fence = match.group("fence")
                end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == fence), None)
                if end is None:
                    raise ValueError(f"{path.name}:{i + 1}: erratum box without a closing {fence}")
                body = lines[i + 1:end]
                if not any(line.strip() == ":class: erratum" for line in body):
                    raise ValueError(f"{path.name}:{i + 1}: erratum box without ':class: erratum'")
                seeds = tuple(dict.fromkeys(_SEED.findall("\n".join(body))))
                found.append(Erratum(path.stem, page_title, match.group("title"), seeds, i + 1, "\n".join(body)))
                i = end + 1
            elif directives and stripped == directives[-1]:
                directives.pop()
                i += 1
            elif fence_line and fence_line.group("info").strip().startswith("{"):
                directives.append(fence_line.group("fence"))
                i += 1
            elif fence_line and not fence_line.group("fence").startswith(":"):
                fence = fence_line.group("fence")  # a plain code block: skip it whole
                i = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == fence), len(lines)) + 1
            else:
                i += 1
    return found


def errata_table_html(errata: list[Erratum]) -> str:
    """An HTML table (page, erratum, note file) with links to the built pages."""
    from html import escape

    rows = "".join(
        f'<tr><td>{n}</td><td><a href="{escape(e.page)}.html">{escape(e.page_title or e.page)}</a></td>'
        f"<td>{escape(e.title)}</td><td>{'<br>'.join(f'<code>{escape(s)}</code>' for s in e.seed_files)}</td></tr>"
        for n, e in enumerate(errata, start=1)
    )
    return ('<table class="errata-table"><thead><tr><th>#</th><th>chapter page</th><th>erratum</th>'
            f"<th>note file</th></tr></thead><tbody>{rows}</tbody></table>")
