"""Chapter 8 widget — step through greedy decoding one token at a time, with masks and attention.

At step t the decoder reads only its newest token (the key/value cache holds the earlier
ones) and produces a distribution over the next token. The figure shows, up to the chosen
step: (a) the causal mask of the prefix, (b) the masked self-attention rows, (c) the
cross-attention rows over the source characters, (d) the most likely next tokens.

Plug in your own decoding rule with ``decoder_stepper(fn=my_pick)``: ``fn(logits) -> int``
takes the (V,) logits of one step and returns the next token id (None: argmax, i.e. greedy).

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

from ..masks import causal_mask
from ..multihead import record_attention
from ..transformer import Transformer
from .controls import live_widget
from .display import LiveWidget

__all__ = ["DecodeStep", "decode_steps", "stepper_figure", "decoder_stepper"]

PickFn = Callable[[torch.Tensor], int]


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
    fig = fig if fig is not None else Figure(figsize=(10, 7.5), layout="constrained")
    (mask_ax, self_ax), (cross_ax, top_ax) = fig.subplots(2, 2, gridspec_kw={"width_ratios": [1.6, 1]})
    n = len(shown)
    mask = causal_mask(n).numpy()
    mask_ax.imshow(mask, cmap="Greys", vmin=0, vmax=1.6)
    mask_ax.add_patch(Rectangle((-0.5, n - 1.5), n, 1, fill=False, ec="tab:red", lw=1.5))  # this step's row
    mask_ax.set_title("(a) causal mask (True = may attend)", fontsize=9)
    which = "mean of heads" if head is None else f"head {head}"
    self_ax.imshow(_rows([s.self_weights for s in shown], head, n), cmap="Blues", vmin=0, vmax=1)
    self_ax.set_title(f"(b) masked self-attention, {which}", fontsize=9)
    for ax in (mask_ax, self_ax):
        ax.set_xticks(range(n), inputs, fontsize=7, rotation=90)
        ax.set_yticks(range(n), inputs, fontsize=7)
        ax.set_xlabel("key (decoder input)", fontsize=8)
    mask_ax.set_ylabel("query (decoder input)", fontsize=8)
    cross = _rows([s.cross_weights for s in shown], head, len(src_tokens))
    cross_ax.imshow(cross, cmap="Oranges", vmin=0, vmax=max(cross.max(), 1e-9), aspect="auto")
    cross_ax.set_xticks(range(len(src_tokens)), [_label(c) for c in src_tokens], fontsize=7,
                        rotation=90 if any(ord(c) >= 0x2E80 for c in src_tokens) else 0)
    cross_ax.set_yticks(range(n), [f"{inp}→{_label(tokens[s.token])}" for inp, s in zip(inputs, shown)], fontsize=7)
    cross_ax.set_xlabel("source character", fontsize=8)
    cross_ax.set_title(f"(c) cross-attention, {which}", fontsize=9)
    probs, ids = steps[step].probs.topk(min(top_k, steps[step].probs.shape[0]))
    top_ax.barh(range(len(ids))[::-1], probs.numpy(), color="tab:green")
    top_ax.set_yticks(range(len(ids))[::-1], [repr(_label(tokens[i])) for i in ids.tolist()], fontsize=8)
    top_ax.set_xlim(0, 1)
    top_ax.set_title(f"(d) step {step}: next-token probabilities", fontsize=9)
    return fig


def decoder_stepper(fn: PickFn | None = None, *, model: Transformer | None = None, task=None,
                    text: str = "Nov 22, 2026", max_len: int = 12) -> LiveWidget:
    """Type a date, then step through its translation; ``model``/``task`` default to the shipped date model.

    Args:
        fn: the decoding rule ``fn(logits) -> int``; None is greedy (argmax).
        model: an encoder-decoder `Transformer`; task: its task (``vocab``, ``encode_source``).
    """
    if model is None or task is None:
        from ..pretrained import load_date_model  # the trained checkpoint, loaded only when needed
        dates = load_date_model()
        model, task = dates.model, dates.task
    source = widgets.Text(value=text, description="date")
    step = widgets.IntSlider(value=max_len, min=0, max=max_len, description="step")
    head = widgets.Dropdown(options=[("mean", None), *((str(h), h) for h in range(model.config.n_heads))],
                            value=None, description="head")
    layer = widgets.Dropdown(options=list(range(model.config.n_decoder_layers)),
                             value=model.config.n_decoder_layers - 1, description="layer")

    def draw() -> Figure:
        src, src_mask = task.encode_source([source.value])
        steps = decode_steps(model, src, src_mask, bos_id=task.vocab.bos_id, eos_id=task.vocab.eos_id,
                             max_len=max_len, layer=layer.value, fn=fn)
        length = int(src_mask[0].sum())
        return stepper_figure(steps, min(step.value, len(steps) - 1), list(source.value[:length]),
                              task.vocab.tokens, head.value)

    return live_widget([[source, step], [layer, head]], draw, f"Step-through decoder — translating {text!r}")
