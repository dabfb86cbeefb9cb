"""Chapter 2 widget — heads and key/value groups.

Top: the attention map of every query head of a small random `MultiHeadAttention`, with the
heads that share a key/value head framed in the same colour (MHA: G = H, GQA: 1 < G < H,
MQA: G = 1). Bottom: the KV-cache memory of a real model's shape against the sequence length,
for MHA, GQA and MQA. Plug in your own cache formula with ``heads_explorer(fn=my_kv_cache_bytes)``
(signature of `tfm_ref.kv_cache_bytes`).

Shapes: B batch · T positions · H query heads · G key/value heads · Dh head width.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import ipywidgets as widgets
import numpy as np
import torch
from matplotlib.figure import Figure

from ..kv_cache import kv_cache_bytes
from ..multihead import MultiHeadAttention, record_attention
from .controls import live_widget
from .display import LiveWidget

__all__ = ["ModelShape", "MODEL_SHAPES", "head_maps", "kv_cache_table", "heads_figure", "kv_cache_figure",
           "heads_explorer"]

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
    """Cache bytes at each length for MHA (G = H), the model's own G, and MQA (G = 1)."""
    fn = fn or kv_cache_bytes
    variants = {"MHA": shape.n_heads, f"model (G = {shape.n_kv_heads})": shape.n_kv_heads, "MQA": 1}
    return {name: [fn(shape.n_layers, g, shape.head_dim, n, batch, bytes_per_elem) for n in seq_lens]
            for name, g in variants.items()}


def heads_figure(maps: torch.Tensor, n_kv_heads: int, fig: Figure | None = None) -> Figure:
    """One small map per query head; heads sharing a KV head get the same frame colour."""
    n_heads = maps.shape[0]
    fig = fig if fig is not None else Figure(figsize=(12, 2))
    axes = np.atleast_1d(fig.subplots(1, n_heads))
    colours = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:gray"]
    group_size = n_heads // n_kv_heads
    for head, ax in enumerate(axes):
        ax.imshow(maps[head].numpy(), cmap="viridis", vmin=0, vmax=1)
        ax.set_title(f"head {head} → kv {head // group_size}", fontsize=8)
        ax.set_xticks([])
        ax.set_yticks([])
        for spine in ax.spines.values():
            spine.set_edgecolor(colours[(head // group_size) % len(colours)])
            spine.set_linewidth(3)
    return fig


def kv_cache_figure(shape: ModelShape, max_len: int = 32768, batch: int = 1, fn: Callable[..., int] | None = None,
                    fig: Figure | None = None) -> Figure:
    """KV-cache GiB (fp16) against sequence length for MHA, the model's GQA setting, and MQA."""
    fig = fig if fig is not None else Figure(figsize=(7, 3))
    ax = fig.subplots()
    seq_lens = np.linspace(0, max_len, 65).astype(int).tolist()
    for name, values in kv_cache_table(shape, seq_lens, batch, fn=fn).items():
        ax.plot(seq_lens, np.array(values) / GIB, label=name)
    ax.set_xlabel("sequence length (tokens)")
    ax.set_ylabel("KV cache (GiB, fp16)")
    ax.set_title(f"{shape.name}: {shape.n_layers} layers, H = {shape.n_heads}, Dh = {shape.head_dim}, batch {batch}",
                 fontsize=9)
    ax.legend(fontsize=8)
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
        if n_heads.value % n_kv_heads.value:
            raise ValueError(f"G = {n_kv_heads.value} must divide H = {n_heads.value}")
        fig = Figure(figsize=(12, 5.2))
        top, bottom = fig.subfigures(2, 1, height_ratios=[1, 1.6])
        heads_figure(head_maps(n_heads.value, n_kv_heads.value), n_kv_heads.value, top)
        top.suptitle(f"attention map of each query head (H = {n_heads.value}, G = {n_kv_heads.value})", fontsize=10)
        kv_cache_figure(MODEL_SHAPES[model.value], max_len.value, batch.value, fn, bottom)
        return fig

    return live_widget([[n_heads, n_kv_heads], [model, max_len, batch]], draw, "Heads & KV-groups explorer")
