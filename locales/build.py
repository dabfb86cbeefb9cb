"""Build the book in every edition, or extract its messages for the translators.

    python locales/build.py             # every edition: English into _build/html, the others into their folders
    python locales/build.py --strict    # the same, warnings as errors (-W -n --keep-going): make book-strict
    python locales/build.py --update    # extract the messages into _build/gettext/ (one .pot per page, and
                                        # site.pot) and bring locales/<language>/LC_MESSAGES/ in step (sphinx-intl)
    python locales/build.py --extract DIR   # only extract them, into DIR

An edition is ``jupyter-book build .`` with Sphinx's ``language`` set, which jupyter-book's command
line cannot do: the same configuration, table of contents and execution cache, so that an edition
executes nothing the English build did not (``_ext/languages.py`` places it in the site).
``--path-output DIR`` builds into ``DIR/_build`` instead, as jupyter-book's option does.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml
from jupyter_book.sphinx import build_sphinx
from sphinx_intl.basic import update

ROOT = Path(__file__).resolve().parents[1]
CONFIG, TOC = ROOT / "_config.yml", ROOT / "_toc.yml"


def editions() -> list[tuple[str, str]]:
    """(language, folder in the site) of every edition, from _config.yml: the English one first."""
    config = yaml.safe_load(CONFIG.read_text(encoding="utf-8"))["sphinx"]["config"]
    return [(language, folder) for language, folder, _name in config["book_editions"]]


def _sphinx(builder: str, outdir: Path, doctrees: Path, cache: Path, strict: bool, fresh: bool = False,
            **config) -> int:
    """One Sphinx build of the book, as ``jupyter-book build .`` runs it: its exit status."""
    overrides = {"external_toc_path": TOC.as_posix(), "latex_individualpages": False,
                 "nb_execution_cache_path": str(cache), **config}
    if strict:
        overrides["nitpicky"] = True
    result = build_sphinx(ROOT, outdir, noconfig=True, path_config=str(CONFIG), confoverrides=overrides,
                          builder=builder, doctreedir=doctrees, warningiserror=strict, keep_going=strict,
                          freshenv=fresh)
    return result if isinstance(result, int) else 1  # an exception has been reported already


def build(build_dir: Path, strict: bool = False) -> int:
    """Every edition into the site ``build_dir/html``: the first at its root, the others in their folders."""
    status, site = 0, build_dir / "html"
    for language, folder in editions():
        # The root edition where jupyter-book builds it; another in a build folder of its own, whence
        # it is copied into the site (_ext/languages.py).
        edition_dir = build_dir / language if folder else build_dir
        status |= _sphinx("html", edition_dir / "html", edition_dir / ".doctrees", build_dir / ".jupyter_cache", strict,
                          language=language, book_site=str(site))
    return status


def extract(pot_dir: Path, cache: Path) -> int:
    """The message templates (.pot) of the English sources into ``pot_dir``, one per page and site.pot.

    The pages are executed as for the site (``cache``: its execution cache), since the widgets' texts
    come from their outputs; every page is read afresh, so that no message comes from an older reading.
    """
    return _sphinx("gettext", pot_dir, pot_dir.parent / ".doctrees-gettext", cache, strict=False, fresh=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--strict", action="store_true", help="warnings are errors (-W -n --keep-going)")
    action.add_argument("--update", action="store_true", help="extract the messages and update the catalogues")
    action.add_argument("--extract", type=Path, metavar="DIR", help="only extract the messages, into DIR")
    parser.add_argument("--path-output", type=Path, default=ROOT, help="build into PATH_OUTPUT/_build")
    args = parser.parse_args(argv)
    build_dir = args.path_output.resolve() / "_build"
    if args.extract:
        return extract(args.extract.resolve(), build_dir / ".jupyter_cache")
    if not args.update:
        return build(build_dir, args.strict)
    pot_dir = build_dir / "gettext"
    status = extract(pot_dir, build_dir / ".jupyter_cache")
    if status == 0:
        # Entries whose message is gone are dropped: a changed paragraph keeps its old translation, as fuzzy.
        update(str(ROOT / "locales"), str(pot_dir), [language for language, folder in editions() if folder],
               ignore_obsolete=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
