"""The book's editions, one per language: Sphinx builds of the same sources that make one site.

``book_editions`` in _config.yml lists them as ``[language, folder, name]``. The first is the
language of the sources and sits at the site's root (``jupyter-book build .`` builds it alone); each
other one is built with Sphinx's ``language`` set and placed in its folder of the same site
(``locales/build.py`` builds them all, ``make book``). Every page gets a switch in its header to the
same page in the other editions: a relative link, so that the site works at any address and from
file://.

An edition in a folder is built apart, in its own build folder (myst-nb, the theme and the notebook
export expect the executed notebooks beside the output folder), and copied into the site, named by
``book_site``, when its build succeeds. It links to what the root edition made rather than making it
again: the widgets' states (``_ext/widget_states.py`` uses `site_folder` and `site_root`); and it
shares the root's execution cache (``locales/build.py``), so it executes nothing. Its ``_static`` files that
are the same as the root's (the theme, MathJax: all but a few that speak its language) are not copied: its
pages link to the root's (`share_static`), so a reader's browser fetches them once for both editions.

The switch keeps the reader's place: ``_static/language-switch.js`` adds the address's ``#section`` to the
link when it is followed (the headings keep the sources' anchors in every edition).
"""
from __future__ import annotations

import filecmp
import os
import re
import shutil
from pathlib import Path
from typing import NamedTuple

from sphinx.util import logging
from sphinx.util.osutil import relative_uri

__all__ = ["Edition", "edition", "editions", "setup", "share_static", "site_folder", "site_root"]

SWITCH_TEMPLATE = "language-switch.html"
logger = logging.getLogger(__name__)


class Edition(NamedTuple):
    language: str  # Sphinx's language code, e.g. zh_CN
    folder: str  # where the edition sits in the site ("" for the root)
    name: str  # what the switch calls it, in its own language

    @property
    def prefix(self) -> str:
        """The edition's folder as the start of a URL: "" or "zh/"."""
        return f"{self.folder.strip('/')}/" if self.folder.strip("/") else ""

    @property
    def tag(self) -> str:
        """The language as HTML's lang attribute writes it (zh-CN)."""
        return self.language.replace("_", "-")


def editions(config) -> list[Edition]:
    return [Edition(*entry) for entry in config.book_editions]


def edition(config) -> Edition:
    """The edition this build makes: the one of its ``language``."""
    found = [e for e in editions(config) if e.language == (config.language or "en")]
    if not found:
        raise ValueError(f"language {config.language!r} is not one of book_editions {config.book_editions}")
    return found[0]


def site_root(config) -> str:
    """The site's root as a URL relative to this edition's root: "" at the root, "../" for zh/."""
    return "../" * edition(config).prefix.count("/")


def site_folder(app) -> Path:
    """The folder that holds the whole site: this build's output folder for the root edition."""
    return Path(app.config.book_site or app.outdir).resolve()


def _check(app, config) -> None:
    if edition(config).prefix and not config.book_site:  # edition() also stops a language of no edition here
        raise ValueError(f"the {config.language} edition goes into a site: set book_site (locales/build.py does)")


def _place_switch(app, config) -> None:
    if len(editions(config)) < 2:
        return
    # New values, not changes in place: a default list or dict of Sphinx's is shared by every build of the process.
    config.templates_path = [*config.templates_path, str(Path(__file__).parent / "templates")]
    header = config.html_theme_options.get("article_header_end", ["article-header-buttons.html"])  # the theme's
    config.html_theme_options = {**config.html_theme_options, "article_header_end": [SWITCH_TEMPLATE, *header]}


def _switch_links(app, pagename, templatename, context, doctree) -> None:
    """The same page in every other edition: (name, lang tag, relative URL)."""
    here = app.builder.get_target_uri(pagename)
    root = site_root(app.config)
    context["language_switch"] = [(other.name, other.tag, relative_uri(here, root + other.prefix + here))
                                  for other in editions(app.config) if other != edition(app.config)]


# A link to a file of _static in a page: the quote or parenthesis before it, the way up to the edition's root.
_STATIC_LINK = re.compile(r"""(?<=["'(])((?:\.\./)*)_static/([^"'?#)\s]+)""")


def share_static(edition_dir: Path, root_static: Path, depth: int) -> list[str]:
    """Link the pages of the edition in ``edition_dir`` (``depth`` folders below the site's root), and the style
    sheets it keeps, to the files of ``root_static`` that its own ``_static`` has byte for byte, and delete its
    copies: the files deleted."""
    static = edition_dir / "_static"
    shared = sorted(path.relative_to(static).as_posix() for path in static.rglob("*")
                    if path.is_file() and (root_static / path.relative_to(static)).is_file()
                    and filecmp.cmp(path, root_static / path.relative_to(static), shallow=False))
    kept = set(shared)

    def relink(match: re.Match) -> str:
        up, name = match.groups()
        return f"{up}{'../' * depth}_static/{name}" if name in kept else match.group(0)

    for page in edition_dir.rglob("*.html"):
        if static in page.parents:
            continue  # the theme's templates among the static files, which no page loads
        text = page.read_text(encoding="utf-8")
        relinked = _STATIC_LINK.sub(relink, text)
        if relinked != text:
            page.write_text(relinked, encoding="utf-8")
    for sheet in static.rglob("*.css"):  # a style sheet of its own may load a shared file (a font)
        if sheet.relative_to(static).as_posix() not in kept:
            _relink_style_sheet(sheet, static, root_static, kept)
    for name in shared:
        (static / name).unlink()
    for folder in sorted((p for p in static.rglob("*") if p.is_dir()), reverse=True):  # the deepest first
        if not any(folder.iterdir()):
            folder.rmdir()
    return shared


_URL = re.compile(r"""url\((['"]?)([^'")]+)\1\)""")


def _relink_style_sheet(sheet: Path, static: Path, root_static: Path, shared: set[str]) -> None:
    """Point the ``url(…)`` of ``sheet`` (in ``static``) that name one of the ``shared`` files at the root's copy."""
    def relink(match: re.Match) -> str:
        quote, url = match.groups()
        path, query = re.match(r"([^?#]*)(.*)", url).groups()
        if ":" in path or path.startswith("/"):
            return match.group(0)  # data: and absolute URLs
        target = os.path.normpath(sheet.parent / path)
        name = Path(os.path.relpath(target, static)).as_posix()
        if name not in shared:
            return match.group(0)
        return f"url({quote}{Path(os.path.relpath(root_static / name, sheet.parent)).as_posix()}{query}{quote})"

    text = sheet.read_text(encoding="utf-8")
    relinked = _URL.sub(relink, text)
    if relinked != text:
        sheet.write_text(relinked, encoding="utf-8")


def _copy_into_site(app, exception) -> None:
    folder = edition(app.config).prefix
    if exception is None and app.builder.format == "html" and folder:
        placed = site_folder(app) / folder
        shutil.rmtree(placed, ignore_errors=True)  # nothing stale: the edition as this build made it
        shutil.copytree(app.outdir, placed)
        shared = share_static(placed, site_folder(app) / "_static", folder.count("/"))
        logger.info(f"the {app.config.language} edition is in {placed}, "
                    f"with {len(shared)} files of the root's _static")


def setup(app):
    app.add_config_value("book_editions", [["en", "", "English"]], "env", types=[list])
    app.add_config_value("book_site", "", "env", types=[str])
    app.connect("config-inited", _check)
    app.connect("config-inited", _place_switch)
    app.connect("html-page-context", _switch_links)
    app.connect("build-finished", _copy_into_site, priority=900)  # after the other extensions' last writes
    return {"parallel_read_safe": True, "parallel_write_safe": True}
