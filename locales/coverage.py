"""How much of each page, exercise notebook and figure, and of what the checks say, is translated, read from the
catalogues in locales/<language>/LC_MESSAGES/ (book/<page>.po, site.po, figures.po, notebooks/<id>.po, feedback.po).

    python locales/coverage.py      # make i18n-coverage: per edition and catalogue, translated / total, fuzzy,
                                    # untranslated

A message is translated when it has a translation that is not marked fuzzy (sphinx-intl marks fuzzy
the entry of an English paragraph that changed, keeping its old translation for the translator to
revisit). The catalogues say what the English was when they were last updated: after an English
change, `make i18n-update` first. The pages of ``translated_pages`` (_config.yml), every exercise
notebook, the site's catalogue, the figures' and the checks' (feedback.po) are released: they must stay at 100 %
(tests/test_translation_coverage.py and tests/test_feedback_translation.py check them against messages extracted
afresh); a notebook's translation is released with the notebook (`python -m autograde release`) only while it is
complete.
"""
from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml
from babel.messages.pofile import read_po
from sphinx_intl.basic import update

from editions.assignments import assignment_ids
from editions.notebooks import CATALOGUES

ROOT = Path(__file__).resolve().parents[1]
LOCALES = ROOT / "locales"
SITE = "site"  # the site catalogue (_ext/translation.py): titles, the extensions' words
FIGURES = "figures"  # the words of the figures that code draws (_ext/figure_texts.py)
FEEDBACK = "feedback"  # what the checks say: their messages, hints and fixes (autograde/messages.py)


@dataclass(frozen=True)
class Coverage:
    page: str  # the catalogue's domain: book/intro, site, or notebooks/ch01_attention
    translated: int
    fuzzy: int
    untranslated: int

    @property
    def total(self) -> int:
        return self.translated + self.fuzzy + self.untranslated

    @property
    def complete(self) -> bool:
        return self.translated == self.total


def coverage(locale_dir: Path, language: str) -> list[Coverage]:
    """Every catalogue of ``language`` under ``locale_dir``, by page."""
    folder = locale_dir / language / "LC_MESSAGES"
    found = []
    for path in sorted(folder.rglob("*.po")):
        with path.open("rb") as file:
            messages = [m for m in read_po(file) if m.id]
        fuzzy = sum(1 for m in messages if m.string and m.fuzzy)
        untranslated = sum(1 for m in messages if not m.string)
        found.append(Coverage(path.relative_to(folder).with_suffix("").as_posix(), len(messages) - fuzzy - untranslated,
                              fuzzy, untranslated))
    return found


def coverage_after_update(pot_dir: Path, locale_dir: Path, language: str, work_dir: Path) -> list[Coverage]:
    """The coverage the catalogues would have once brought in step with the templates in ``pot_dir``,
    computed on a copy in ``work_dir``: what ``make i18n-update`` would leave to translate."""
    if (locale_dir / language).is_dir():
        shutil.copytree(locale_dir / language, work_dir / language, dirs_exist_ok=True)
    update(str(work_dir), str(pot_dir), [language], ignore_obsolete=True)
    return coverage(work_dir, language)


def released() -> dict[str, list[str]]:
    """The catalogues each language has released: the site's, the figures', the checks', the pages' of
    ``translated_pages`` (_config.yml) and every exercise notebook's."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))["sphinx"]["config"]
    notebooks = [f"{CATALOGUES}/{assignment}" for assignment in assignment_ids()]
    return {language: [SITE, FIGURES, FEEDBACK, *pages, *notebooks]
            for language, pages in config["translated_pages"].items()}


def report(found: list[Coverage], released_pages: list[str]) -> str:
    lines = [f"{'page':32} {'translated':>12} {'fuzzy':>6} {'untranslated':>13}"]
    for c in found:
        mark = "  released" if c.page in released_pages else ""
        lines.append(f"{c.page:32} {c.translated:5} / {c.total:<4} {c.fuzzy:6} {c.untranslated:13}   "
                     f"{100 * c.translated / max(c.total, 1):5.1f} %{mark}")
    translated, total = sum(c.translated for c in found), sum(c.total for c in found)
    lines.append(f"{'all':32} {translated:5} / {total:<4} {'':20}   {100 * translated / max(total, 1):5.1f} %")
    return "\n".join(lines)


def main() -> int:
    for language, pages in released().items():
        print(f"{language}\n{report(coverage(LOCALES, language), pages)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
