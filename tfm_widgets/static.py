"""The static version of a widget, for the book's pages: a few values per control, every state drawn ahead.

A `StaticWidget` has `Control`s, each offering a few values, and `Panel`s, each drawn by the widget's own code
for every combination of the controls it depends on. `render` writes the figures and a manifest, `static_html`
the page's part; a `StaticRecipe` in a live widget's snapshot lets the book's build make it again
(`cached_render`). The whole path, page script included: tfm_widgets/README.md.
"""
from __future__ import annotations

import hashlib
import html
import importlib
import io
import itertools
import json
import os
import re
import shutil
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib
import PIL.Image
import torch
from matplotlib.figure import Figure

from .display import FIGURE_WIDTH, PAGE_DPI, figure_png
from .figure_text import recording, words

__all__ = ["Control", "Panel", "StaticWidget", "StaticRecipe", "render", "cached_render", "code_fingerprint",
           "static_html", "single_panel", "STATIC_HINT"]

STATIC_HINT = ("Each control offers a few precomputed values here. For any value, your own inputs and your own "
               "function (fn=…), open this page live with the rocket (launch) button at the top (Binder, "
               "JupyterHub or Colab) and run its cells. On a narrow screen, tap a figure to see it full size.")
_RECIPE_ATTRIBUTE = "data-tfm-static"
_FACTORY_PACKAGE = "tfm_widgets."


@dataclass(frozen=True)
class Control:
    """One control of the static version: the few values a reader can pick.

    Args:
        name: the keyword the panels' ``draw`` receives.
        label: shown next to the control (the live control's description).
        values: the values offered, in order. ``(False, True)`` becomes a checkbox, more than two
            numbers a slider, anything else a menu; a single value is shown as plain text, not as a control.
        initial: the value shown first; one of ``values``.
        labels: how each value is written (default ``str(value)``).
    Raises:
        ValueError: no values, repeated values, an initial value that is not offered, or labels
            that do not match the values.
    """

    name: str
    label: str
    values: tuple
    initial: object
    labels: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if not self.values:
            raise ValueError(f"control {self.name!r} offers no values")
        if len({repr(v) for v in self.values}) != len(self.values):
            raise ValueError(f"control {self.name!r} offers a value twice: {self.values}")
        if self.initial not in self.values:
            raise ValueError(f"control {self.name!r}: initial value {self.initial!r} is not one of {self.values}")
        if any(isinstance(v, bool) for v in self.values) and tuple(self.values) != (False, True):
            raise ValueError(f"control {self.name!r}: a checkbox offers exactly (False, True), got {self.values}")
        if self.labels is not None and len(self.labels) != len(self.values):
            raise ValueError(f"control {self.name!r}: {len(self.labels)} labels for {len(self.values)} values")

    @property
    def kind(self) -> str:
        """How the page shows it: "fixed", "checkbox", "range" (a slider) or "select" (a menu)."""
        if len(self.values) == 1:
            return "fixed"
        if tuple(self.values) == (False, True):
            return "checkbox"
        if len(self.values) > 2 and all(isinstance(v, (int, float)) for v in self.values):
            return "range"
        return "select"

    @property
    def value_labels(self) -> list[str]:
        return list(self.labels) if self.labels is not None else [str(v) for v in self.values]


@dataclass(frozen=True)
class Panel:
    """One figure of the static version.

    Args:
        draw: ``draw(**values)`` → the figure for the values of ``controls``; a ValueError
            (a combination the live widget refuses too) is shown as its message instead.
        controls: names of the controls the figure depends on.
        key: ``key(**values)`` → the same key for combinations that draw the same figure, so it
            is drawn once (default: every combination is drawn).
        alt: the image's alternative text.
    """

    draw: Callable[..., Figure]
    controls: tuple[str, ...]
    key: Callable[..., Hashable] | None = None
    alt: str = ""


@dataclass(frozen=True)
class StaticWidget:
    """The static version of a widget: its title, controls and figures.

    Raises:
        ValueError: no panels, two controls of the same name, or a panel that depends on a
            control the widget does not have.
    """

    title: str
    controls: tuple[Control, ...]
    panels: tuple[Panel, ...]
    note: str = ""

    def __post_init__(self) -> None:
        names = [c.name for c in self.controls]
        if len(set(names)) != len(names):
            raise ValueError(f"two controls share a name: {names}")
        if not self.panels:
            raise ValueError("a static widget needs at least one panel")
        for panel in self.panels:
            unknown = set(panel.controls) - set(names)
            if unknown:
                raise ValueError(f"a panel depends on unknown controls {sorted(unknown)}; the controls are {names}")

    def states(self, panel: Panel) -> Iterator[tuple[tuple[int, ...], dict]]:
        """Every combination of the panel's controls: (value indices, {name: value})."""
        controls = [self.controls[self.index_of(name)] for name in panel.controls]
        for indices in itertools.product(*(range(len(c.values)) for c in controls)):
            yield indices, {c.name: c.values[i] for c, i in zip(controls, indices)}

    def index_of(self, name: str) -> int:
        """The position of the control called ``name``."""
        return [c.name for c in self.controls].index(name)


def single_panel(draw: Callable[..., None], *args) -> Figure:
    """A one-axes figure as wide as the book's text column, drawn by ``draw(*args, ax)``."""
    fig = Figure(figsize=(FIGURE_WIDTH, 3.3), layout="constrained")
    draw(*args, fig.subplots())
    return fig


def _state_key(indices: tuple[int, ...]) -> str:
    """How a combination of value indices is written in the manifest (and by the page's script)."""
    return "-".join(map(str, indices))


def render(widget: StaticWidget, folder: str | Path, dpi: int = PAGE_DPI) -> dict:
    """Draw every state of every panel into ``folder`` (PNG files) and write ``manifest.json`` there.

    Returns:
        the manifest: {"title", "note", "controls": [{"label", "kind", "labels", "initial"}],
        "panels": [{"controls": [control index, …], "alt", "states": {"i-j": file name or
        {"error": message}}}], "texts": the messages the figures drew (`figure_text.recording`)}.
    Raises:
        ValueError: a panel cannot draw the initial state.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with recording() as texts:
        panels = _render_panels(widget, folder, dpi)
    manifest = {"title": widget.title, "note": widget.note, "panels": panels,
                "controls": [{"label": c.label, "kind": c.kind, "labels": c.value_labels,
                              "initial": c.values.index(c.initial)} for c in widget.controls],
                "texts": sorted(texts)}
    (folder / "manifest.json").write_text(json.dumps(manifest, ensure_ascii=False, indent=1), encoding="utf-8")
    return manifest


def _render_panels(widget: StaticWidget, folder: Path, dpi: int) -> list[dict]:
    """`render`'s figures: each panel's states, as the manifest lists them."""
    initial = [c.values.index(c.initial) for c in widget.controls]
    panels = []
    for p, panel in enumerate(widget.panels):
        columns = [widget.index_of(name) for name in panel.controls]
        drawn: dict[Hashable, str | dict] = {}
        states = {}
        for indices, values in widget.states(panel):
            key = panel.key(**values) if panel.key else indices
            if key not in drawn:
                try:
                    figure = panel.draw(**values)
                except ValueError as error:
                    if list(indices) == [initial[c] for c in columns]:
                        raise ValueError(f"{widget.title}: panel {p} cannot draw the initial state: {error}") from error
                    drawn[key] = {"error": words(str(error))}
                else:
                    drawn[key] = f"p{p}-{len(drawn)}.png"
                    (folder / drawn[key]).write_bytes(_compact_png(figure_png(figure, dpi=dpi)))
            states[_state_key(indices)] = drawn[key]
        panels.append({"controls": columns, "alt": panel.alt, "states": states})
    return panels


def _compact_png(png: bytes) -> bytes:
    """The figure in 256 colours, on white: about a quarter of the bytes, for the site's pages (a reader's
    browser fetches each state it shows; the site holds every one)."""
    image = PIL.Image.open(io.BytesIO(png)).convert("RGBA")
    flat = PIL.Image.alpha_composite(PIL.Image.new("RGBA", image.size, "white"), image).convert("RGB")
    buffer = io.BytesIO()
    flat.quantize(256, method=PIL.Image.Quantize.FASTOCTREE).save(buffer, format="PNG", optimize=True)
    return buffer.getvalue()


@dataclass(frozen=True)
class StaticRecipe:
    """How to build a widget's static version again: ``factory(**kwargs)`` → a `StaticWidget`.

    Args:
        factory: "module:function", a function of a module in ``tfm_widgets``.
        kwargs: JSON values (the live widget's own arguments, e.g. recorded data).
    """

    factory: str
    kwargs: dict = field(default_factory=dict)

    @classmethod
    def of(cls, factory: Callable[..., StaticWidget], **kwargs) -> StaticRecipe:
        """The recipe that calls ``factory(**kwargs)``. Raises ValueError for non-JSON arguments."""
        try:
            json.dumps(kwargs)
        except TypeError as error:
            raise ValueError(f"the arguments of a static widget must be JSON values: {error}") from None
        return cls(f"{factory.__module__}:{factory.__qualname__}", dict(kwargs))

    def build(self) -> StaticWidget:
        """Import the factory and call it. Raises ValueError for a factory outside ``tfm_widgets``."""
        module, _, name = self.factory.partition(":")
        if not module.startswith(_FACTORY_PACKAGE) or not name.isidentifier():
            raise ValueError(f"a static widget is built by a function of {_FACTORY_PACKAGE}*, got {self.factory!r}")
        return getattr(importlib.import_module(module), name)(**self.kwargs)

    def to_json(self) -> str:
        return json.dumps({"factory": self.factory, "kwargs": self.kwargs}, sort_keys=True)

    def html_attribute(self) -> str:
        """The attribute that carries the recipe in a widget's HTML snapshot."""
        return f'{_RECIPE_ATTRIBUTE}="{html.escape(self.to_json())}"'

    @classmethod
    def find_in(cls, text: str) -> StaticRecipe | None:
        """The recipe carried by an HTML snapshot (`html_attribute`), or None."""
        match = re.search(rf'{_RECIPE_ATTRIBUTE}="([^"]*)"', text)
        if match is None:
            return None
        data = json.loads(html.unescape(match.group(1)))
        return cls(data["factory"], data["kwargs"])


def code_fingerprint() -> str:
    """A hash of everything a static widget's figures depend on: the files of tfm_ref, tfm_lab (the recorded
    results, the checkpoint) and the widgets, and the library versions."""
    import tfm_lab
    import tfm_ref

    packages = [Path(package.__file__).resolve().parent for package in (tfm_ref, tfm_lab)]
    packages.append(Path(__file__).resolve().parent)
    digest = hashlib.sha256(f"{matplotlib.__version__} {torch.__version__}".encode())
    for package in packages:
        for path in sorted(package.rglob("*")):
            if path.is_file() and path.suffix in (".py", ".pt", ".json"):
                digest.update(str(path.relative_to(package.parent)).encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()


def cached_render(recipe: StaticRecipe, root: str | Path, fingerprint: str) -> tuple[str, dict]:
    """Render ``recipe``'s widget into ``root/<hash>/`` unless that folder is complete already.

    The hash covers the recipe and ``fingerprint`` (see `code_fingerprint`), so the folder name
    changes, and the browser's cached copies are not used, whenever what it shows may change.
    Returns:
        (the folder's name, the manifest).
    """
    name = hashlib.sha256(f"{recipe.to_json()}\n{fingerprint}".encode()).hexdigest()[:16]
    folder = Path(root) / name
    manifest = folder / "manifest.json"
    if manifest.is_file():
        return name, json.loads(manifest.read_text(encoding="utf-8"))
    partial = Path(root) / f".{name}.{os.getpid()}"  # renamed when complete: an interrupted build leaves no half folder
    shutil.rmtree(partial, ignore_errors=True)
    written = render(recipe.build(), partial)
    try:
        partial.rename(folder)
    except OSError:  # another process (a parallel build) completed the same folder first
        shutil.rmtree(partial, ignore_errors=True)
    return name, written


def _control_html(index: int, control: dict) -> str:
    label, initial, labels = html.escape(control["label"]), control["initial"], control["labels"]
    data = f'data-control="{index}"'
    if control["kind"] == "fixed":  # plain text: nothing to choose
        return f'<span class="tfm-widget-fixed">{label} {html.escape(labels[0])}</span>'
    if control["kind"] == "checkbox":
        checked = " checked" if initial else ""
        return f'<label class="tfm-widget-control"><input type="checkbox" {data}{checked}/> <span>{label}</span></label>'
    if control["kind"] == "range":
        return (f'<label class="tfm-widget-control"><span>{label}</span> <input type="range" min="0" '
                f'max="{len(labels) - 1}" step="1" value="{initial}" {data}/> '
                f'<output>{html.escape(labels[initial])}</output></label>')
    options = "".join(f'<option value="{i}"{" selected" if i == initial else ""}>{html.escape(text)}</option>'
                      for i, text in enumerate(labels))
    return f'<label class="tfm-widget-control"><span>{label}</span> <select {data}>{options}</select></label>'


def _panel_html(index: int, panel: dict, initial_file: str, base: str) -> str:
    return (f'<figure class="tfm-widget-panel" data-panel="{index}"><img src="{html.escape(base + initial_file)}" '
            f'alt="{html.escape(panel["alt"])}"/><p class="tfm-widget-message" hidden></p></figure>')


def static_html(manifest: dict, base: str) -> str:
    """The widget on a page: controls, the initial figures and the states the page's script swaps in.

    Args:
        manifest: what `render` returned.
        base: the URL of the folder holding the figures, relative to the page, ending with "/".
    """
    controls = manifest["controls"]
    initial = [c["initial"] for c in controls]
    # render() refuses a panel that cannot draw the initial state, so these are all file names
    panels = "".join(
        _panel_html(p, panel, panel["states"][_state_key(tuple(initial[c] for c in panel["controls"]))], base)
        for p, panel in enumerate(manifest["panels"]))
    script_data = json.dumps({"initial": initial, "labels": [c["labels"] for c in controls],
                              "panels": [{"controls": p["controls"], "states": p["states"]} for p in manifest["panels"]]},
                             ensure_ascii=False).replace("</", "<\\/")  # nothing in the data may end the script
    note = " ".join(text for text in (manifest["note"], STATIC_HINT) if text)
    return (f'<div class="tfm-widget" data-base="{html.escape(base)}">'
            f'<p class="tfm-widget-title">{html.escape(manifest["title"])}</p>'
            f'<form class="tfm-widget-controls" autocomplete="off">'
            f'{"".join(_control_html(i, c) for i, c in enumerate(controls))}</form>'
            f'<div class="tfm-widget-panels">{panels}</div>'
            f'<p class="tfm-widget-note">{html.escape(note)}</p>'
            f'<script type="application/json" class="tfm-widget-states">{script_data}</script></div>')
