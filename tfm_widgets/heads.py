"""Chapter 2 widget — heads and key/value groups.

Top: the attention map of every query head of a small random `MultiHeadAttention`, with the
heads that share a key/value head framed in the same colour (MHA: G = H, GQA: 1 < G < H,
MQA: G = 1). Bottom: the KV-cache memory of a real model's shape against the sequence length,
for MHA, GQA and MQA. Plug in your own cache formula with ``heads_explorer(fn=my_kv_cache_bytes)``
(signature of `tfm_ref.kv_cache_bytes`). On the book's pages, `static_heads_explorer` is the widget.

Shapes: B batch · T positions · H query heads · G key/value heads · Dh head width.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import ipywidgets as widgets
import numpy as np
import torch
from matplotlib.figure import Figure

from tfm_ref.kv_cache import kv_cache_bytes
from tfm_ref.multihead import MultiHeadAttention, record_attention
from .controls import live_widget
from .display import FIGURE_WIDTH, LiveWidget
from .static import Control, Panel, StaticRecipe, StaticWidget

__all__ = ["ModelShape", "MODEL_SHAPES", "head_maps", "kv_cache_table", "heads_figure", "heads_panel",
           "kv_cache_figure", "heads_explorer", "static_heads_explorer"]

GIB = 2**30


@dataclass(frozen=True)
class ModelShape:
    """The shape numbers that decide the KV cache of a decoder (from each model's paper/config)."""

    name: str
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int


MODEL_SHAPES = {
    shape.name: shape
    for shape in (
        ModelShape("Transformer base (2017), decoder self-attention", 6, 8, 8, 64),
        ModelShape("Llama-2-7B", 32, 32, 32, 128),
        ModelShape("Llama-2-13B", 40, 40, 40, 128),
        ModelShape("Llama-2-70B", 80, 64, 8, 128),
        ModelShape("Llama-3-8B", 32, 32, 8, 128),
    )
}


def head_maps(n_heads: int, n_kv_heads: int, seq_len: int = 6, d_model: int = 32, seed: int = 0) -> torch.Tensor:
    """Attention weights (H, T, T) of a random self-attention layer on random tokens."""
    torch.manual_seed(seed)
    layer = MultiHeadAttention(d_model, n_heads, n_kv_heads, attn_impl="eager").eval()
    x = torch.randn(1, seq_len, d_model) * 2  # (B, T, D); a larger spread gives sharper maps
    with torch.no_grad(), record_attention(layer) as maps:
        layer(x)
    return maps[""][0]  # (H, T, T)


def kv_cache_table(shape: ModelShape, seq_lens: list[int], batch: int = 1, bytes_per_elem: int = 2,
                   fn: Callable[..., int] | None = None) -> dict[str, list[int]]:
    """Cache bytes at each length for MHA (G = H), the model's own G (as it was built), and MQA (G = 1), largest
    first.

    A model that is itself MHA or MQA gets one entry for both names ("MHA = the model's own (G = 32)"),
    so that no line of the plot hides another.
    """
    fn = fn or kv_cache_bytes
    names: dict[int, list[str]] = {}
    for name, g in (("MHA", shape.n_heads), ("the model's own", shape.n_kv_heads), ("MQA", 1)):
        names.setdefault(g, []).append(name)
    return {f"{' = '.join(group)} (G = {g})": [fn(shape.n_layers, g, shape.head_dim, n, batch, bytes_per_elem)
                                               for n in seq_lens]
            for g, group in names.items()}


def heads_figure(maps: torch.Tensor, n_kv_heads: int, fig: Figure | None = None) -> Figure:
    """One small map per query head; heads sharing a KV head get the same frame colour."""
    n_heads = maps.shape[0]
    columns = min(n_heads, 4)
    rows = -(-n_heads // columns)
    fig = fig if fig is not None else Figure(figsize=(FIGURE_WIDTH, 1.9 * rows + 0.5), layout="constrained")
    axes = np.atleast_1d(fig.subplots(rows, columns)).flatten()
    colours = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:gray"]
    group_size = n_heads // n_kv_heads
    for head, ax in enumerate(axes[:n_heads]):
        ax.imshow(maps[head].numpy(), cmap="viridis", vmin=0, vmax=1)
        ax.set_title(f"head {head} → kv {head // group_size}", fontsize=10)
        ax.set_xticks([])
        ax.set_yticks([])
        for spine in ax.spines.values():
            spine.set_edgecolor(colours[(head // group_size) % len(colours)])
            spine.set_linewidth(3)
    return fig


def heads_panel(n_heads: int, n_kv_heads: int, fig: Figure | None = None) -> Figure:
    """`heads_figure` of a random layer with H query and G key/value heads, titled.

    Raises:
        ValueError: G does not divide H.
    """
    if n_heads % n_kv_heads:
        raise ValueError(f"G = {n_kv_heads} must divide H = {n_heads}")
    fig = heads_figure(head_maps(n_heads, n_kv_heads), n_kv_heads, fig)
    # "small random layer": the H and G above are this layer's, not the KV chart's real model's
    fig.suptitle(f"each query head's attention map, in a small random layer (H = {n_heads}, G = {n_kv_heads})",
                 fontsize=10)
    return fig


def kv_cache_figure(shape: ModelShape, max_len: int = 32768, batch: int = 1, fn: Callable[..., int] | None = None,
                    fig: Figure | None = None) -> Figure:
    """KV-cache GiB (fp16) against sequence length for MHA, the model's GQA setting, and MQA."""
    fig = fig if fig is not None else Figure(figsize=(FIGURE_WIDTH, 3.4), layout="constrained")
    ax = fig.subplots()
    seq_lens = np.linspace(0, max_len, 65).astype(int).tolist()
    for name, values in kv_cache_table(shape, seq_lens, batch, fn=fn).items():
        ax.plot(seq_lens, np.array(values) / GIB, label=name)
    ax.set_xlabel("sequence length (tokens)")
    ax.set_ylabel("KV cache (GiB, fp16)")
    ax.set_title(f"{shape.name}:\n{shape.n_layers} layers, H = {shape.n_heads}, Dh = {shape.head_dim}, batch {batch}",
                 fontsize=10)
    ax.legend(fontsize=9)
    ax.grid(alpha=0.3)
    return fig


def heads_explorer(fn: Callable[..., int] | None = None) -> LiveWidget:
    """Per-head maps and KV-cache memory (chapter 2). ``fn`` is your ``kv_cache_bytes``, or None."""
    n_heads = widgets.Dropdown(options=[1, 2, 4, 8], value=8, description="H (query heads)")
    n_kv_heads = widgets.Dropdown(options=[1, 2, 4, 8], value=2, description="G (KV heads)")
    model = widgets.Dropdown(options=list(MODEL_SHAPES), value="Llama-2-70B", description="model")
    max_len = widgets.IntSlider(value=32768, min=1024, max=131072, step=1024, description="max length")
    batch = widgets.IntSlider(value=1, min=1, max=64, description="batch")

    def draw() -> Figure:
        fig = Figure(figsize=(FIGURE_WIDTH, 8.4), layout="constrained")
        top, bottom = fig.subfigures(2, 1, height_ratios=[1.25, 1])
        heads_panel(n_heads.value, n_kv_heads.value, top)
        kv_cache_figure(MODEL_SHAPES[model.value], max_len.value, batch.value, fn, bottom)
        return fig

    return live_widget([[n_heads, n_kv_heads], [model, max_len, batch]], draw, "Heads & KV-groups explorer",
                       StaticRecipe.of(static_heads_explorer) if fn is None else None)


def static_heads_explorer() -> StaticWidget:
    """The explorer on the book's pages: every H and G, each model at three lengths and three batch sizes."""
    heads = (1, 2, 4, 8)
    return StaticWidget(
        "Heads & KV-groups explorer",
        controls=(Control("n_heads", "H (query heads)", heads, 8), Control("n_kv_heads", "G (KV heads)", heads, 2),
                  Control("model", "model", tuple(MODEL_SHAPES), "Llama-2-70B"),
                  Control("max_len", "max length", (8192, 32768, 131072), 32768),
                  Control("batch", "batch", (1, 8, 64), 1)),
        panels=(Panel(heads_panel, ("n_heads", "n_kv_heads"),
                      alt="the attention map of every query head, framed by the key/value head it shares"),
                Panel(lambda model, max_len, batch: kv_cache_figure(MODEL_SHAPES[model], max_len, batch),
                      ("model", "max_len", "batch"), alt="KV-cache GiB against sequence length for MHA, GQA and MQA")))
