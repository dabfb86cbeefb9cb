"""tfm_widgets.figure_text: the words of a figure come out in the catalogue's language, their numbers
kept; the English messages drawn are recorded; a glyph no font has is an error. In a kernel of the book's
build too (`start_book_kernel`). The build's use of it: test_figure_texts.py; the book: test_site_zh.py."""
from __future__ import annotations

import gettext
import io
import warnings
from collections import Counter
from pathlib import Path

import matplotlib
import nbformat
import pytest
from babel.messages.catalog import Catalog
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Text
from nbclient import NotebookClient

from tfm_widgets import figure_text
from tfm_widgets.display import figure_png

ROOT = Path(__file__).resolve().parents[1]
BOOK_FONTS = matplotlib.rc_params_from_file(ROOT / "book" / "matplotlibrc", use_default_template=False)
CHINESE = {"sequence length": "序列长度", "head {0} → kv {1}": "KV 头 {1} ← 头 {0}", "attention weight": "注意力权重"}


def _catalogue(translations: dict[str, str]) -> gettext.GNUTranslations:
    catalogue = Catalog(locale="zh_CN")
    for msgid, msgstr in translations.items():
        catalogue.add(msgid, msgstr)
    compiled = io.BytesIO()
    write_mo(compiled, catalogue)
    compiled.seek(0)
    return gettext.GNUTranslations(compiled)


@pytest.fixture
def hook(monkeypatch):
    """`figure_text`, with matplotlib and the warning filters as they were once the test is over."""
    monkeypatch.setattr(Text, "set_text", Text.set_text)
    monkeypatch.setattr(Text, "draw", Text.draw)
    monkeypatch.setattr(figure_text, "_catalogue", None)
    with matplotlib.rc_context(BOOK_FONTS), warnings.catch_warnings():
        yield figure_text


def _figure() -> Figure:
    fig = Figure(figsize=(4, 3), layout="constrained")
    ax = fig.subplots()
    ax.plot([0, 1], [0.2, 0.8], label="attention weight")
    ax.plot([0, 1], [0.5, 0.5], label="a label nobody translated")
    ax.legend()
    ax.set_xlabel("sequence length")
    ax.set_title("head 3 → kv 1\nsequence length")
    return fig


def _words(fig: Figure) -> list[str]:
    ax = fig.axes[0]
    return [ax.get_xlabel(), ax.get_title(), *(text.get_text() for text in ax.get_legend().get_texts())]


def test_a_figure_comes_out_in_the_catalogues_language_line_by_line_numbers_and_untranslated_words_kept(hook):
    english = figure_png(_figure())
    hook.install(_catalogue(CHINESE))
    fig = _figure()
    assert _words(fig) == ["序列长度", "KV 头 1 ← 头 3\n序列长度", "注意力权重", "a label nobody translated"]
    assert figure_png(fig) != english


def test_without_a_catalogue_the_words_stay_english(hook):
    hook.install()
    assert _words(_figure()) == ["sequence length", "head 3 → kv 1\nsequence length", "attention weight",
                                 "a label nobody translated"]


def test_the_messages_drawn_are_recorded_in_english_line_by_line_numbers_as_placeholders(hook):
    hook.install(_catalogue(CHINESE))
    fig = _figure()
    with hook.recording() as drawn:
        FigureCanvasAgg(fig).draw()
    # tick labels are numbers: not messages
    assert drawn == {"sequence length", "head {0} → kv {1}", "attention weight", "a label nobody translated"}


def test_a_widgets_message_instead_of_a_figure_is_translated_and_recorded_as_a_figures_words(hook):
    hook.install(_catalogue({"G = {0} must divide H = {1}": "G = {0} 必须整除 H = {1}"}))
    with hook.recording() as drawn:
        assert hook.words("G = 3 must divide H = 8\nnot translated") == "G = 3 必须整除 H = 8\nnot translated"
    assert drawn == {"G = {0} must divide H = {1}", "not translated"}
    hook.install()
    assert hook.words("G = 3 must divide H = 8") == "G = 3 must divide H = 8"


@pytest.mark.parametrize("text, expected", [
    ("sequence 2: query", ("sequence {0}: query", ["2"])),
    ("KV cache (GiB, fp16)", ("KV cache (GiB, fp16)", [])),  # a number inside a name is part of it
    ("B=1, H=8, Dh=64", ("B={0}, H={1}, Dh={2}", ["1", "8", "64"])),
    ("0.25", None),  # no word
    ("$QK^T$", None),  # math is not a word
])
def test_a_texts_message(text, expected):
    assert figure_text.message(text) == expected


FIGURE_CATALOGUES = sorted(ROOT.glob("locales/*/LC_MESSAGES/figures.po"))


def _placeholders(text: str) -> Counter:
    return Counter(figure_text._PLACEHOLDER.findall(text))


def test_there_is_a_figure_catalogue():
    assert FIGURE_CATALOGUES


@pytest.mark.parametrize("path", FIGURE_CATALOGUES, ids=lambda path: path.parts[-3])
def test_every_figure_message_is_translated_with_exactly_its_placeholders(path):
    with path.open("rb") as file:
        messages = [m for m in read_po(file) if m.id]
    assert messages
    assert [m.id for m in messages if not m.string or m.fuzzy] == []
    # a missing placeholder loses a number, an extra one breaks the figure
    assert [(m.id, m.string) for m in messages if _placeholders(m.string) != _placeholders(m.id)] == []


def test_a_glyph_missing_from_every_font_is_an_error(hook):
    hook.install()
    fig = _figure()
    fig.axes[0].set_title("注意力")
    figure_png(fig)  # the book's fonts have it
    with matplotlib.rc_context({"font.family": ["DejaVu Sans"]}):
        fig = _figure()
        fig.axes[0].set_title("注意力")
    with pytest.raises(UserWarning, match="missing from font"):
        figure_png(fig)


NOTEBOOK = """\
from matplotlib.figure import Figure
from tfm_widgets.controls import figure_image
fig = Figure(figsize=(3, 2))
fig.subplots().set_xlabel("sequence length")
figure_image(fig)
"""


def _run_in_book_kernel(tmp_path: Path, catalogue: Path | None, monkeypatch) -> nbformat.NotebookNode:
    """A notebook run by a kernel set up as the book's build sets them up (_ext/figure_texts.py)."""
    startup = tmp_path / "ipython" / "profile_default" / "startup" / "00-figure-texts.py"
    startup.parent.mkdir(parents=True, exist_ok=True)
    startup.write_text("from tfm_widgets.figure_text import start_book_kernel\nstart_book_kernel(get_ipython())\n")
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    if catalogue is None:
        monkeypatch.delenv(figure_text.CATALOGUE_VARIABLE, raising=False)
    else:
        monkeypatch.setenv(figure_text.CATALOGUE_VARIABLE, str(catalogue))
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(NOTEBOOK)])
    NotebookClient(notebook, kernel_name="python3", resources={"metadata": {"path": str(ROOT / "book")}}).execute()
    return notebook.cells[0].outputs[0]


@pytest.mark.slow
def test_a_kernel_of_the_build_draws_in_its_catalogues_language_and_records_the_messages(tmp_path, monkeypatch):
    compiled = tmp_path / "figures.mo"
    catalogue = Catalog(locale="zh_CN")
    catalogue.add("sequence length", "序列长度")
    with compiled.open("wb") as file:
        write_mo(file, catalogue)
    english = _run_in_book_kernel(tmp_path, None, monkeypatch)
    chinese = _run_in_book_kernel(tmp_path, compiled, monkeypatch)
    assert english.metadata[figure_text.OUTPUT_KEY] == chinese.metadata[figure_text.OUTPUT_KEY] == ["sequence length"]
    assert english.data["image/png"] != chinese.data["image/png"]
