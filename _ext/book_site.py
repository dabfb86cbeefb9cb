"""Small fixes to the HTML of the book site, so that its pages load without JavaScript errors.

- sphinx-thebe adds its inline configuration script once per reading pass; a build that reads
  twice (executed notebooks, bibliography) declares ``const THEBE_JS_URL`` twice, a SyntaxError
  in the browser. Keep the first of identical scripts.
- pydata-sphinx-theme reports "invalid theme mode" when no default colour mode is set: set "auto".
- pydata-sphinx-theme adds a search field to a header bar of its own, above sphinx-book-theme's
  sidebar, which has one already: leave the header's persistent items empty (one search field).
- The JupyterHub launch button is off until a hub is named: ``launch_buttons.jupyterhub_url`` in
  _config.yml, or the environment variable ``BOOK_JUPYTERHUB_URL`` when the book is built.
- A page that shows no code (the glossary, the errata, the references) gets no launch buttons:
  there is nothing on it to run.
- The figures the build draws in this process (the widgets' states) use ``book/matplotlibrc``, as
  the pages' kernels do (they run in book/), so Chinese labels find their CJK font there too.
- Colab opens only ``.ipynb`` files from GitHub, and the pages are MyST markdown. After the
  build, each page's executed notebook is written to ``_build/colab/<page>.ipynb``; publishing
  the site pushes that folder to the branch ``colab_branch``, and the Colab button opens the
  page's notebook there.
- myst-nb (1.4) writes a page's ``.ipynb`` without outputs when its execution came from the
  jupyter-cache (it merges the cached outputs into a copy, then writes the original). The
  export fills them in from the cache, in the Colab copy and in the download button's copy.
- An edition in a folder of the site (``zh/``, _ext/languages.py) publishes its pages' notebooks in
  that folder of ``_build/colab`` (``_build/colab/zh/<page>.ipynb``): each page's executed notebook
  (its figures in the edition's language), its prose translated from the page's catalogue
  (_ext/page_notebooks.py); the download button's ``.ipynb`` and ``.md`` are the translated page too.
  Its launch buttons open that notebook: Colab from the branch ``colab_branch``; Binder and
  JupyterHub with nbgitpuller, which pulls that branch into ``<repository>-<branch>/`` beside the
  reader's files (Binder still builds its environment from the repository's branch, as for the
  sources' edition). The root edition's buttons open the sources, as sphinx-book-theme makes them.
"""
from __future__ import annotations

import os
import re
import shutil
from contextlib import suppress
from pathlib import Path
from urllib.parse import quote, urlencode

import matplotlib
import nbformat
from docutils import nodes
from jupyter_cache import get_cache
from sphinx.util import logging

from languages import edition, site_folder
from page_notebooks import markdown_parser, translate_markdown, translate_notebook
from translation import page_translator

_COLAB_LINK = re.compile(r"^(?P<head>.*/github/[^/]+/[^/]+/blob/)[^/]+/(?P<page>.+)\.(md|ipynb)$")


HUB_VARIABLE = "BOOK_JUPYTERHUB_URL"
# The folder of the published notebooks (the branch colab_branch), beside the site's folder.
PUBLISHED = "colab"
# The launch buttons' paths in a Jupyter server, as sphinx-book-theme writes them.
_INTERFACES = {"classic": "tree", "jupyterlab": "lab/tree"}
logger = logging.getLogger(__name__)


def _configure_theme(app, config) -> None:
    options = config.html_theme_options
    options.setdefault("navbar_persistent", [])
    hub = os.environ.get(HUB_VARIABLE, "").strip()
    if hub:
        options.setdefault("launch_buttons", {})["jupyterhub_url"] = hub


def _matplotlib_settings(app, config) -> None:
    matplotlib.rc_file(Path(app.confdir) / "book" / "matplotlibrc", use_default_template=False)  # its keys only


def _shows_code(doctree) -> bool:
    """Whether the page shows a code cell's source (cells tagged remove-input show none)."""
    return any(node.get("nb_element") == "cell_code_source" for node in doctree.findall(nodes.container))


def _launch_buttons_only_where_code_runs(app, pagename, templatename, context, doctree) -> None:
    if doctree is not None and not _shows_code(doctree):
        context["header_buttons"] = [group for group in context.get("header_buttons", [])
                                     if not (isinstance(group, dict) and group.get("label") == "launch-buttons")]


def _script_key(script) -> tuple:
    filename = getattr(script, "filename", script)
    attributes = tuple(sorted((k, str(v)) for k, v in getattr(script, "attributes", {}).items()))
    return (str(filename or ""), attributes)  # inline scripts come with filename None or ""


def _tidy_page(app, pagename, templatename, context, doctree) -> None:
    scripts = context.get("script_files")
    if scripts:
        seen, unique = set(), []
        for script in scripts:
            key = _script_key(script)
            if key not in seen:
                seen.add(key)
                unique.append(script)
        scripts[:] = unique
    if not context.get("default_mode"):
        context["default_mode"] = "auto"


def published_notebook(app, pagename: str) -> str:
    """Where a page's notebook is in the published folder (and on the branch ``colab_branch``)."""
    return f"{edition(app.config).prefix}{pagename}.ipynb"


def _pull_parameters(app, notebook: str) -> dict[str, str]:
    """nbgitpuller's parameters that open ``notebook`` of the branch ``colab_branch``: pulled into
    ``<repository>-<branch>/``, apart from a checkout of the sources' branch."""
    options = app.config.html_theme_options
    repository = options.get("repository_url", "").rstrip("/")
    branch = app.config.colab_branch
    target = f"{repository.rsplit('/', 1)[-1]}-{branch}"
    interface = _INTERFACES.get(options.get("launch_buttons", {}).get("notebook_interface", "classic"), "tree")
    return {"repo": repository, "branch": branch, "targetpath": target, "urlpath": f"{interface}/{target}/{notebook}"}


def _launch_links_to_published_notebooks(app, pagename, templatename, context, doctree) -> None:
    """Colab opens the page's published notebook; in an edition in a folder, Binder and JupyterHub open it too."""
    translated = bool(edition(app.config).prefix)
    for group in context.get("header_buttons", []):
        for button in group.get("buttons", []) if isinstance(group, dict) else []:
            text, url = button.get("text"), button.get("url", "")
            if text == "Colab":
                match = _COLAB_LINK.match(url)
                if match:
                    button["url"] = (f"{match['head']}{app.config.colab_branch}/"
                                     f"{edition(app.config).prefix}{match['page']}.ipynb")
            elif translated and text in ("Binder", "JupyterHub"):
                pull = _pull_parameters(app, published_notebook(app, pagename))
                head = url.split("?", 1)[0]  # Binder's repository and branch (its environment); the hub's git-pull
                button["url"] = (f"{head}?urlpath={quote('git-pull?' + urlencode(pull), safe='')}" if text == "Binder"
                                 else f"{head}?{urlencode(pull, safe='/')}")


def _with_outputs(path: Path, cache) -> nbformat.NotebookNode:
    """The notebook at ``path``, its outputs taken from the execution cache if it has none."""
    notebook = nbformat.read(path, as_version=4)
    if not any(cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code"):
        with suppress(KeyError):  # not in the cache: a page with nothing executed
            _, notebook = cache.merge_match_into_notebook(notebook)
    return notebook


def _translated(app, docname: str, notebook: nbformat.NotebookNode, parser) -> nbformat.NotebookNode:
    """The page's notebook in this build's language (itself in the sources' edition)."""
    translate = page_translator(app.env, docname)
    if translate is str:
        return notebook
    try:
        notebook = translate_notebook(notebook, translate, parser)
        source = Path(app.env.doc2path(docname))
        if source.suffix == ".md":  # the download button's source, in the edition's language
            destination = Path(app.outdir) / "_sources" / f"{docname}.md"
            destination.parent.mkdir(parents=True, exist_ok=True)
            destination.write_text(translate_markdown(source.read_text(encoding="utf-8"), translate, parser),
                                   encoding="utf-8")
    except ValueError as why:
        logger.warning(f"its notebook stays in the sources' language: {why}", location=docname)
    return notebook


def _export_executed_notebooks(app, exception) -> None:
    """Write every page's executed notebook to ``_build/colab`` (laid out as the pages are; an edition's in its
    folder, translated) and to the download button's copy in ``_sources``."""
    build = Path(app.outdir).parent
    executed = build / "jupyter_execute"
    if exception is not None or app.builder.name != "html" or not executed.is_dir():
        return
    cache = get_cache(app.env.mystnb_config.execution_cache_path)  # as myst-nb resolved it
    published = site_folder(app).parent / PUBLISHED / edition(app.config).prefix
    if edition(app.config).prefix:
        shutil.rmtree(published, ignore_errors=True)  # the edition's folder as this build made it
    parser = markdown_parser(getattr(app.env, "myst_config", None))
    for path in executed.rglob("*.ipynb"):
        page = path.relative_to(executed)
        notebook = _translated(app, page.with_suffix("").as_posix(), _with_outputs(path, cache), parser)
        for destination in (published / page, Path(app.outdir) / "_sources" / page):
            destination.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(notebook, destination)


def setup(app):
    app.add_config_value("colab_branch", "notebooks", "html")
    app.connect("config-inited", _configure_theme)
    app.connect("config-inited", _matplotlib_settings)
    app.connect("html-page-context", _launch_buttons_only_where_code_runs, priority=900)
    app.connect("html-page-context", _tidy_page, priority=900)
    app.connect("html-page-context", _launch_links_to_published_notebooks, priority=900)
    app.connect("build-finished", _export_executed_notebooks)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
