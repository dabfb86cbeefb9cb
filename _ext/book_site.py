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
"""
from __future__ import annotations

import os
import re
from contextlib import suppress
from pathlib import Path

import matplotlib
import nbformat
from docutils import nodes
from jupyter_cache import get_cache

_COLAB_LINK = re.compile(r"^(?P<head>.*/github/[^/]+/[^/]+/blob/)[^/]+/(?P<page>.+)\.(md|ipynb)$")


HUB_VARIABLE = "BOOK_JUPYTERHUB_URL"


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


def _colab_links_to_published_notebooks(app, pagename, templatename, context, doctree) -> None:
    for group in context.get("header_buttons", []):
        for button in group.get("buttons", []) if isinstance(group, dict) else []:
            if button.get("text") == "Colab":
                match = _COLAB_LINK.match(button["url"])
                if match:
                    button["url"] = f"{match['head']}{app.config.colab_branch}/{match['page']}.ipynb"


def _with_outputs(path: Path, cache) -> nbformat.NotebookNode:
    """The notebook at ``path``, its outputs taken from the execution cache if it has none."""
    notebook = nbformat.read(path, as_version=4)
    if not any(cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code"):
        with suppress(KeyError):  # not in the cache: a page with nothing executed
            _, notebook = cache.merge_match_into_notebook(notebook)
    return notebook


def _export_executed_notebooks(app, exception) -> None:
    """Write every page's executed notebook to ``_build/colab`` (laid out as the pages are) and
    to the download button's copy in ``_sources``."""
    build = Path(app.outdir).parent
    executed = build / "jupyter_execute"
    if exception is not None or app.builder.name != "html" or not executed.is_dir():
        return
    cache = get_cache(app.env.mystnb_config.execution_cache_path)  # as myst-nb resolved it
    for path in executed.rglob("*.ipynb"):
        page = path.relative_to(executed)
        notebook = _with_outputs(path, cache)
        for destination in (build / "colab" / page, Path(app.outdir) / "_sources" / page):
            destination.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(notebook, destination)


def setup(app):
    app.add_config_value("colab_branch", "notebooks", "html")
    app.connect("config-inited", _configure_theme)
    app.connect("config-inited", _matplotlib_settings)
    app.connect("html-page-context", _launch_buttons_only_where_code_runs, priority=900)
    app.connect("html-page-context", _tidy_page, priority=900)
    app.connect("html-page-context", _colab_links_to_published_notebooks, priority=900)
    app.connect("build-finished", _export_executed_notebooks)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
