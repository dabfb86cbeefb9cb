"""Chapter 8 widget — step through greedy decoding one token at a time, with masks and attention.

At step t the decoder reads only its newest token (the KV cache holds the rest). The figure shows, up to
the chosen step: the causal mask, the masked self-attention rows, the cross-attention rows over the source
and the most likely next tokens. Plug in your own decoding rule with ``decoder_stepper(fn=my_pick)``:
``fn(logits) -> int`` takes one step's (V,) logits (None: argmax). On the book's pages,
`static_decoder_stepper`: every step of four dates.

Shapes: S source positions · T generated positions · H heads · V vocabulary.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import ipywidgets as widgets
import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from tfm_ref.masks import causal_mask
from tfm_ref.multihead import record_attention
from tfm_ref.transformer import Transformer
from .controls import live_widget
from .display import FIGURE_WIDTH, LiveWidget
from .static import Control, Panel, StaticRecipe, StaticWidget

__all__ = ["DecodeStep", "decode_steps", "stepper_figure", "decode_text", "decoder_stepper", "static_decoder_stepper"]

PickFn = Callable[[torch.Tensor], int]
TITLE = "Step-through decoder — greedy decoding with a KV cache, one token at a time"
# Dates the book's static stepper offers (the live one takes any).
# Dates in four of the task's formats: month names, a weekday, day first with slashes, year first.
DATE_PRESETS = ("Nov 22, 2026", "Thursday, March 5, 2031", "22/11/2026", "2031/03/05")


def _label(token: str) -> str:
    """A tick label the default font can draw: CJK characters become their code point (U+5E74)."""
    return "".join(c if ord(c) < 0x2E80 else f"U+{ord(c):04X}" for c in token) if token != " " else "␣"


@dataclass
class DecodeStep:
    """What one decoding step saw and produced (one sequence, batch row 0).

    Attributes:
        token: the id chosen at this step.  probs: (V,) next-token distribution.
        self_weights: (H, t + 1) the new token's masked self-attention over the prefix.
        cross_weights: (H, S) its cross-attention over the source.
    """

    token: int
    probs: torch.Tensor
    self_weights: torch.Tensor
    cross_weights: torch.Tensor


@torch.no_grad()
def decode_steps(model: Transformer, src: torch.Tensor, src_mask: torch.Tensor | None, *, bos_id: int, eos_id: int,
                 max_len: int, layer: int = -1, fn: PickFn | None = None) -> list[DecodeStep]:
    """Greedy (or ``fn``-chosen) decoding of one source (1, S) with the KV cache, recording attention.

    Args:
        layer: which decoder layer's attention maps to keep (−1: the last).
    Raises:
        ValueError: a batch of more than one sequence, or ``fn`` returning a token outside the vocabulary.
    """
    if src.shape[0] != 1:
        raise ValueError(f"decode one sequence at a time: src must be (1, S), got {tuple(src.shape)}")
    model.eval()
    layer_name = f"decoder.layers.{layer % len(model.decoder.layers)}"
    memory = model.encode(src, src_mask)  # (1, S, D)
    cache = model.new_cache()
    token, steps = bos_id, []
    for _ in range(max_len):
        with record_attention(model) as maps:
            logits = model.decode(torch.tensor([[token]], device=src.device), memory, src_mask, cache)  # (1, 1, V)
        logits = logits[0, -1]  # (V,)
        token = int(logits.argmax()) if fn is None else int(fn(logits))
        if not 0 <= token < logits.shape[-1]:
            raise ValueError(f"the decoding rule returned token {token}, outside the vocabulary of {logits.shape[-1]}")
        steps.append(DecodeStep(token, logits.softmax(-1).cpu(), maps[f"{layer_name}.self_attn"][0, :, -1].cpu(),
                                maps[f"{layer_name}.cross_attn"][0, :, -1].cpu()))  # (H, t + 1), (H, S)
        if token == eos_id:
            break
    return steps


def _rows(weights: list[torch.Tensor], head: int | None, width: int) -> np.ndarray:
    """Stack per-step rows (H, ≤ width) into a (steps, width) matrix, zero-padded; mean over heads if None."""
    matrix = np.zeros((len(weights), width))
    for i, w in enumerate(weights):
        row = (w.mean(0) if head is None else w[head])[:width]  # source padding beyond width is dropped
        matrix[i, : row.shape[-1]] = row.numpy()
    return matrix


def stepper_figure(steps: list[DecodeStep], step: int, src_tokens: list[str], tokens: list[str],
                   head: int | None = None, top_k: int = 5, fig: Figure | None = None) -> Figure:
    """The four panels up to ``step`` (0-based). ``tokens`` names every vocabulary id.

    Raises:
        ValueError: ``step`` outside the decoded steps, or ``head`` outside the heads.
    """
    if not 0 <= step < len(steps):
        raise ValueError(f"step must lie in 0 … {len(steps) - 1}, got {step}")
    n_heads = steps[0].self_weights.shape[0]
    if head is not None and not 0 <= head < n_heads:
        raise ValueError(f"head must lie in 0 … {n_heads - 1} (or None for the mean), got {head}")
    shown = steps[: step + 1]
    inputs = ["<bos>", *(_label(tokens[s.token]) for s in shown[:-1])]  # what the decoder read at each step
    fig = fig if fig is not None else Figure(figsize=(FIGURE_WIDTH, 9.0), layout="constrained")
    panels = fig.subplot_mosaic([["mask", "self"], ["cross", "cross"], ["top", "top"]], height_ratios=[1.1, 1, 0.6])
    mask_ax, self_ax, cross_ax, top_ax = (panels[name] for name in ("mask", "self", "cross", "top"))
    n = len(shown)
    mask = causal_mask(n).numpy()
    mask_ax.imshow(mask, cmap="Greys", vmin=0, vmax=1.6)
    mask_ax.add_patch(Rectangle((-0.5, n - 1.5), n, 1, fill=False, ec="tab:red", lw=1.5))  # this step's row
    mask_ax.set_title("(a) causal mask\n(True = may attend)", fontsize=10)
    which = "mean of heads" if head is None else f"head {head}"
    self_ax.imshow(_rows([s.self_weights for s in shown], head, n), cmap="Blues", vmin=0, vmax=1)
    self_ax.set_title(f"(b) masked self-attention,\n{which}", fontsize=10)
    for ax in (mask_ax, self_ax):
        ax.set_xticks(range(n), inputs, fontsize=9, rotation=90)
        ax.set_yticks(range(n), inputs, fontsize=9)
        ax.set_xlabel("key (decoder input)", fontsize=9)
    mask_ax.set_ylabel("query (decoder input)", fontsize=9)
    cross = _rows([s.cross_weights for s in shown], head, len(src_tokens))
    cross_ax.imshow(cross, cmap="Oranges", vmin=0, vmax=max(cross.max(), 1e-9), aspect="auto")
    cross_ax.set_xticks(range(len(src_tokens)), [_label(c) for c in src_tokens], fontsize=9,
                        rotation=90 if any(ord(c) >= 0x2E80 for c in src_tokens) else 0)
    cross_ax.set_yticks(range(n), [f"{inp}→{_label(tokens[s.token])}" for inp, s in zip(inputs, shown)], fontsize=9)
    cross_ax.set_xlabel("source character", fontsize=9)
    cross_ax.set_title(f"(c) cross-attention, {which}", fontsize=10)
    probs, ids = steps[step].probs.topk(min(top_k, steps[step].probs.shape[0]))
    top_ax.barh(range(len(ids))[::-1], probs.numpy(), color="tab:green")
    top_ax.set_yticks(range(len(ids))[::-1], [repr(_label(tokens[i])) for i in ids.tolist()], fontsize=9)
    top_ax.set_xlim(0, 1)
    top_ax.set_title(f"(d) step {step}: next-token probabilities", fontsize=10)
    return fig


def decode_text(model: Transformer, task, text: str, max_len: int, layer: int = -1,
                fn: PickFn | None = None) -> tuple[list[DecodeStep], list[str]]:
    """`decode_steps` of one typed text; also its characters as the model reads them (the source tokens)."""
    src, src_mask = task.encode_source([text])
    steps = decode_steps(model, src, src_mask, bos_id=task.vocab.bos_id, eos_id=task.vocab.eos_id, max_len=max_len,
                         layer=layer, fn=fn)
    return steps, list(text[: int(src_mask[0].sum())])


def decoder_stepper(fn: PickFn | None = None, *, model: Transformer | None = None, task=None,
                    text: str = DATE_PRESETS[0], max_len: int = 12) -> LiveWidget:
    """Type a date, then step through its translation; ``model``/``task`` default to the shipped date model.

    Args:
        fn: the decoding rule ``fn(logits) -> int``; None is greedy (argmax).
        model: an encoder-decoder `Transformer`; task: its task (``vocab``, ``encode_source``).
    """
    shipped = model is None or task is None  # only the shipped model can be loaded again for the book's static view
    if shipped:
        from tfm_lab.pretrained import load_date_model  # the trained checkpoint, loaded only when needed
        dates = load_date_model()
        model, task = dates.model, dates.task
    source = widgets.Text(value=text, description="date")
    step = widgets.IntSlider(value=max_len - 1, min=0, max=max_len - 1, description="step")
    head = widgets.Dropdown(options=[("mean", None), *((str(h), h) for h in range(model.config.n_heads))],
                            value=None, description="head")
    layer = widgets.Dropdown(options=list(range(model.config.n_decoder_layers)),
                             value=model.config.n_decoder_layers - 1, description="layer")

    def draw() -> Figure:
        steps, src_tokens = decode_text(model, task, source.value, max_len, layer.value, fn)
        step.max = len(steps) - 1  # the slider ends at the last step decoded (and its value follows)
        return stepper_figure(steps, step.value, src_tokens, task.vocab.tokens, head.value)

    return live_widget([[source, step], [layer, head]], draw, TITLE,
                       StaticRecipe.of(static_decoder_stepper, text=text, max_len=max_len)
                       if fn is None and shipped else None)


def static_decoder_stepper(text: str = DATE_PRESETS[0], max_len: int = 12) -> StaticWidget:
    """The stepper on the book's pages: every step of ``text`` and of the other `DATE_PRESETS`, last layer, mean of
    heads."""
    from tfm_lab.pretrained import load_date_model

    dates = load_date_model()
    texts = tuple(dict.fromkeys((text, *DATE_PRESETS)))
    decoded = {t: decode_text(dates.model, dates.task, t, max_len) for t in texts}
    n_steps = max(len(steps) for steps, _ in decoded.values())
    last_layer = dates.model.config.n_decoder_layers - 1

    def draw(text: str, step: int) -> Figure:
        steps, src_tokens = decoded[text]
        return stepper_figure(steps, step, src_tokens, dates.task.vocab.tokens)

    return StaticWidget(
        TITLE,
        controls=(Control("text", "date", texts, text),
                  Control("step", "step", tuple(range(n_steps)), len(decoded[text][0]) - 1),
                  Control("layer", "layer", (last_layer,), last_layer),
                  Control("head", "head", (None,), None, labels=("mean",))),
        panels=(Panel(draw, ("text", "step"), alt="the causal mask, self-attention and cross-attention rows up to "
                                                 "this step, and the next-token probabilities"),))
