"""What the book's editions translate, and the texts Sphinx's own translation does not reach.

Sphinx translates a page's paragraphs, titles, list items and table cells from the page's catalogue,
``locales/<language>/LC_MESSAGES/book/<page>.po``, which sphinx-intl keeps in step with the messages
the gettext builder extracts (docs/chinese-edition.md). This extension adds:

- prose only: the outputs of code cells and display math are marked untranslatable (code is not
  extracted anyway), so the catalogues hold no copies of what every edition shows unchanged;
- texts outside the document's text: a node may list texts it draws itself in its attribute `TEXTS`
  (a diagram's labels and alt text, a widget's labels): the gettext build extracts them into the
  page's catalogue and `page_translator` translates them from it;
- the captions of the table of contents, which sphinx-external-toc inserts after Sphinx has
  translated the page, translated from the root page's catalogue, where the gettext build puts them;
- the site catalogue ``site.po``: the texts of the extensions, ``_("…")`` or ``N_("…")`` in _ext/*.py,
  those of ``site_texts`` (an extension adds its own at config-inited), and the settings the pages show
  (`TRANSLATED_SETTINGS`: the site's title, the author, the labels of the toggle buttons);
- in an edition, a page that ``translated_pages`` does not list yet says so at its top;
- in an edition, a link written without a text of its own (``[](page.md#section)``) shows its section's
  translated title: MyST takes the text from the source's heading, before Sphinx translates it;
- the heading anchors of a page stay those of its source (`KeepHeadingSlugs`);
- a translation that Sphinx cannot use is a warning, not a silent fallback to English
  (`CheckTranslationsApplied`);
- in an edition, a download of an exercise notebook, ``release/<id>/<id>.ipynb``, is the notebook in the
  edition's language, ``release/<language>/<id>/<id>.ipynb``, where ``python -m autograde release`` wrote
  one (`EditionNotebooks`): the catalogues keep the English target;
- in an edition, when a page is read again (its catalogue changed), every page is written again: they
  show its title (in the navigation, in links) and Sphinx would rewrite only the page itself.
"""
from __future__ import annotations

import gettext
import posixpath
import re
from collections.abc import Callable
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.extract import extract_from_dir
from babel.messages.pofile import write_po
from docutils import nodes
from sphinx import addnodes
from sphinx.builders.gettext import MsgOrigin
from sphinx.locale import get_translation
from sphinx.transforms import SphinxTransform
from sphinx.util import logging
from sphinx.util.i18n import CatalogInfo, docname_to_domain
from sphinx.util.nodes import extract_messages

from editions.markdown import has_words
from languages import editions

__all__ = ["N_", "SITE_CATALOGUE", "TEXTS", "_", "has_words", "page_translator", "setup"]

SITE_CATALOGUE = "site"
_ = get_translation(SITE_CATALOGUE)
TEXTS = "translatable_texts"
# Settings whose text the pages show: the site's title, the author in the footer, sphinx-togglebutton's labels
TRANSLATED_SETTINGS = ("html_title", "author", "togglebutton_hint", "togglebutton_hint_hide")
HERE = Path(__file__).parent
logger = logging.getLogger(__name__)


def N_(message: str) -> str:
    """Marks a message of the site catalogue where it is defined; ``_(message)`` translates it where it is shown."""
    return message


def _is_translation(config) -> bool:
    return (config.language or "en") != editions(config)[0].language


def _catalogue(config, srcdir: str, domain: str) -> Path | None:
    """The compiled catalogue (.mo) of ``domain`` in this build's language, if there is one."""
    for locale_dir in config.locale_dirs:
        path = Path(srcdir, locale_dir, config.language, "LC_MESSAGES", f"{domain}.mo")
        if path.is_file():
            return path
    return None


def page_translator(env, docname: str) -> Callable[[str], str]:
    """The page's catalogue in this build's language: a text → its translation, or itself where there is none."""
    found = _catalogue(env.config, env.srcdir, docname_to_domain(docname, env.config.gettext_compact))
    if not _is_translation(env.config) or found is None:
        return str
    with found.open("rb") as file:  # read afresh: Sphinx recompiles it when its .po changes
        catalogue = gettext.GNUTranslations(file)
    return lambda text: catalogue.gettext(text) if text else text  # gettext("") is the catalogue's header


class ProseOnly(SphinxTransform):
    """Outputs of code cells and display math are the same in every edition: no messages for them."""

    default_priority = 10  # before Sphinx's Locale transform (20)

    def apply(self, **kwargs) -> None:
        for node in self.document.findall(nodes.math_block):
            node["translatable"] = False
        for output in self.document.findall(nodes.container):
            if output.get("nb_element") == "cell_code_output":
                for node in output.findall(nodes.TextElement):
                    node["translatable"] = False


class KeepHeadingSlugs(SphinxTransform):
    """Sphinx parses a translated title, as of an admonition, as a heading of its own, and myst-parser then
    records that heading's slug as the page's only one: links such as ``page.md#step-2--scores`` break.
    Put back the anchors of the page's source."""

    default_priority = 21  # right after Sphinx's Locale transform (20)

    def apply(self, **kwargs) -> None:
        slugs = getattr(self.document, "myst_slugs", None)
        if slugs:
            self.env.metadata[self.env.docname]["myst_slugs"] = slugs


class CheckTranslationsApplied(SphinxTransform):
    """Sphinx keeps the English text, silently, when a translation does not parse as one paragraph or
    title: e.g. a title "1. Attention" translated as "1. 注意力", which Markdown reads as a list."""

    default_priority = 21  # right after Sphinx's Locale transform (20)

    def apply(self, **kwargs) -> None:
        translate = page_translator(self.env, self.env.docname)
        for node, message in extract_messages(self.document):
            if not node.get("translated") and translate(message) != message:
                logger.warning(f"the translation of {message[:60]!r} is not used: it does not read as one paragraph "
                               "or title (a leading '1. ' is a list: write '1\\. ')", location=node)


class EditionNotebooks(SphinxTransform):
    """A chapter's exercise notebook, in the edition's language when it is released in it (else the English)."""

    default_priority = 21  # after Sphinx's Locale transform (20), which makes the translated paragraphs' links
    NOTEBOOK = re.compile(r"(?P<release>(?:.*/)?release/)(?P<id>[^/]+)/(?P=id)\.ipynb")

    def apply(self, **kwargs) -> None:
        if not _is_translation(self.config):
            return
        for node in self.document.findall(addnodes.download_reference):
            found = self.NOTEBOOK.fullmatch(node["reftarget"])
            target = found and f"{found['release']}{self.config.language}/{found['id']}/{found['id']}.ipynb"
            if target and Path(self.env.relfn2path(target, self.env.docname)[1]).is_file():
                node["reftarget"] = target


def _translate_toc_captions(app, doctree) -> None:
    if _is_translation(app.config) and app.env.docname == app.config.root_doc:
        translate = page_translator(app.env, app.env.docname)
        for toctree in doctree.findall(addnodes.toctree):
            if toctree.get("caption"):
                toctree["caption"] = translate(toctree["caption"])


def _say_untranslated(app, doctree) -> None:
    docname = app.env.docname
    if _is_translation(app.config) and docname not in app.config.translated_pages.get(app.config.language, []):
        title = next(iter(doctree.findall(nodes.title)), None)
        if title is not None:
            message = nodes.paragraph(text=str(_("This page is not translated yet: it is shown in English.")))
            title.parent.insert(title.parent.index(title) + 1, nodes.note("", message, classes=["untranslated"]))


def _note_pages_read(app, env, docnames: list[str]) -> None:
    env.translation_pages_read = bool(docnames)


def _write_every_page(app, env) -> list[str]:
    read = getattr(env, "translation_pages_read", False)
    return sorted(env.found_docs) if read and _is_translation(app.config) else []


def _extract_texts(app, doctree, docname: str) -> None:
    """In the gettext build: the texts that nodes list in `TEXTS` join the page's messages."""
    if app.builder.name != "gettext":
        return
    catalogue = app.builder.catalogs[docname_to_domain(docname, app.config.gettext_compact)]
    for node in doctree.findall(lambda n: isinstance(n, nodes.Element) and TEXTS in n):
        for text in node[TEXTS]:
            catalogue.add(text, MsgOrigin(node.source or app.env.doc2path(docname), node.line or 0))


def _load_site_catalogue(app, config) -> None:
    """Compile the site catalogue of this build's language (when it changed), register it, translate the settings
    the pages show."""
    for locale_dir in config.locale_dirs:
        info = CatalogInfo(str(Path(app.srcdir, locale_dir, config.language or "en", "LC_MESSAGES")), SITE_CATALOGUE,
                           "utf-8")
        if Path(info.po_path).is_file() and info.is_outdated():
            info.write_mo(config.language)
        app.add_message_catalog(SITE_CATALOGUE, str(Path(app.srcdir, locale_dir)))
    present = [name for name in TRANSLATED_SETTINGS if isinstance(getattr(config, name, None), str)]
    # a new list: the default one is shared
    config.site_texts = [*config.site_texts, *(getattr(config, name) for name in present)]
    if _is_translation(config):
        for name in present:
            setattr(config, name, str(_(getattr(config, name))))


def _translate_section_links(app, doctree, docname: str) -> None:
    """In an edition, the links whose text is their target section's English title show its translation."""
    if not _is_translation(app.config):
        return
    pages = app.__dict__.setdefault("_section_titles", {})  # page -> {anchor: its section's title}, read once
    for reference in doctree.findall(nodes.reference):
        page, _hash, anchor = reference.get("refuri", "").partition("#")
        if not reference.get("internal") or not anchor:
            continue
        page = page.removesuffix(app.builder.out_suffix)
        target = posixpath.normpath(posixpath.join(posixpath.dirname(docname), page)) if page else docname
        if target not in app.env.all_docs:
            continue
        if target not in pages:
            pages[target] = {i: section[0] for section in app.env.get_doctree(target).findall(nodes.section)
                             for i in section["ids"]}
        title = pages[target].get(anchor)
        if title is not None and title.get("translated") and reference.astext() == title.rawsource:
            holder = reference[0] if len(reference) == 1 and isinstance(reference[0], nodes.inline) else reference
            holder.clear()
            holder += nodes.Text(title.astext())


def _write_site_template(app, exception) -> None:
    """In the gettext build: ``site.pot``, the template of the site catalogue, beside the pages' ones."""
    if exception is not None or app.builder.name != "gettext":
        return
    template = Catalog(project=app.config.html_title, charset="utf-8")
    for filename, lineno, message, _comments, _context in extract_from_dir(
            HERE, method_map=[("*.py", "python")], keywords={"_": None, "N_": None}):
        template.add(message, locations=[(f"_ext/{filename}", lineno)])
    for text in app.config.site_texts:
        template.add(text)
    with Path(app.outdir, f"{SITE_CATALOGUE}.pot").open("wb") as file:
        write_po(file, template, no_location=not app.config.gettext_location)


def setup(app):
    app.setup_extension("languages")
    app.add_config_value("translated_pages", {}, "env", types=[dict])
    app.add_config_value("site_texts", [], "env", types=[list])
    app.add_transform(ProseOnly)
    app.add_transform(KeepHeadingSlugs)
    app.add_transform(CheckTranslationsApplied)
    app.add_transform(EditionNotebooks)
    app.connect("config-inited", _load_site_catalogue, priority=400)  # before sphinx-togglebutton writes its labels
    app.connect("doctree-read", _translate_toc_captions, priority=400)  # before the toctree collector (500)
    app.connect("doctree-read", _say_untranslated)
    app.connect("env-before-read-docs", _note_pages_read)
    app.connect("env-get-updated", _write_every_page)
    app.connect("doctree-resolved", _extract_texts, priority=900)  # after the extensions list their texts
    app.connect("doctree-resolved", _translate_section_links)
    app.connect("build-finished", _write_site_template)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
