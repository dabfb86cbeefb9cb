"""Chinese text in the book's figures: with book/matplotlibrc, matplotlib finds a glyph for every
character (no empty boxes). `make fonts` installs the CJK font it names."""
from __future__ import annotations

import warnings
from pathlib import Path

import matplotlib
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

ROOT = Path(__file__).resolve().parents[1]
# Labels as the date task writes them: Chinese and Latin text, digits, a minus sign.
LABELS = ["2026年11月22日", "二〇二六年十一月二十二日", "source character (keys) −0.5"]


def _missing_glyphs(rc) -> list[str]:
    with matplotlib.rc_context(rc), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        figure = Figure()
        axes = figure.subplots()
        for i, label in enumerate(LABELS):
            axes.text(0.1, 0.2 + 0.2 * i, label)
        axes.set_title(LABELS[0])
        FigureCanvasAgg(figure).draw()
    return [str(warning.message) for warning in caught if "missing from font" in str(warning.message)]


def test_chinese_labels_have_glyphs_with_the_books_settings():
    rc = matplotlib.rc_params_from_file(ROOT / "book" / "matplotlibrc", use_default_template=False)
    missing = _missing_glyphs(rc)
    assert not missing, f"missing glyphs (is the CJK font installed? `make fonts`): {missing[:3]}"


def test_the_default_font_alone_lacks_them():
    """The check above can fail: matplotlib's own font has no Chinese glyphs."""
    assert _missing_glyphs({"font.family": ["DejaVu Sans"]})
