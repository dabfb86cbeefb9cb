"""Chapter 4 widget — the alignment view: cross-attention of the trained date model.

Type a date ("Nov 22, 2026", "2026年11月22日", …); the model translates it greedily to ISO 8601, then one
teacher-forced pass over its own answer records every cross-attention map: row t shows which source
characters output character t looked at (n_tgt × n_src). Plug in your own attention with
``alignment_view(fn=my_attention)``: the model's attention layers then call ``fn(q, k, v, mask,
return_weights=..., dropout_p=..., is_causal=...)`` (the decoder's self-attention passes ``mask=None,
is_causal=True``); ``only="cross_attn"`` hands fn the cross-attention alone. Your own model (the capstone's)
goes in ``dates``, with your greedy decoding as ``decode``. On the book's pages, `static_alignment_view`.

Shapes: B batch · H heads · T target positions · S source positions.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import ipywidgets as widgets
import numpy as np
import torch
from matplotlib.figure import Figure
from torch import nn

from tfm_ref import attention
from tfm_ref.decoding import greedy_decode
from tfm_ref.multihead import MultiHeadAttention, record_attention
from tfm_lab.tasks import BOS_ID, EOS_ID
from .controls import live_widget
from .display import LiveWidget
from .static import Control, Panel, StaticRecipe, StaticWidget

__all__ = ["use_attention", "cross_attention_maps", "alignment_figure", "alignment_panel", "alignment_view",
           "static_alignment_view"]

_STUDENT = "student"
# Dates the book's static view offers: three formats of one day, and another day (the live view takes any).
DATE_PRESETS = ("Nov 22, 2026", "the 22nd of November, 2026", "22/11/2026", "Thursday, March 5, 2031")


@contextlib.contextmanager
def use_attention(model: nn.Module, fn: Callable | None, only: str | None = None) -> Iterator[None]:
    """Inside the block every attention layer of ``model`` calls ``fn`` (None: leave them as they are);
    with ``only``, just the layers whose module name ends with it ("cross_attn": the decoder's
    cross-attention), the others keep tfm_ref's attention."""
    if fn is None:
        yield
        return
    layers = [m for name, m in model.named_modules()
              if isinstance(m, MultiHeadAttention) and (only is None or name.endswith(only))]
    if only is not None and not layers:
        raise ValueError(f"no tfm_ref attention layer of the model is named ...{only} for fn to replace")
    before = [m.attn_impl for m in layers]
    attention.ATTENTION_IMPLEMENTATIONS[_STUDENT] = fn
    try:
        for m in layers:
            m.attn_impl = _STUDENT
        yield
    finally:
        for m, impl in zip(layers, before):
            m.attn_impl = impl
        del attention.ATTENTION_IMPLEMENTATIONS[_STUDENT]


def cross_attention_maps(model: nn.Module, task, text: str, fn: Callable | None = None,
                         decode: Callable | None = None, only: str | None = None,
                         ) -> tuple[list[str], list[str], dict[str, torch.Tensor]]:
    """Translate ``text`` and record the cross-attention of the answer.

    Args:
        model: an encoder-decoder whose attention layers are tfm_ref's `MultiHeadAttention`,
            called as ``model(src, tgt, src_mask)``.
        decode: the greedy decoding to translate with, ``decode(model, src, src_mask, *, bos_id,
            eos_id, max_len)``; None: tfm_ref's, which needs the model's KV cache (``new_cache``).
        only: the layers ``fn`` replaces (see `use_attention`); None: every attention layer.
    Returns:
        source characters (S), output characters (T, ending with <eos> when produced), and
        {module name: weights (H, T, S)} for every decoder layer's cross-attention.
    Raises:
        ValueError: the model has no tfm_ref cross-attention layer to record.
    """
    model.eval()
    device = next(model.parameters()).device
    src, src_mask = (t.to(device) for t in task.encode_source([text]))  # (1, S), (1, S)
    with torch.no_grad(), use_attention(model, fn, only):
        answer = (decode or greedy_decode)(model, src, src_mask, bos_id=BOS_ID, eos_id=EOS_ID,
                                           max_len=task.max_answer_len)  # (1, T)
        inp = torch.cat([torch.full_like(answer[:, :1], BOS_ID), answer[:, :-1]], dim=1)  # shifted right
        with record_attention(model) as maps:
            model(src, inp, src_mask)
    if not any(name.endswith("cross_attn") for name in maps):
        raise ValueError("no cross-attention recorded: the view reads the maps of tfm_ref.MultiHeadAttention layers "
                         "named ...cross_attn (as in tfm_ref.DecoderBlock)")
    n_src = int(src_mask.sum())
    tokens = task.vocab.tokens
    source = [tokens[i] for i in src[0, :n_src].tolist()]
    output = [tokens[i] for i in answer[0].tolist()]
    cross = {name: w[0, :, :, :n_src].cpu() for name, w in maps.items() if name.endswith("cross_attn")}  # (H, T, S)
    return source, output, cross


def _figure_width(n_source: int) -> float:
    """Inches that fit ``n_source`` source characters on the x axis."""
    return max(4.5, 0.18 * n_source + 1.6)


def alignment_figure(source: list[str], output: list[str], weights: torch.Tensor, title: str,
                     width: float | None = None) -> Figure:
    """Heatmap of (T, S) weights with the characters on the axes; ``width`` in inches, by default
    `_figure_width` of the source."""
    fig = Figure(figsize=(width or _figure_width(len(source)), 0.26 * len(output) + 2.0), layout="constrained")
    ax = fig.subplots()
    ax.imshow(weights.numpy(), cmap="Blues", vmin=0, vmax=max(float(weights.max()), 1e-6), aspect="auto")
    ax.set_xticks(np.arange(len(source)), [repr(c)[1:-1] if c != " " else "␣" for c in source], fontsize=9)
    ax.set_yticks(np.arange(len(output)), output, fontsize=9)
    ax.set_xlabel("source character (keys, from the encoder)")
    ax.set_ylabel("output character (queries)")
    ax.set_title(title, fontsize=10)
    return fig


def alignment_panel(source: list[str], answer: list[str], cross: dict[str, torch.Tensor], text: str, layer: str,
                    head: int | str, width: float | None = None) -> Figure:
    """`alignment_figure` of one layer's cross-attention, one head or (``head="mean"``) their mean."""
    maps = cross[layer]  # (H, T, S)
    weights = maps.mean(0) if head == "mean" else maps[head]  # (T, S)
    title = f"{text!r} → {''.join(c for c in answer if len(c) == 1)!r}\n{layer}, head {head}"
    return alignment_figure(source, answer, weights, title, width)


def alignment_view(fn: Callable | None = None, dates=None, decode: Callable | None = None,
                   only: str | None = None) -> LiveWidget:
    """The alignment view (chapter 4; your own model's, chapter 10).

    Args:
        fn: your attention function, or None for tfm_ref's.
        dates: a `tfm_lab.pretrained.PretrainedDateModel` (anything with ``.model`` and ``.task``);
            None loads the course's trained date model.
        decode: your greedy decoding (see `cross_attention_maps`), for a model without a KV cache.
        only: the attention layers ``fn`` replaces, by the end of their module name ("cross_attn":
            the decoder's cross-attention alone); None: every attention layer.
    """
    shipped = dates is None  # only the shipped model can be loaded again for the book's static view
    if shipped:
        from tfm_lab.pretrained import load_date_model  # the checkpoint ships with the package

        dates = load_date_model()
    model, task = dates.model, dates.task
    text = widgets.Text(value=DATE_PRESETS[0], description="date")
    layer = widgets.Dropdown(description="layer")
    head = widgets.Dropdown(description="head")
    def draw() -> Figure:
        source, answer, cross = cross_attention_maps(model, task, text.value, fn, decode, only)
        names = sorted(cross)
        if list(layer.options) != names:
            layer.options, layer.value = names, names[-1]
        n_heads = cross[names[0]].shape[0]
        head_options = ["mean", *range(n_heads)]
        if list(head.options) != head_options:
            head.options, head.value = head_options, "mean"
        return alignment_panel(source, answer, cross, text.value, layer.value, head.value)

    # draw() refills the dropdowns; live_widget keeps that from starting another draw
    return live_widget([[text], [layer, head]], draw, "Alignment view — cross-attention of the trained date model",
                       StaticRecipe.of(static_alignment_view) if fn is None and shipped else None)


def static_alignment_view() -> StaticWidget:
    """The view on the book's pages: the shipped date model on a few dates, every layer and head."""
    from tfm_lab.pretrained import load_date_model

    dates = load_date_model()
    maps = {text: cross_attention_maps(dates.model, dates.task, text) for text in DATE_PRESETS}
    layers = tuple(sorted(maps[DATE_PRESETS[0]][2]))
    n_heads = maps[DATE_PRESETS[0]][2][layers[0]].shape[0]
    # one width for every date: a figure that changes width as the reader picks another date jumps
    width = _figure_width(max(len(source) for source, _, _ in maps.values()))
    return StaticWidget(
        "Alignment view — cross-attention of the trained date model",
        controls=(Control("text", "date", DATE_PRESETS, DATE_PRESETS[0]),
                  Control("layer", "layer", layers, layers[-1]),
                  Control("head", "head", ("mean", *range(n_heads)), "mean")),
        panels=(Panel(lambda text, layer, head: alignment_panel(*maps[text], text, layer, head, width),
                      ("text", "layer", "head"),
                      alt="cross-attention weights: output characters (rows) against source characters (columns)"),))
