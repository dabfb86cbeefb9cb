"""Small fixes to the HTML of the book site, so that its pages load without JavaScript errors.

- sphinx-thebe adds its inline configuration script once per reading pass; a build that reads
  twice (executed notebooks, bibliography) declares ``const THEBE_JS_URL`` twice, a SyntaxError
  in the browser. Keep the first of identical scripts.
- pydata-sphinx-theme reports "invalid theme mode" when no default colour mode is set: set "auto".
"""
from __future__ import annotations


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


def setup(app):
    app.connect("html-page-context", _tidy_page, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
