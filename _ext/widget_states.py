"""Every widget on the book's pages responds to its controls, with no kernel and nothing from outside the site.

A widget's output in a page's notebook is an HTML snapshot that names the widget's static version
(`tfm_widgets.static.StaticRecipe`). For each snapshot this extension draws every state of
that version, with the widget's own drawing code, into ``_widgets/<hash>/`` of the site, and
replaces the snapshot by the controls, the initial figures and the table of states. The page's
script, ``_static/tfm-widgets.js`` (Jupyter Book adds every script and style sheet of ``_static/``
to every page), swaps a figure when a control moves. The ipywidgets state myst-nb embeds in each
page is dropped: nothing on the site reads it.

Drawing runs in one background thread, started as soon as a page has been read: while later
pages' notebooks execute (the kernel holds a core, this process waits), the figures of earlier
pages are drawn. The hash in the folder's name covers the recipe and tfm_ref's code, so a rebuild
draws only what may have changed, and removes the folders that no page uses any more.

Every edition of the book (_ext/languages.py) draws its own figures, in its language (_ext/figure_texts.py),
into the ``_widgets/`` of its root: the English one at the site's root, another in its folder, and the hash
covers the edition's figures catalogue too. The widget's texts — title, labels, alt texts, the note — come
from the page's catalogue (_ext/translation.py); the messages of refused combinations stay English. The
gettext build lists a snapshot's texts on it, and the messages its figures draw, read from the manifest of
the English states (drawn only if the English build has not drawn them).
"""
from __future__ import annotations

import html
import os
import re
import shutil
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import torch
from docutils import nodes
from sphinx.util import logging
from sphinx.util.osutil import relative_uri

from figure_texts import FIGURE_TEXTS, fingerprint
from languages import edition, site_folder
from tfm_widgets.static import STATIC_HINT, StaticRecipe, StaticWidget, cached_render, code_fingerprint, static_html
from translation import TEXTS, _, has_words, page_translator

FOLDER = "_widgets"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
logger = logging.getLogger(__name__)


class _Renderer:
    """Draws static widgets one at a time, in order of request, into ``root``."""

    def __init__(self, root: Path, fingerprint: str) -> None:
        self.root, self.fingerprint = root, fingerprint
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="widget-states")
        self.jobs: dict[str, Future] = {}
        self.drawing = self.waiting = 0.0  # seconds: for the build log

    def submit(self, recipe: StaticRecipe) -> Future:
        key = recipe.to_json()
        if key not in self.jobs:
            self.jobs[key] = self.pool.submit(self._render, recipe)
        return self.jobs[key]

    def result(self, recipe: StaticRecipe) -> tuple[str, dict]:
        start = time.perf_counter()
        try:
            return self.submit(recipe).result()
        finally:
            self.waiting += time.perf_counter() - start

    def _render(self, recipe: StaticRecipe) -> tuple[str, dict]:
        torch.set_num_threads(1)  # small models: one thread is as fast, and leaves a core to the notebooks
        start = time.perf_counter()
        try:
            return cached_render(recipe, self.root, self.fingerprint)
        finally:
            self.drawing += time.perf_counter() - start


_renderers: dict[int, _Renderer] = {}


def _root(app) -> Path:
    """The edition's ``_widgets``: at the site's root for the root edition (the gettext build too), in the
    build folder of another edition, whence it is copied into the site."""
    return (Path(app.outdir) if edition(app.config).prefix else site_folder(app)) / FOLDER


def _renderer(app) -> _Renderer:
    """This process's renderer (a parallel build forks workers, which cannot use the parent's thread)."""
    pid = os.getpid()
    if pid not in _renderers:
        _renderers[pid] = _Renderer(_root(app), code_fingerprint() + fingerprint(app))
    return _renderers[pid]


def _snapshots(doctree) -> list[tuple[nodes.raw, StaticRecipe]]:
    found = []
    for node in doctree.findall(nodes.raw):
        recipe = StaticRecipe.find_in(node.astext()) if node.get("format") == "html" else None
        if recipe is not None:
            found.append((node, recipe))
    return found


def _is_html(app) -> bool:
    return app.builder.format == "html"


def _texts(widget: StaticWidget) -> list[str]:
    """What a reader of the static version reads, as messages: numbers and symbols are not."""
    texts = [widget.title, widget.note, *(c.label for c in widget.controls), *(p.alt for p in widget.panels)]
    texts += [label for c in widget.controls if c.kind != "checkbox" for label in c.value_labels]
    return [text for text in texts if has_words(text)]


def _translated(manifest: dict, translate: Callable[[str], str]) -> dict:
    """The manifest with the texts of `_texts` in the page's language."""
    return {**manifest, "title": translate(manifest["title"]), "note": translate(manifest["note"]),
            "controls": [{**c, "label": translate(c["label"]), "labels": [translate(label) for label in c["labels"]]}
                         for c in manifest["controls"]],
            "panels": [{**p, "alt": translate(p["alt"])} for p in manifest["panels"]]}


def _is_gettext(app) -> bool:
    return app.builder.name == "gettext"


def _start_drawing(app, doctree) -> None:
    if not (_is_html(app) or _is_gettext(app)):
        return
    for node, recipe in _snapshots(doctree):
        _renderer(app).submit(recipe)
        if _is_gettext(app):
            node[TEXTS] = _texts(recipe.build())


def _make_widgets_live(app, doctree, docname: str) -> None:
    if not (_is_html(app) or _is_gettext(app)):
        return
    for node, recipe in _snapshots(doctree):
        try:
            name, manifest = _renderer(app).result(recipe)
        except Exception as error:  # the page keeps its snapshot; a strict (-W) build fails here
            logger.warning(f"the widget {recipe.factory} has no static version: {error!r}", location=docname)
            continue
        if _is_gettext(app):
            node[FIGURE_TEXTS] = manifest["texts"]
            continue
        base = relative_uri(app.builder.get_target_uri(docname), f"{FOLDER}/{name}/")
        page = static_html(_translated(manifest, page_translator(app.env, docname)), base)
        page = page.replace(html.escape(STATIC_HINT), html.escape(str(_(STATIC_HINT))))  # the hint static_html adds
        # not replace_self, which would copy the snapshot's classes ("output text_html": the theme's output style)
        node.parent.replace(node, nodes.raw("", page, format="html"))


def _drop_widget_state(app, pagename, templatename, context, doctree) -> None:
    """myst-nb embeds the ipywidgets state (up to 100 KB a page) for widget JavaScript the site does not load."""
    scripts = context.get("script_files")
    if scripts:
        scripts[:] = [s for s in scripts if getattr(s, "attributes", {}).get("type") != WIDGET_STATE]


def _finish(app, exception) -> None:
    """Stop the thread; after a good build, delete the folders no page uses (drawn for older code)."""
    renderer = _renderers.pop(os.getpid(), None)
    if renderer is not None:
        renderer.pool.shutdown(cancel_futures=True)
        logger.info(f"widget states: {len(renderer.jobs)} widgets, {renderer.drawing:.1f} s drawing them "
                    f"(in the background), {renderer.waiting:.1f} s waiting for them")
    root = _root(app)
    if exception is not None or not _is_html(app) or not root.is_dir():
        return
    used = set()
    for page in root.parent.rglob("*.html"):  # pages this build did not rewrite too
        used.update(re.findall(rf"{FOLDER}/([^/\"']+)/", page.read_text(encoding="utf-8", errors="replace")))
    for folder in root.iterdir():
        if folder.is_dir() and folder.name not in used:
            shutil.rmtree(folder)


def _hint_is_a_site_text(app, config) -> None:
    config.site_texts = [*config.site_texts, STATIC_HINT]


def setup(app):
    app.setup_extension("translation")
    app.setup_extension("figure_texts")
    app.connect("config-inited", _hint_is_a_site_text)
    app.connect("doctree-read", _start_drawing)
    app.connect("doctree-resolved", _make_widgets_live)
    app.connect("html-page-context", _drop_widget_state, priority=900)  # after myst-nb adds it
    app.connect("build-finished", _finish)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
