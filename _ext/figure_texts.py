"""The words in the figures that code draws, in every edition: recorded in English, translated in the others.

The pages' figures are drawn in their kernels, the widgets' states in this process (_ext/widget_states.py);
both take their words from the edition's figures catalogue, ``locales/<language>/LC_MESSAGES/figures.po``,
through `tfm_widgets.figure_text`: installed here, and in every kernel of the build by an IPython
startup file (``IPYTHONDIR`` is ``<build folder>/ipython`` while the book builds). The English edition
translates nothing and records the messages its figures draw: a page's outputs carry them in their
metadata, a widget's states in their manifest, so that they come back with the cached execution. The
gettext build gathers them into ``figures.pot``, which ``locales/build.py --update`` (or
``--update-figures``) merges into the catalogues.

An edition's executed pages depend on its catalogue, which jupyter-cache cannot know: `fingerprint` is part
of the key of its execution cache (_ext/execution_cache.py) and of its widgets' states.
"""
from __future__ import annotations

import gettext
import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

from docutils import nodes
from jupyter_cache import get_cache
from sphinx.builders.gettext import MsgOrigin
from sphinx.errors import ExtensionError
from sphinx.util.i18n import CatalogInfo

from book_site import _with_outputs
from languages import edition, editions
from tfm_widgets.figure_text import CATALOGUE_VARIABLE, OUTPUT_KEY, install

__all__ = ["DOMAIN", "FIGURE_TEXTS", "fingerprint", "setup"]

DOMAIN = "figures"
FIGURE_TEXTS = "figure_texts"  # a node's attribute: the messages of the figures it shows (widget_states)
STARTUP = """\
# Written by the book's build (_ext/figure_texts.py): figures in the edition's language, their messages recorded.
from tfm_widgets.figure_text import start_book_kernel

start_book_kernel(get_ipython())
"""


def _compiled_catalogue(app) -> Path | None:
    """The figures catalogue of a translated edition, compiled when its .po changed; None in English."""
    config = app.config
    if edition(config) == editions(config)[0]:
        return None
    for locale_dir in config.locale_dirs:
        info = CatalogInfo(str(Path(app.srcdir, locale_dir, config.language, "LC_MESSAGES")), DOMAIN, "utf-8")
        if Path(info.po_path).is_file():
            if info.is_outdated():
                info.write_mo(config.language)
            return Path(info.mo_path)
    return None


def fingerprint(app) -> str:
    """What this edition's figures depend on besides the code: a hash of its catalogue ("" in English)."""
    path = _compiled_catalogue(app)
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16] if path else ""


def _translations(path: Path) -> gettext.GNUTranslations:
    with path.open("rb") as file:
        return gettext.GNUTranslations(file)


def _set_up(app, config) -> None:
    catalogue = _compiled_catalogue(app)
    install(_translations(catalogue) if catalogue else None)  # for the figures drawn in this process
    ipython = Path(app.outdir).parent / "ipython"
    startup = ipython / "profile_default" / "startup" / "00-figure-texts.py"
    startup.parent.mkdir(parents=True, exist_ok=True)
    startup.write_text(STARTUP, encoding="utf-8")
    os.environ["IPYTHONDIR"] = str(ipython)  # the kernels inherit this process's environment
    if catalogue is None:
        os.environ.pop(CATALOGUE_VARIABLE, None)
        return
    os.environ[CATALOGUE_VARIABLE] = str(catalogue)


def _output_messages(app, docname: str) -> Iterator[str]:
    """The messages recorded in the outputs of the page's executed notebook."""
    path = Path(app.env.mystnb_config.output_folder, f"{docname}.ipynb")
    if not path.is_file():
        return
    notebook = _with_outputs(path, get_cache(app.env.mystnb_config.execution_cache_path))
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            metadata = output.get("metadata", {})
            if "image/png" in output.get("data", {}) and OUTPUT_KEY not in metadata:
                raise ExtensionError(f"{docname}: a figure of its cached execution has no record of its texts: it was "
                                     f"executed before they were recorded. Delete {app.env.mystnb_config.execution_cache_path}"
                                     " and build again.")
            yield from metadata.get(OUTPUT_KEY, [])


def _gather(app, doctree, docname: str) -> None:
    """In the gettext build: the messages of the page's figures join the figures catalogue."""
    if app.builder.name != "gettext":
        return
    catalogue, origin = app.builder.catalogs[DOMAIN], MsgOrigin(app.env.doc2path(docname), 0)
    for node in doctree.findall(lambda n: isinstance(n, nodes.Element) and FIGURE_TEXTS in n):
        for text in node[FIGURE_TEXTS]:
            catalogue.add(text, origin)
    for text in _output_messages(app, docname):
        catalogue.add(text, origin)


def setup(app):
    app.setup_extension("languages")
    app.connect("config-inited", _set_up)
    app.connect("doctree-resolved", _gather, priority=900)  # after widget_states lists its figures' messages
    return {"parallel_read_safe": True, "parallel_write_safe": True}
