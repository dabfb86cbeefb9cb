"""Build the book in every edition, or extract its messages and the exercise notebooks' for the translators.

    python locales/build.py             # every edition: English into _build/html, the others into their folders
    python locales/build.py --strict    # the same, warnings as errors (-W -n --keep-going): make book-strict
    python locales/build.py --update    # extract the messages into _build/gettext/ (one .pot per page, and
                                        # site.pot) and bring locales/<language>/LC_MESSAGES/ in step (sphinx-intl);
                                        # then the same for the notebooks, as --update-notebooks, and for
                                        # what the checks say, as --update-feedback
    python locales/build.py --update-notebooks   # only the notebooks: the prose of each released notebook
                                        # (release/<id>/<id>.ipynb; `python -m autograde release` first) into
                                        # _build/gettext-notebooks/notebooks/<id>.pot, and LC_MESSAGES/notebooks/<id>.po
    python locales/build.py --update-figures    # only the words of the figures: extract them as --update does,
                                        # and bring LC_MESSAGES/figures.po in step with _build/gettext/figures.pot
    python locales/build.py --update-feedback   # only what the checks say (autograde/messages.py): their templates
                                        # and the chapters' mistakes, hints, fixes and case labels into
                                        # _build/gettext-feedback/feedback.pot, and LC_MESSAGES/feedback.po
    python locales/build.py --extract DIR   # only extract the book's messages, into DIR

An edition is ``jupyter-book build .`` with Sphinx's ``language`` set, which jupyter-book's command
line cannot do: the same configuration and table of contents (``_ext/languages.py`` places it in the
site). Each edition executes its pages with an execution cache of its own, since its figures speak its
language (``_ext/figure_texts.py``).
``--path-output DIR`` builds into ``DIR/_build`` instead, as jupyter-book's option does.
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import yaml
from babel.messages.pofile import write_po
from jupyter_book.sphinx import build_sphinx
from sphinx_intl.basic import update

from editions.assignments import assignment_ids, released_notebook, source_markdown
from editions.notebooks import CATALOGUES, template

ROOT = Path(__file__).resolve().parents[1]
CONFIG, TOC = ROOT / "_config.yml", ROOT / "_toc.yml"


def editions() -> list[tuple[str, str]]:
    """(language, folder in the site) of every edition, from _config.yml: the English one first."""
    config = yaml.safe_load(CONFIG.read_text(encoding="utf-8"))["sphinx"]["config"]
    return [(language, folder) for language, folder, _name in config["book_editions"]]


def translated_languages() -> list[str]:
    """The languages of the editions in a folder of the site: those that have catalogues."""
    return [language for language, folder in editions() if folder]


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
        status |= _sphinx("html", edition_dir / "html", edition_dir / ".doctrees", edition_dir / ".jupyter_cache",
                          strict, language=language, book_site=str(site))
    return status


def extract(pot_dir: Path, build_dir: Path) -> int:
    """The message templates (.pot) of the English sources into ``pot_dir``: one per page, site.pot and figures.pot.

    The pages are executed as for the English site built in ``build_dir`` (its execution cache), since the
    widgets' texts and the figures' come from their outputs, and the widgets' states it drew are read again;
    every page is read afresh, so that no message comes from an older reading.
    """
    return _sphinx("gettext", pot_dir, pot_dir.parent / ".doctrees-gettext", build_dir / ".jupyter_cache",
                   strict=False, fresh=True, book_site=str(build_dir / "html"))


def extract_notebooks(pot_dir: Path, root: Path = ROOT) -> None:
    """The message templates of the course's released notebooks: ``pot_dir/notebooks/<id>.pot``.

    Raises:
        ValueError: a notebook is not released, or older than its source.
    """
    for assignment in assignment_ids(root / "solutions"):
        notebook, source = released_notebook(assignment, root), source_markdown(assignment, root / "solutions")
        if not notebook.is_file() or notebook.stat().st_mtime < source.stat().st_mtime:
            raise ValueError(f"{notebook} is missing or older than {source}: run `python -m autograde release` first")
        path = pot_dir / CATALOGUES / f"{assignment}.pot"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as file:
            write_po(file, template(nbformat.read(notebook, 4), assignment), no_location=True)


def update_notebooks(build_dir: Path) -> int:
    """Bring the notebooks' catalogues of every edition in step with the released notebooks."""
    pot_dir = build_dir / "gettext-notebooks"
    shutil.rmtree(pot_dir, ignore_errors=True)  # the templates of assignments that are gone
    try:
        extract_notebooks(pot_dir)
    except ValueError as why:
        print(f"error: {why}", file=sys.stderr)
        return 1
    update(str(ROOT / "locales"), str(pot_dir), translated_languages(), ignore_obsolete=True)
    return 0


def extract_feedback(pot_dir: Path) -> Path:
    """The message template of what the checks say: ``pot_dir/feedback.pot``, written by the grader's
    `autograde.messages` (the book's build runs the grader, never imports it)."""
    path = pot_dir / "feedback.pot"
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "autograde.messages", str(path)], cwd=ROOT, check=True)
    return path


def update_feedback(build_dir: Path) -> int:
    """Bring the checks' catalogue of every edition in step with the English messages."""
    pot_dir = build_dir / "gettext-feedback"
    shutil.rmtree(pot_dir, ignore_errors=True)
    extract_feedback(pot_dir)
    update(str(ROOT / "locales"), str(pot_dir), translated_languages(), ignore_obsolete=True)
    return 0


def update_figures(build_dir: Path) -> int:
    """Bring the figures catalogue of every edition, and no other, in step with the English figures."""
    pot_dir, figures_only = build_dir / "gettext", build_dir / "gettext-figures"
    status = extract(pot_dir, build_dir)
    if status == 0:
        shutil.rmtree(figures_only, ignore_errors=True)
        figures_only.mkdir(parents=True)
        shutil.copy(pot_dir / "figures.pot", figures_only)
        update(str(ROOT / "locales"), str(figures_only), translated_languages(), ignore_obsolete=True)
    return status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--strict", action="store_true", help="warnings are errors (-W -n --keep-going)")
    action.add_argument("--update", action="store_true", help="extract the messages and update the catalogues")
    action.add_argument("--update-notebooks", action="store_true",
                        help="only the exercise notebooks': extract their messages and update their catalogues")
    action.add_argument("--update-figures", action="store_true",
                        help="only the figures': extract the messages and update the figures catalogues")
    action.add_argument("--update-feedback", action="store_true",
                        help="only what the checks say: extract their messages and update the feedback catalogues")
    action.add_argument("--extract", type=Path, metavar="DIR", help="only extract the book's messages, into DIR")
    parser.add_argument("--path-output", type=Path, default=ROOT, help="build into PATH_OUTPUT/_build")
    args = parser.parse_args(argv)
    build_dir = args.path_output.resolve() / "_build"
    if args.extract:
        return extract(args.extract.resolve(), build_dir)
    if args.update_notebooks:
        return update_notebooks(build_dir)
    if args.update_figures:
        return update_figures(build_dir)
    if args.update_feedback:
        return update_feedback(build_dir)
    if not args.update:
        return build(build_dir, args.strict)
    pot_dir = build_dir / "gettext"
    status = extract(pot_dir, build_dir)
    if status == 0:
        # Entries whose message is gone are dropped: a changed paragraph keeps its old translation, as fuzzy.
        update(str(ROOT / "locales"), str(pot_dir), translated_languages(), ignore_obsolete=True)
    return status or update_notebooks(build_dir) or update_feedback(build_dir)


if __name__ == "__main__":
    sys.exit(main())
