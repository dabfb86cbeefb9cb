"""The Chinese edition's released pages stay fully translated (locales/coverage.py).

The messages are extracted afresh from the English sources (the gettext build of locales/build.py)
and the catalogues are brought in step with them on a copy, as `make i18n-update` would: a released
page whose English paragraph changed, without its translation being revisited, has a fuzzy or a
missing entry and fails. A small project shows that the check catches exactly that.
"""
from __future__ import annotations

import importlib.util
import io
import subprocess
import sys
from pathlib import Path

import pytest
from sphinx.application import Sphinx
from sphinx.util.docutils import docutils_namespace

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


def _translate_all(locale_dir: Path) -> None:
    from babel.messages.pofile import read_po, write_po

    path = locale_dir / "zh_CN" / "LC_MESSAGES" / "index.po"
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
