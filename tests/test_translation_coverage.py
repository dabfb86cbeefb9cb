"""The Chinese edition's released pages and the exercise notebooks stay fully translated (locales/coverage.py).

The messages are extracted afresh from the English sources (the gettext build of locales/build.py; for the
notebooks, a release into a course root of its own) and the catalogues are brought in step with them on a
copy, as `make i18n-update` would: a released page or notebook whose English paragraph changed, without its
translation being revisited, has a fuzzy or a missing entry and fails. A small project and a small notebook
show that the check catches exactly that.
"""
from __future__ import annotations

import importlib.util
import io
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from sphinx.application import Sphinx
from sphinx.util.docutils import docutils_namespace

from editions.assignments import assignment_ids
from editions.notebooks import CATALOGUES, read_translations, translate_notebook

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "_build" / ".jupyter_cache"


def _load(name: str):
    # locales/ holds the translators' tools, not a package: load them by path.
    spec = importlib.util.spec_from_file_location(f"locales_{name}", ROOT / "locales" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


coverage = _load("coverage")
build = _load("build")


def _unfinished(found, pages) -> list:
    return [c for c in found if c.page in pages and not c.complete]


def _missing(found, pages) -> list[str]:
    return sorted(set(pages) - {c.page for c in found})


@pytest.mark.slow
def test_released_pages_are_fully_translated(tmp_path):
    if not CACHE.is_dir():
        pytest.skip("the pages' execution cache is missing: build the book first (`make book`)")
    pot_dir = tmp_path / "gettext"
    # In a process of its own: a book build leaves Sphinx's shared defaults changed for later builds.
    extracted = subprocess.run([sys.executable, ROOT / "locales" / "build.py", "--extract", pot_dir],
                               capture_output=True, text=True)
    assert extracted.returncode == 0, f"the gettext build failed:\n{extracted.stderr[-3000:]}"
    for language, pages in coverage.released().items():
        found = coverage.coverage_after_update(pot_dir, coverage.LOCALES, language, tmp_path / "locales")
        assert not _missing(found, pages), f"{language}: released pages without a catalogue: {_missing(found, pages)}"
        assert not _unfinished(found, pages), (
            f"{language}: released pages with untranslated or fuzzy messages (run `make i18n-update`, translate "
            f"them, then `make i18n-coverage`): {_unfinished(found, pages)}")


CONF = """
extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}  # Sphinx's default dict is shared by the process's builds
root_doc = "index"
locale_dirs = ["locales"]
gettext_compact = False
"""
PAGE = "# A page\n\nAttention mixes the values.\n\nThe softmax makes weights.\n"
TRANSLATIONS = {"A page": "一页", "Attention mixes the values.": "注意力混合各个值。",
                "The softmax makes weights.": "softmax 产生权重。"}


def _extract(project: Path, page: str) -> Path:
    (project / "conf.py").write_text(CONF, encoding="utf-8")
    (project / "index.md").write_text(page, encoding="utf-8")
    with docutils_namespace():  # each build registers its nodes and directives afresh
        app = Sphinx(project, project, project / "_build" / "gettext", project / "_build" / ".doctrees", "gettext",
                     status=None, warning=io.StringIO(), freshenv=True)
        app.build()
    return project / "_build" / "gettext"


def _translate_all(locale_dir: Path, domain: str = "index") -> None:
    from babel.messages.pofile import read_po, write_po

    path = locale_dir / "zh_CN" / "LC_MESSAGES" / f"{domain}.po"
    with path.open("rb") as file:
        catalogue = read_po(file)
    for message in catalogue:
        if message.id:
            message.string = TRANSLATIONS[message.id]
    with path.open("wb") as file:
        write_po(file, catalogue)


def test_a_changed_english_paragraph_fails_the_check_until_its_translation_is_revisited(tmp_path):
    project, locale_dir = tmp_path / "book", tmp_path / "book" / "locales"
    project.mkdir()
    found = coverage.coverage_after_update(_extract(project, PAGE), locale_dir, "zh_CN", tmp_path / "new")
    assert [(c.page, c.untranslated) for c in found] == [("index", 3)]  # a new catalogue: nothing translated yet
    (locale_dir / "zh_CN").mkdir(parents=True)
    (tmp_path / "new" / "zh_CN" / "LC_MESSAGES").rename(locale_dir / "zh_CN" / "LC_MESSAGES")
    _translate_all(locale_dir)
    assert not _unfinished(coverage.coverage(locale_dir, "zh_CN"), ["index"])

    changed = PAGE.replace("Attention mixes the values.", "Attention averages the values.")
    found = coverage.coverage_after_update(_extract(project, changed), locale_dir, "zh_CN", tmp_path / "after")
    assert [(c.page, c.fuzzy, c.untranslated) for c in _unfinished(found, ["index"])] == [("index", 1, 0)]
    assert not _unfinished(coverage.coverage(locale_dir, "zh_CN"), ["index"]), "the check must not touch the catalogues"


@pytest.mark.slow
def test_every_exercise_notebook_is_fully_translated(tmp_path, released_course):
    course = released_course(tmp_path / "course", assignment_ids())
    build.extract_notebooks(tmp_path / "gettext", course)
    for language, pages in coverage.released().items():
        notebooks = [page for page in pages if page.startswith(f"{CATALOGUES}/")]
        found = coverage.coverage_after_update(tmp_path / "gettext", coverage.LOCALES, language, tmp_path / language)
        assert len(notebooks) == len(assignment_ids())
        assert not _missing(found, notebooks), f"{language}: notebooks without a catalogue: {_missing(found, notebooks)}"
        assert not _unfinished(found, notebooks), (
            f"{language}: notebooks with untranslated or fuzzy messages (run `python locales/build.py "
            f"--update-notebooks`, translate them, then `make i18n-coverage`): {_unfinished(found, notebooks)}")


def _released_notebook(root: Path, intro: str) -> nbformat.NotebookNode:
    """A course root whose one assignment, ``ex``, is released with ``intro`` as its text."""
    (root / "solutions" / "ex").mkdir(parents=True, exist_ok=True)
    (root / "solutions" / "ex" / "ex.md").touch()
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(intro),
                                               nbformat.v4.new_code_cell("answer = 42")])
    (root / "release" / "ex").mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, root / "release" / "ex" / "ex.ipynb")
    return notebook


def test_a_changed_notebook_paragraph_becomes_fuzzy_alone_and_is_not_released_until_revisited(tmp_path):
    course, locale_dir = tmp_path / "course", tmp_path / "course" / "locales"
    _released_notebook(course, PAGE)
    build.extract_notebooks(tmp_path / "pot", course)
    found = coverage.coverage_after_update(tmp_path / "pot", locale_dir, "zh_CN", tmp_path / "new")
    assert [(c.page, c.untranslated) for c in found] == [(f"{CATALOGUES}/ex", 3)]
    (locale_dir / "zh_CN").mkdir(parents=True)
    (tmp_path / "new" / "zh_CN" / "LC_MESSAGES").rename(locale_dir / "zh_CN" / "LC_MESSAGES")
    _translate_all(locale_dir, f"{CATALOGUES}/ex")
    assert not _unfinished(coverage.coverage(locale_dir, "zh_CN"), [f"{CATALOGUES}/ex"])

    changed = _released_notebook(course, PAGE.replace("Attention mixes the values.", "Attention averages the values."))
    build.extract_notebooks(tmp_path / "pot-after", course)
    found = coverage.coverage_after_update(tmp_path / "pot-after", locale_dir, "zh_CN", tmp_path / "after")
    assert [(c.page, c.fuzzy, c.untranslated) for c in _unfinished(found, [f"{CATALOGUES}/ex"])] == [
        (f"{CATALOGUES}/ex", 1, 0)]
    updated = tmp_path / "after" / "zh_CN" / "LC_MESSAGES" / CATALOGUES / "ex.po"
    with pytest.raises(ValueError, match="1 messages have no translation, e.g. 'Attention averages the values.'"):
        translate_notebook(changed, read_translations(updated))


def test_the_book_build_takes_the_checks_message_template_from_the_grader_s_command(tmp_path):
    from babel.messages.pofile import read_po

    from autograde import messages

    with build.extract_feedback(tmp_path).open("rb") as written:
        extracted = {m.id for m in read_po(written) if m.id}
    assert extracted and extracted == {m.id for m in messages.template() if m.id}
