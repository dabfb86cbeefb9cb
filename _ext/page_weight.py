"""What a page of the site loads, kept small: MathJax's few components, Font Awesome's few icons, no search index.

- MathJax is served from the site (it must work offline) and only the components the pages use are
  copied: the loader, TeX input (its extensions load on demand), CommonHTML output with its fonts, and
  the hidden MathML that screen readers read. The pages load ``startup.js``, which fetches those — no
  right-click menu, no speech — instead of the 1.1 MB ``tex-chtml.js``; the files come from the
  sphinx-mathjax-offline package, whose whole copy (24 MB) the site does not carry.
- pydata-sphinx-theme draws its icons with Font Awesome's JavaScript (1.4 MB, every icon). Its style
  sheet has the same icons as web fonts; the build cuts those down to the icons the site shows
  (`subset_icon_fonts`, a few KB), the style sheet's ``@font-face`` rules name the cut fonts, and the
  layout (templates/layout.html) no longer loads the script.
- The theme's style sheets hold all of Bootstrap and every Font Awesome class (pydata-sphinx-theme's alone
  is 400 KB). `purge_stylesheet` keeps the rules that can apply: those whose classes all occur in the
  edition's pages or scripts (a script may add a class it names), as PurgeCSS does.
- The search index is loaded by the search page only (templates/layout.html): the search field of
  every page sends its query there.
- Source maps (``*.map``, for the theme's developers) and the files replaced above are not published.
"""
from __future__ import annotations

import re
from pathlib import Path

import tinycss2
from fontTools import subset
from sphinx.util import logging
from sphinx.util.fileutil import copy_asset

__all__ = ["ICON_FONTS", "MATHJAX_COMPONENTS", "icon_codepoints", "purge_stylesheet", "setup", "subset_icon_fonts"]

TEMPLATES = Path(__file__).parent / "templates"
MATHJAX = "mathjax"  # its folder in _static
# What the pages load (the loader resolves each to mathjax/<name>.js, and what each one needs).
MATHJAX_COMPONENTS = ["input/tex", "output/chtml", "a11y/assistive-mml"]
# The files those need; input/tex/extensions: the TeX packages \require or autoload fetch when a page uses them.
_MATHJAX_FILES = ["startup.js", "core.js", "input/tex.js", "input/tex/extensions", "output/chtml.js",
                  "output/chtml/fonts/tex.js", "output/chtml/fonts/woff-v2", "a11y/assistive-mml.js"]
ICON_FONTS = "vendor/fontawesome/webfonts"  # the theme's Font Awesome fonts, in _static
_FONT_NAMES = ["fa-solid-900", "fa-regular-400", "fa-brands-400"]  # each a .ttf and a .woff2 there
_UNPUBLISHED = ["scripts/fontawesome.js", "scripts/fontawesome.js.LICENSE.txt"]
# (after `purge_stylesheet`, an escape ends with a space: "\f09b ")
_CLASS_RULE = re.compile(r'((?:\.fa-[a-z0-9-]+:before,?)+)\{content:"\\([0-9a-f]+) ?"\}')
# an icon a style sheet names: escaped ("\f05a"), or the character itself (Unicode's private use area)
_ICON_LITERAL = re.compile(r'"(?:\\([ef][0-9a-f]{3}) ?|([\ue000-\uf8ff]))"')
_ICON_CLASS = re.compile(r"\bfa-[a-z0-9-]+")
# Classes that Bootstrap's scripts compose at run time (bs-tooltip-top, …): their rules are kept.
_COMPOSED_CLASSES = ("bs-",)
_SELECTOR_CLASS = re.compile(r"\.(-?[_a-zA-Z][\w-]*)")
_ARGUMENTS = re.compile(r"\([^()]*\)")
logger = logging.getLogger(__name__)


def _mathjax_source() -> Path:
    """sphinx-mathjax-offline's copy of MathJax (the package is not importable by name: it has hyphens)."""
    import importlib.util

    spec = importlib.util.find_spec("sphinx-mathjax-offline")
    if spec is None or spec.origin is None:
        raise RuntimeError("the book serves MathJax from the sphinx-mathjax-offline package: pip install it "
                           "(requirements.txt)")
    return Path(spec.origin).parent / "static" / "mathjax"


def _configure(app, config) -> None:
    config.mathjax_path = f"{MATHJAX}/startup.js"
    mathjax = dict(config.mathjax3_config or {})
    mathjax["loader"] = {**mathjax.get("loader", {}), "load": MATHJAX_COMPONENTS}
    config.mathjax3_config = mathjax
    if str(TEMPLATES) not in map(str, config.templates_path):
        config.templates_path = [*config.templates_path, str(TEMPLATES)]  # a new list: Sphinx's default is shared


def icon_codepoints(stylesheet: str, texts: list[str]) -> set[int]:
    """The icons a site shows: those of the ``fa-*`` classes in ``texts`` (its pages and scripts), and those the
    style sheets name directly (``content: "\\f05a"``, e.g. the admonitions' icons)."""
    by_class = {}
    for classes, codepoint in _CLASS_RULE.findall(stylesheet):
        for name in re.findall(r"fa-[a-z0-9-]+", classes):
            by_class[name] = int(codepoint, 16)
    used = {by_class[name] for text in texts for name in _ICON_CLASS.findall(text) if name[3:] and name in by_class}
    named = _ICON_LITERAL.findall(_CLASS_RULE.sub("", stylesheet))
    return used | {int(escaped, 16) if escaped else ord(character) for escaped, character in named}


def _may_apply(selector: str, words: set[str]) -> bool:
    """Whether a selector may match: each of its classes occurs among ``words`` (classes inside :not(…), :is(…)
    and other parentheses do not count, so those selectors are kept)."""
    while _ARGUMENTS.search(selector):
        selector = _ARGUMENTS.sub("", selector)
    return all(name in words or name.startswith(_COMPOSED_CLASSES) for name in _SELECTOR_CLASS.findall(selector))


def _purged_rules(rules, words: set[str]) -> str:
    kept = []
    for rule in rules:
        if rule.type == "qualified-rule":
            if any(_may_apply(selector, words) for selector in tinycss2.serialize(rule.prelude).split(",")):
                kept.append(tinycss2.serialize([rule]))
        elif rule.type == "at-rule" and rule.content is not None and rule.lower_at_keyword in ("media", "supports"):
            inner = _purged_rules(tinycss2.parse_blocks_contents(rule.content, skip_whitespace=True,
                                                                 skip_comments=True), words)
            if inner:
                kept.append(f"@{rule.at_keyword}{tinycss2.serialize(rule.prelude)}{{{inner}}}")
        elif rule.type == "at-rule":
            kept.append(tinycss2.serialize([rule]))
    return "".join(kept)


def purge_stylesheet(css: str, texts: list[str]) -> str:
    """``css`` without the rules that no element can match: those with a class that occurs in none of ``texts``
    (the pages and their scripts)."""
    words = {word for text in texts for word in re.findall(r"[\w-]+", text)}
    purged = _purged_rules(tinycss2.parse_stylesheet(css, skip_whitespace=True, skip_comments=True), words)
    # tinycss2 writes escapes ("\\f09b", an icon's code point) as the characters: write them as escapes again
    return re.sub(r"[^\x00-\x7f]", lambda match: f"\\{ord(match.group()):x} ", purged)


def subset_icon_fonts(fonts: Path, codepoints: set[int]) -> None:
    """Write each Font Awesome font of ``fonts`` cut down to ``codepoints`` beside it, as ``<name>.icons.woff``."""
    options = subset.Options()
    options.flavor = "woff"  # zlib: WOFF 2 would need brotli
    options.ignore_missing_unicodes = True  # an icon is in one of the three fonts
    for name in _FONT_NAMES:
        font = subset.load_font(str(fonts / f"{name}.ttf"), options)
        subsetter = subset.Subsetter(options)
        subsetter.populate(unicodes=codepoints)
        subsetter.subset(font)
        subset.save_font(font, str(fonts / f"{name}.icons.woff"), options)


def _to_icon_fonts(css: str) -> str:
    """``css`` whose ``@font-face`` rules load the cut fonts instead of the theme's WOFF 2 and TrueType files."""
    for name in _FONT_NAMES:
        css = re.sub(rf'url\(([^)]*){name}\.woff2\) format\("woff2"\),\s*url\([^)]*{name}\.ttf\) format\("truetype"\)',
                     rf'url(\g<1>{name}.icons.woff) format("woff")', css)
    return css


def _lighten(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    static = Path(app.outdir) / "_static"
    source = _mathjax_source()
    for name in _MATHJAX_FILES:
        copy_asset(str(source / name), str(static / MATHJAX / name) if (source / name).is_dir()
                   else str((static / MATHJAX / name).parent))
    scripts = [path for path in static.rglob("*.js") if MATHJAX not in path.relative_to(static).parts
               and path.relative_to(static).as_posix() not in _UNPUBLISHED]
    pages = [path for path in Path(app.outdir).rglob("*.html") if static not in path.parents]
    texts = [path.read_text(encoding="utf-8", errors="replace") for path in (*pages, *scripts)]
    stylesheets = [path for path in static.rglob("*.css") if MATHJAX not in path.relative_to(static).parts]
    codepoints = icon_codepoints("\n".join(path.read_text(encoding="utf-8") for path in stylesheets), texts)
    subset_icon_fonts(static / ICON_FONTS, codepoints)
    before = after = 0
    for path in stylesheets:
        css = path.read_text(encoding="utf-8")
        purged = purge_stylesheet(_to_icon_fonts(css), texts)
        path.write_text(purged, encoding="utf-8")
        before, after = before + len(css.encode()), after + len(purged.encode())
    for path in [*static.rglob("*.map"), *(static / name for name in _UNPUBLISHED),
                 *((static / ICON_FONTS).glob("*.ttf")), *((static / ICON_FONTS).glob("*.woff2"))]:
        path.unlink(missing_ok=True)
    logger.info(f"page weight: MathJax's {len(MATHJAX_COMPONENTS)} components, {len(codepoints)} icons, "
                f"style sheets {before // 1024} KB → {after // 1024} KB")


def setup(app):
    app.connect("config-inited", _configure)
    app.connect("build-finished", _lighten, priority=800)  # before languages.py places an edition in the site
    return {"parallel_read_safe": True, "parallel_write_safe": True}
