"""Chapter 9 widget — time and memory of attention against sequence length: eager vs fused.

The eager path keeps the (T, S) scores, so its memory grows as n²; the fused kernel
(``F.scaled_dot_product_attention``) does not. `measure_attention` measures both on this machine, memory with
`PeakMemory` (which works on a CPU too: tfm_widgets/README.md). Plug in your own attention with
``attention_cost_explorer(fn=my_attention)``: ``fn(q, k, v) -> out`` is measured alongside. On the book's
pages, `static_attention_cost_explorer`: the recorded benchmark and the build machine's measurements.

Shapes: B batch · H heads · T = S = n positions · Dh head width.
"""
from __future__ import annotations

import json
import math
import time
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path

import ipywidgets as widgets
import numpy as np
import torch
from matplotlib.figure import Figure
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from tfm_ref.attention import scaled_dot_product_attention, sdpa_attention
from .controls import live_widget
from .display import FIGURE_WIDTH, LiveWidget
from .static import Control, Panel, StaticRecipe, StaticWidget

__all__ = ["PeakMemory", "measure_attention", "from_bench", "recorded_benchmarks", "cost_figure",
           "attention_cost_explorer", "static_attention_cost_explorer"]

AttentionFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
DEFAULT_FNS: dict[str, AttentionFn] = {"eager (tfm_ref)": scaled_dot_product_attention,
                                       "fused (F.scaled_dot_product_attention)": sdpa_attention}
TITLE = "Attention cost — eager vs fused, time and memory against n"
LONGEST = (256, 512, 1024, 2048)  # the explorer's choices of the longest n (measured from 64 up, doubling)
HEAD_DIMS = (32, 64, 128)


class PeakMemory(TorchDispatchMode):
    """Context manager: the peak bytes of tensors created (and not yet freed) inside it.

    Every operator's new output storage is counted when created and uncounted when freed; an
    output that shares its input's storage (a view, an in-place result) costs nothing.
    """

    def __init__(self) -> None:
        super().__init__()
        self.live = self.peak = 0
        self._counted: set[int] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = {t.untyped_storage().data_ptr() for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)}
        for tensor in tree_flatten(out)[0]:
            if not isinstance(tensor, torch.Tensor):
                continue
            storage = tensor.untyped_storage()
            pointer = storage.data_ptr()
            if pointer in inputs or pointer in self._counted:
                continue
            self._counted.add(pointer)
            self.live += storage.nbytes()
            self.peak = max(self.peak, self.live)
            weakref.finalize(storage, self._free, storage.nbytes(), pointer)
        return out

    def _free(self, nbytes: int, pointer: int) -> None:
        self.live -= nbytes
        self._counted.discard(pointer)


@torch.no_grad()
def measure_attention(seq_lens: Sequence[int], fns: dict[str, AttentionFn] | None = None, *, n_heads: int = 4,
                      head_dim: int = 64, batch: int = 1, repeats: int = 3, seed: int = 0) -> dict:
    """Median wall time and peak extra memory of each attention function at each length n.

    Returns:
        {"device": "cpu", "shape": …, "head_dim": head_dim, "seq_len": [...],
         "results": {name: {"ms": [...], "peak_mib": [...]}}}
    Raises:
        ValueError: an empty or non-positive list of lengths, or repeats < 1.
    """
    if not seq_lens or min(seq_lens) <= 0 or repeats < 1:
        raise ValueError(f"need positive sequence lengths and repeats ≥ 1, got {list(seq_lens)} and {repeats}")
    fns = fns or DEFAULT_FNS
    generator = torch.Generator().manual_seed(seed)
    results = {name: {"ms": [], "peak_mib": []} for name in fns}
    for n in seq_lens:
        q, k, v = (torch.randn(batch, n_heads, n, head_dim, generator=generator) for _ in range(3))  # (B, H, n, Dh)
        for name, fn in fns.items():
            with PeakMemory() as memory:
                fn(q, k, v)
            times = []
            for _ in range(repeats):
                start = time.perf_counter()
                fn(q, k, v)
                times.append((time.perf_counter() - start) * 1e3)
            results[name]["ms"].append(float(np.median(times)))
            results[name]["peak_mib"].append(memory.peak / 2**20)
    return {"device": "cpu", "shape": f"B={batch}, H={n_heads}, Dh={head_dim}, fp32", "head_dim": head_dim,
            "seq_len": list(seq_lens), "results": results}


def from_bench(results: dict) -> dict:
    """The attention part of a ``python -m tfm_lab.bench --out`` file, in `measure_attention`'s format.

    Missing measurements (the eager path out of memory) become NaN, which the plots leave out.

    Raises:
        ValueError: the results hold no attention measurements.
    """
    rows, config = results.get("attention"), results.get("config", {})
    if not rows:
        raise ValueError("these benchmark results have no 'attention' rows")
    value = lambda row, key: math.nan if row.get(key) is None else float(row[key])  # noqa: E731
    names = {"eager": "eager (tfm_ref)", "sdpa": "fused (F.scaled_dot_product_attention)"}
    device = results.get("summary", {}).get("device", "recorded")
    heads, width = config.get("n_heads"), config.get("d_model", 0) // max(config.get("n_heads") or 1, 1)
    dtype = "fp32" if device == "cpu" else "bf16"  # what `tfm_lab.bench` runs on each device
    return {"device": device, "shape": f"B={config.get('attn_batch')}, H={heads}, Dh={width}, {dtype}, forward + backward",
            "head_dim": width or None, "seq_len": [row["seq_len"] for row in rows],
            "results": {label: {"ms": [value(row, f"{key}_ms") for row in rows],
                                "peak_mib": [value(row, f"{key}_memory_mib") for row in rows]}
                        for key, label in names.items()}}


def recorded_benchmarks(folder: str | Path) -> dict[str, dict]:
    """Every benchmark JSON in ``folder`` that holds attention measurements: file name → `from_bench` data."""
    found = {}
    for path in sorted(Path(folder).glob("*.json")):
        try:
            found[path.name] = from_bench(json.loads(path.read_text()))
        except (ValueError, AttributeError, KeyError, TypeError):  # other result files (training histories)
            continue
    return found


def cost_figure(data: dict, title: str = "", fig: Figure | None = None) -> Figure:
    """Log-log time and memory against n for every function in ``data`` (see `measure_attention`)."""
    fig = fig if fig is not None else Figure(figsize=(FIGURE_WIDTH, 4.0), layout="constrained")
    time_ax, memory_ax = fig.subplots(1, 2)
    n = np.array(data["seq_len"], dtype=float)
    for name, result in data["results"].items():
        time_ax.plot(n, result["ms"], "o-", label=name)
        memory_ax.plot(n, result["peak_mib"], "o-", label=name)
    for ax, key, unit in ((time_ax, "ms", "time (ms)"), (memory_ax, "peak_mib", "peak extra memory (MiB)")):
        first = np.array(next(iter(data["results"].values()))[key], dtype=float)
        anchor = np.flatnonzero(np.isfinite(first) & (first > 0))
        if anchor.size:  # a slope-2 line through the first function's last finite point
            last = anchor[-1]
            ax.plot(n, first[last] * (n / n[last]) ** 2, ":", color="grey", label="∝ n² (reference)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length n")
        ax.set_ylabel(unit)
        ax.grid(alpha=0.3, which="both")
    time_ax.set_title("(a) time", fontsize=10)
    memory_ax.set_title("(b) peak memory of the\ntensors attention creates", fontsize=10)
    fig.legend(*time_ax.get_legend_handles_labels(), loc="outside lower center", ncols=2, fontsize=9)
    fig.suptitle(f"{title}\n{data['device']}, {data['shape']}" if title else f"{data['device']}, {data['shape']}",
                 fontsize=10)
    return fig


def attention_cost_explorer(fn: AttentionFn | None = None, data: dict | None = None) -> LiveWidget:
    """Lengths and head width as controls; measures on this machine (or shows ``data`` first).

    Args:
        fn: your attention ``fn(q, k, v) -> out``, measured next to eager and fused.
        data: recorded results (e.g. GPU benchmarks) in `measure_attention`'s format, shown
            until a control changes.
    """
    lengths, first = _longest_choices(data, max(LONGEST))
    longest = widgets.Dropdown(options=lengths, value=first, description="longest n")
    head_dim = widgets.Dropdown(options=HEAD_DIMS, value=64, description="head width")
    fns = dict(DEFAULT_FNS, **({"your fn": fn} if fn is not None else {}))
    recorded = {"data": data}

    def draw() -> Figure:
        if recorded["data"] is not None:
            return cost_figure(recorded["data"], "recorded benchmark")
        return cost_figure(measure_attention(_lengths(longest.value), fns, head_dim=head_dim.value),
                           "measured now, on this CPU")

    def measure_now(_change) -> None:
        recorded["data"] = None  # any change of a control measures on this machine

    for control in (longest, head_dim):
        control.observe(measure_now, names="value")
    return live_widget([[longest, head_dim]], draw, TITLE,
                       StaticRecipe.of(static_attention_cost_explorer, data=data) if fn is None else None)


def _longest_choices(data: dict | None, measurable: int) -> tuple[tuple[int, ...], int]:
    """The choices of "longest n", and the first: the lengths up to ``measurable`` that can be measured here, with
    those of the recorded ``data``, which is shown first, whole."""
    recorded = [] if data is None else [n for n in data["seq_len"] if n >= LONGEST[0]]
    lengths = tuple(sorted({n for n in LONGEST if n <= measurable} | set(recorded)))
    return lengths, max(recorded) if recorded else min(1024, measurable)


def _lengths(longest: int) -> list[int]:
    """The lengths the explorer measures: 64, 128, … up to ``longest``."""
    return [2**p for p in range(6, int(np.log2(longest)) + 1)]


def _crop(data: dict, longest: int) -> dict:
    """``data`` (see `measure_attention`) without the lengths beyond ``longest``."""
    keep = [i for i, n in enumerate(data["seq_len"]) if n <= longest]
    return dict(data, seq_len=[data["seq_len"][i] for i in keep],
                results={name: {key: [values[i] for i in keep] for key, values in result.items()}
                         for name, result in data["results"].items()})


def static_attention_cost_explorer(data: dict | None = None, longest_measured: int = 1024) -> StaticWidget:
    """The explorer on the book's pages: the recorded ``data``, or measurements on the machine building the book.

    Each head width is measured once (when first drawn), up to ``longest_measured`` (one of the live
    explorer's choices, and the first shown); a shorter "longest n" shows the start of that measurement.
    Every control acts on the source chosen, or says why it cannot: "longest n" crops either one (it
    also offers the recorded lengths past ``longest_measured``, which the measurement did not reach: it
    says so), and the recorded benchmark ran at one head width.
    """
    recorded, measured = "recorded benchmark", "measured on the build machine"
    sources = (recorded, measured) if data is not None else (measured,)
    lengths, first = _longest_choices(data, longest_measured)
    recorded_width = None if data is None else data.get("head_dim")
    measurements: dict[int, dict] = {}

    def draw(source: str, longest: int, head_dim: int) -> Figure:
        if source == recorded:
            if recorded_width is not None and head_dim != recorded_width:
                raise ValueError(f"The recorded benchmark ran at head width {recorded_width} only.\n"
                                 "Choose the data measured on the build machine to compare head widths.")
            return cost_figure(_crop(data, longest), "recorded benchmark")
        if longest > longest_measured:  # a recorded length
            raise ValueError(f"The build machine measured up to n = {longest_measured} only.\n"
                             "Choose the recorded benchmark for longer sequences.")
        if head_dim not in measurements:
            measurements[head_dim] = measure_attention(_lengths(longest_measured), head_dim=head_dim)
        return cost_figure(_crop(measurements[head_dim], longest), "measured while the book was built (CPU)")

    def same_figure(source: str, longest: int, head_dim: int) -> tuple:
        if source == recorded:  # one figure per length, and one message for the head widths it did not run
            return source, longest, recorded_width is None or head_dim == recorded_width
        return (source, longest, head_dim) if longest <= longest_measured else (source, "unmeasured")

    return StaticWidget(
        TITLE,
        controls=(Control("source", "data", sources, sources[0]),
                  Control("longest", "longest n", lengths, first),
                  Control("head_dim", "head width", HEAD_DIMS, recorded_width if recorded_width in HEAD_DIMS else 64)),
        panels=(Panel(draw, ("source", "longest", "head_dim"), key=same_figure,
                      alt="time and peak memory against sequence length, eager and fused attention, log-log"),))
