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
shares the root's execution cache (``locales/build.py``), so it executes nothing.
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import NamedTuple

from sphinx.util import logging
from sphinx.util.osutil import relative_uri

__all__ = ["Edition", "edition", "editions", "setup", "site_folder", "site_root"]

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


def _copy_into_site(app, exception) -> None:
    folder = edition(app.config).prefix
    if exception is None and app.builder.format == "html" and folder:
        placed = site_folder(app) / folder
        shutil.rmtree(placed, ignore_errors=True)  # nothing stale: the edition as this build made it
        shutil.copytree(app.outdir, placed)
        logger.info(f"the {app.config.language} edition is in {placed}")


def setup(app):
    app.add_config_value("book_editions", [["en", "", "English"]], "env", types=[list])
    app.add_config_value("book_site", "", "env", types=[str])
    app.connect("config-inited", _check)
    app.connect("config-inited", _place_switch)
    app.connect("html-page-context", _switch_links)
    app.connect("build-finished", _copy_into_site, priority=900)  # after the other extensions' last writes
    return {"parallel_read_safe": True, "parallel_write_safe": True}
