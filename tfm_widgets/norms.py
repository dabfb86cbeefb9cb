"""Chapter 7 widgets — which elements a normalisation pools, and Post- vs Pre-Norm in a deep stack.

`norm_axes_explorer` colours the cells of a (B, T, D) tensor that one BatchNorm, LayerNorm or RMSNorm
statistic pools, and shows that a normalisation (yours, with ``fn=``) leaves each group with mean 0 (not
RMSNorm) and root-mean-square 1. `depth_explorer` plots the gradient norm reaching each layer of a deep
stack at initialisation, Post-Norm against Pre-Norm from the same seed; the chapter's training experiment
uses its `DeepStack` and `train_deep_stack`. On the book's pages, `static_norm_axes_explorer` and
`static_depth_explorer`.

Shapes: B batch · T positions · D model width · V vocabulary · L layers.
"""
from __future__ import annotations

from collections.abc import Callable

import ipywidgets as widgets
import numpy as np
import torch
import torch.nn.functional as F
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from torch import nn
from tqdm.auto import tqdm

from tfm_ref.blocks import EncoderBlock
from tfm_ref.norms import LayerNorm, layer_norm, rms_norm
from tfm_ref.positional import sinusoidal_positional_encoding
from .controls import live_widget
from .display import FIGURE_WIDTH, LiveWidget
from .static import Control, Panel, StaticRecipe, StaticWidget

__all__ = [
    "NORM_KINDS", "norm_groups", "reference_norm", "group_statistics", "groups_figure", "statistics_figure",
    "axes_figure", "norm_axes_explorer", "static_norm_axes_explorer", "DeepStack", "reverse_batch",
    "gradient_norms_by_depth", "train_deep_stack", "depth_figure", "depth_panel", "depth_explorer",
    "static_depth_explorer",
]

# The axes of a (B, T, D) tensor that one statistic (mean, variance) is taken over.
NORM_KINDS: dict[str, tuple[int, ...]] = {"BatchNorm": (0, 1), "LayerNorm": (2,), "RMSNorm": (2,)}
AXES_SHAPE = (3, 4, 6)  # (B, T, D) of the axis picker's tensor
DEPTH_TITLE = "Gradient norm by depth — Post-Norm vs Pre-Norm at initialisation"

NormFn = Callable[[torch.Tensor], torch.Tensor]
BlockFn = Callable[[int, int, int, bool], nn.Module]


def _check_kind(kind: str) -> tuple[int, ...]:
    if kind not in NORM_KINDS:
        raise ValueError(f"kind must be one of {list(NORM_KINDS)}, got {kind!r}")
    return NORM_KINDS[kind]


def norm_groups(kind: str, shape: tuple[int, int, int]) -> np.ndarray:
    """An integer array of ``shape`` (B, T, D): cells with the same number share one statistic."""
    axes = _check_kind(kind)
    index = np.indices(shape)  # (3, B, T, D): the b, t and d of every cell
    kept = [index[a] for a in range(3) if a not in axes]  # the axes that are NOT pooled name the group
    group = np.zeros(shape, dtype=np.int64)
    for axis_index, size in zip(kept, [shape[a] for a in range(3) if a not in axes]):
        group = group * size + axis_index
    return group


def reference_norm(kind: str) -> NormFn:
    """tfm_ref's normalisation of ``kind`` without γ, β: x (B, T, D) → same shape."""
    _check_kind(kind)
    if kind == "LayerNorm":
        return lambda x: layer_norm(x, None, None)
    if kind == "RMSNorm":
        return lambda x: rms_norm(x, None)
    # Training-mode BatchNorm1d: statistics per feature over batch and positions.
    return lambda x: F.batch_norm(x.transpose(1, 2), None, None, training=True).transpose(1, 2)  # (B, D, T) ↔ (B, T, D)


def group_statistics(kind: str, y: torch.Tensor) -> dict[str, np.ndarray]:
    """Mean and root-mean-square of ``y`` (B, T, D) over each group of ``kind``."""
    axes = _check_kind(kind)
    y = y.double()
    return {"mean": y.mean(dim=axes).flatten().numpy(), "rms": y.pow(2).mean(dim=axes).sqrt().flatten().numpy()}


def groups_figure(kind: str, shape: tuple[int, int, int], cell: tuple[int, int, int],
                  fig: Figure | None = None) -> Figure:
    """The B grids of a (B, T, D) tensor with the cells that share ``cell``'s statistic highlighted.

    Raises:
        ValueError: an unknown kind or a cell outside the tensor.
    """
    groups = norm_groups(kind, shape)
    if any(not 0 <= c < s for c, s in zip(cell, shape)):
        raise ValueError(f"cell {cell} is outside the tensor of shape {shape}")
    fig = fig if fig is not None else Figure(figsize=(FIGURE_WIDTH, 2.5), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, shape[0]))
    colours = ListedColormap(["#e8e8e8", "tab:orange"])
    for b, ax in enumerate(axes):
        ax.imshow(groups[b] == groups[cell], cmap=colours, vmin=0, vmax=1)
        ax.set_xticks(range(shape[2]))
        ax.set_yticks(range(shape[1]))
        ax.set_xticks(np.arange(-0.5, shape[2]), minor=True)
        ax.set_yticks(np.arange(-0.5, shape[1]), minor=True)
        ax.grid(which="minor", color="white", lw=1.5)
        ax.tick_params(labelsize=9, which="both", length=0)
        ax.set_title(f"sequence b = {b}", fontsize=10)
        ax.set_xlabel("feature d")
    axes[0].set_ylabel("position t")
    pooled = " and ".join("BTD"[a] for a in NORM_KINDS[kind])
    along = " or ".join("btd"[a] for a in NORM_KINDS[kind])  # the controls that move the cell within its group
    fig.suptitle(f"one statistic over axis {pooled}: the orange cells share it\n"
                 f"(choosing another {along} stays in the same group)", fontsize=10)
    return fig


def statistics_figure(kind: str, shape: tuple[int, int, int] = AXES_SHAPE, fn: NormFn | None = None, seed: int = 0,
                      fig: Figure | None = None) -> Figure:
    """Mean and RMS of every group of ``kind`` after normalising a random (B, T, D) tensor (with ``fn`` if given).

    Raises:
        ValueError: an unknown kind, or ``fn`` changing the shape.
    """
    x = torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * 3 + 1
    y = (fn or reference_norm(kind))(x.clone())
    if tuple(y.shape) != shape:
        raise ValueError(f"the normalisation must keep the shape {shape}, got {tuple(y.shape)}")
    stats = group_statistics(kind, y)
    fig = fig if fig is not None else Figure(figsize=(FIGURE_WIDTH, 2.8), layout="constrained")
    ax = fig.subplots()
    ax.plot(stats["mean"], "o", label="mean of group")
    ax.plot(stats["rms"], "s", label="RMS of group")
    ax.axhline(0, color="grey", lw=0.5)
    ax.axhline(1, color="grey", lw=0.5, ls="--")
    ax.set_xlabel(f"group ({len(stats['mean'])} groups)")
    ax.set_title(f"{kind}: every group after normalising" + (" (your fn)" if fn else ""), fontsize=10)
    ax.legend(fontsize=9)
    return fig


def axes_figure(kind: str, shape: tuple[int, int, int] = AXES_SHAPE, cell: tuple[int, int, int] = (0, 1, 2),
                fn: NormFn | None = None, seed: int = 0, fig: Figure | None = None) -> Figure:
    """(top) `groups_figure` for ``cell``; (bottom) `statistics_figure` of the normalised groups.

    Raises:
        ValueError: an unknown kind, a cell outside the tensor, or ``fn`` changing the shape.
    """
    fig = fig if fig is not None else Figure(figsize=(FIGURE_WIDTH, 5.6), layout="constrained")
    grid_figure, stats_figure = fig.subfigures(2, 1, height_ratios=[1, 1.1])
    groups_figure(kind, shape, cell, grid_figure)
    statistics_figure(kind, shape, fn, seed, stats_figure)
    return fig


def norm_axes_explorer(fn: NormFn | None = None) -> LiveWidget:
    """Pick the kind and a cell; see what it is normalised with, and the statistics after."""
    kind = widgets.Dropdown(options=list(NORM_KINDS), value="LayerNorm", description="norm")
    b = widgets.IntSlider(value=0, min=0, max=AXES_SHAPE[0] - 1, description="b")
    t = widgets.IntSlider(value=1, min=0, max=AXES_SHAPE[1] - 1, description="t")
    d = widgets.IntSlider(value=2, min=0, max=AXES_SHAPE[2] - 1, description="d")

    def draw() -> Figure:
        return axes_figure(kind.value, AXES_SHAPE, cell=(b.value, t.value, d.value), fn=fn)

    return live_widget([[kind], [b, t, d]], draw, "Normalisation axes — which elements share a mean and variance",
                       StaticRecipe.of(static_norm_axes_explorer) if fn is None else None)


def static_norm_axes_explorer() -> StaticWidget:
    """The axis picker on the book's pages: every kind and cell; each highlighted group is drawn once."""
    def pooled_with(kind: str, b: int, t: int, d: int) -> tuple:
        """Cells in one group draw the same grids: the key is the pooled axes and the cell's other coordinates."""
        axes = NORM_KINDS[kind]
        return axes, tuple(c for axis, c in enumerate((b, t, d)) if axis not in axes)

    return StaticWidget(
        "Normalisation axes — which elements share a mean and variance",
        controls=(Control("kind", "norm", tuple(NORM_KINDS), "LayerNorm"),
                  *(Control(name, name, tuple(range(size)), initial)
                    for name, size, initial in zip("btd", AXES_SHAPE, (0, 1, 2)))),
        panels=(Panel(lambda kind, b, t, d: groups_figure(kind, AXES_SHAPE, (b, t, d)), ("kind", "b", "t", "d"),
                      key=pooled_with, alt="the batch as grids of positions × features, the pooled cells in orange"),
                Panel(lambda kind: statistics_figure(kind, AXES_SHAPE), ("kind",),
                      alt="mean and RMS of every group after normalising")))


class DeepStack(nn.Module):
    """Embedding + sinusoidal PE → L blocks → (final norm for Pre-Norm) → vocabulary logits.

    Args:
        block_fn: ``block_fn(d_model, n_heads, d_ff, norm_first)`` → a (B, T, D) → (B, T, D)
            module; None builds `tfm_ref.EncoderBlock` without dropout.
    """

    def __init__(self, n_layers: int, d_model: int, norm_first: bool, vocab_size: int = 16, max_len: int = 64,
                 n_heads: int = 4, block_fn: BlockFn | None = None) -> None:
        super().__init__()
        block_fn = block_fn or (lambda d, h, f, first: EncoderBlock(d, h, f, dropout=0.0, norm_first=first))
        self.embed = nn.Embedding(vocab_size, d_model)
        self.register_buffer("pe", sinusoidal_positional_encoding(max_len, d_model), persistent=False)
        self.layers = nn.ModuleList(block_fn(d_model, n_heads, 4 * d_model, norm_first) for _ in range(n_layers))
        # Pre-Norm leaves the residual stream un-normalised, so the stack ends with one norm.
        self.final_norm = LayerNorm(d_model) if norm_first else nn.Identity()
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, ids: torch.Tensor, layer_inputs: list[torch.Tensor] | None = None) -> torch.Tensor:
        """ids (B, T) → logits (B, T, V); ``layer_inputs`` collects each layer's input, for gradients."""
        x = self.embed(ids) + self.pe[: ids.shape[1]]  # (B, T, D)
        for layer in self.layers:
            if layer_inputs is not None:
                x.retain_grad()
                layer_inputs.append(x)
            x = layer(x)
        return self.head(self.final_norm(x))


def reverse_batch(generator: torch.Generator, batch: int = 32, length: int = 8,
                  vocab_size: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch of the synthetic task: read T random tokens, output them reversed. (ids, targets) (B, T)."""
    ids = torch.randint(0, vocab_size, (batch, length), generator=generator)
    return ids, ids.flip(1)


def gradient_norms_by_depth(n_layers: int = 24, d_model: int = 64, norm_first: bool = False, seed: int = 0,
                            block_fn: BlockFn | None = None) -> np.ndarray:
    """‖∂loss/∂x_l‖ for the input x_l of every layer l, at initialisation, on one reverse batch."""
    torch.manual_seed(seed)  # the same initial weights for Post- and Pre-Norm
    model = DeepStack(n_layers, d_model, norm_first, block_fn=block_fn)
    ids, targets = reverse_batch(torch.Generator().manual_seed(seed + 1))
    layer_inputs: list[torch.Tensor] = []
    logits = model(ids, layer_inputs)
    F.cross_entropy(logits.flatten(0, 1), targets.flatten()).backward()
    return np.array([x.grad.norm().item() for x in layer_inputs])


def train_deep_stack(n_layers: int = 24, d_model: int = 64, norm_first: bool = False, steps: int = 150,
                     lr: float = 1e-3, seed: int = 0, progress: bool = True) -> list[float]:
    """Train `DeepStack` on the reverse task with Adam at a constant ``lr`` (no warmup); the losses."""
    torch.manual_seed(seed)
    model = DeepStack(n_layers, d_model, norm_first)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    generator = torch.Generator().manual_seed(seed + 2)
    losses = []
    label = "Pre-Norm" if norm_first else "Post-Norm"
    for _ in tqdm(range(steps), desc=f"{label}, {n_layers} layers", disable=not progress, leave=False):
        ids, targets = reverse_batch(generator)
        loss = F.cross_entropy(model(ids).flatten(0, 1), targets.flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def depth_figure(gradients: dict[str, np.ndarray], losses: dict[str, list[float]] | None = None,
                 fig: Figure | None = None) -> Figure:
    """(a) gradient norm by layer for each layout; (b) training losses, when given."""
    fig = fig if fig is not None else Figure(figsize=(FIGURE_WIDTH, 6.4 if losses else 3.3), layout="constrained")
    axes = np.atleast_1d(fig.subplots(2 if losses else 1, 1))
    for label, norms in gradients.items():
        axes[0].plot(np.arange(len(norms)), norms, "o-", ms=3, label=label)
    axes[0].set_xlabel("layer l (0 = first, next to the embedding)")
    axes[0].set_ylabel("‖∂loss/∂x_l‖")
    axes[0].set_ylim(bottom=0)
    axes[0].set_title("(a) gradient reaching each layer's input, at initialisation", fontsize=10)
    axes[0].legend(fontsize=9)
    axes[0].grid(alpha=0.3)
    if losses:
        for label, history in losses.items():
            axes[1].plot(history, label=label)
        axes[1].axhline(np.log(16), color="grey", ls=":", lw=1, label="ln 16: uniform guess")
        axes[1].set_xlabel("step")
        axes[1].set_ylabel("training loss")
        axes[1].set_title("(b) training, same seed and learning rate, no warmup", fontsize=10)
        axes[1].legend(fontsize=9)
        axes[1].grid(alpha=0.3)
    return fig


def depth_explorer(fn: BlockFn | None = None) -> LiveWidget:
    """Depth and width as controls; gradient norms by layer for Post- and Pre-Norm.

    ``fn(d_model, n_heads, d_ff, norm_first)`` may build your own block (None: tfm_ref's).
    """
    depth = widgets.IntSlider(value=24, min=2, max=48, description="layers")
    width = widgets.Dropdown(options=[32, 64, 128], value=64, description="d_model")

    def draw() -> Figure:
        return depth_panel(depth.value, width.value, fn)

    return live_widget([[depth, width]], draw, DEPTH_TITLE,
                       StaticRecipe.of(static_depth_explorer) if fn is None else None)


def depth_panel(n_layers: int, d_model: int, block_fn: BlockFn | None = None) -> Figure:
    """`depth_figure` of the gradient norms of a Post-Norm and a Pre-Norm stack from the same seed."""
    return depth_figure({label: gradient_norms_by_depth(n_layers, d_model, norm_first, block_fn=block_fn)
                         for label, norm_first in (("Post-Norm", False), ("Pre-Norm", True))})


def static_depth_explorer() -> StaticWidget:
    """The depth explorer on the book's pages: four depths, three widths."""
    return StaticWidget(
        DEPTH_TITLE,
        controls=(Control("n_layers", "layers", (6, 12, 24, 48), 24), Control("d_model", "d_model", (32, 64, 128), 64)),
        panels=(Panel(depth_panel, ("n_layers", "d_model"),
                      alt="gradient norm reaching each layer's input, Post-Norm and Pre-Norm"),))
