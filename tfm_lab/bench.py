"""Chapter 9 in numbers — tfm_ref against ``torch.nn.Transformer``, same configuration, same run.

    python -m tfm_lab.bench                      # base model (d 512, 8 heads, 6+6 layers), GPU if any
    python -m tfm_lab.bench --device cpu         # the same widths, at a batch and lengths for a CPU
    python -m tfm_lab.bench --tiny --device cpu  # seconds, for CI
    python -m tfm_lab.bench --compile-mode max-autotune   # both models in another torch.compile mode

Measures, for both models, training tokens per second (eager and ``torch.compile``d), peak memory and on a
GPU the model FLOPs utilisation; then the attention kernels alone, eager against SDPA, over sequence lengths.
Sizes shrink to the device's free memory. The last stdout line is JSON (``tokens_per_s``,
``torch_tokens_per_s``, ``ratio_vs_torch``). What each row compares, and why: tfm_lab/README.md.

Shapes: B batch · S source positions · T target positions · D model width · V vocabulary.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time
from collections.abc import Collection
from dataclasses import dataclass, replace
from pathlib import Path

import torch
from torch import nn
from tqdm.auto import tqdm

from tfm_ref.attention import scaled_dot_product_attention, sdpa_attention
from tfm_ref.config import TransformerConfig
from tfm_ref.positional import sinusoidal_positional_encoding
from tfm_ref.transformer import Transformer

from .cli import OneLineParser, SettingsError, check_writable_folder, pick_device
from .train import (COMPILE_MODES, autocast, autocast_dtype, check_compile_mode, stop_compile_workers, synchronize,
                    token_loss_sum)

__all__ = ["BenchConfig", "TorchTransformerLM", "training_flops", "peak_bf16_flops", "available_memory",
           "planning_memory", "training_memory", "attention_memory", "fit_to_memory", "bench_training",
           "profile_steps", "bench_attention", "run", "main", "PEAK_BF16", "DEVICE_SIZES", "MEMORY_FRACTION"]

# Dense (not sparse) bf16 tensor-core peaks in FLOP/s, from NVIDIA's data sheets (which print the
# sparse figure, twice these), for MFU. The first pattern that matches the device name wins, so
# each variant comes before the plainer name it contains; a name that matches none gets no MFU.
PEAK_BF16: tuple[tuple[str, str, float], ...] = (
    (r"\bH100\b.*\bPCIe\b", "H100 PCIe", 756.5e12),
    (r"\bH100\b.*\bNVL\b", "H100 NVL", 835.5e12),
    (r"\bH100\b.*\b(SXM|HBM3)", "H100 SXM", 989.4e12),  # "NVIDIA H100 80GB HBM3" is the SXM part
    (r"\bGH200\b", "GH200", 989.4e12),
    (r"\bH200\b.*\bNVL\b", "H200 NVL", 835.5e12),
    (r"\bH200\b", "H200 SXM", 989.4e12),
    (r"\bA100\b", "A100 (40 or 80 GB, SXM or PCIe)", 312e12),
    (r"\bL40S\b", "L40S", 362e12),
    (r"\bL40\b", "L40", 181e12),
    (r"\bL4\b", "L4", 121e12),
    (r"\bA10\b", "A10", 125e12),  # not the A10G, whose peak NVIDIA does not publish
)
MEMORY_FRACTION = 0.8  # of the free memory, for the estimates below (the rest: the process, other work)


@dataclass
class BenchConfig:
    """The benchmark's sizes (the defaults: the 2017 base model at a GPU's batch and lengths).

    Raises:
        SettingsError: a size that cannot work (it names the field and what it accepts).
    """

    d_model: int = 512
    n_heads: int = 8
    n_layers: int = 6  # encoder and decoder each
    d_ff: int = 2048
    vocab_size: int = 32000
    batch_size: int = 64
    seq_len: int = 256  # source and target length
    dropout: float = 0.1
    steps: int = 20  # timed steps
    warmup: int = 5  # untimed steps (and compilation)
    compile: bool = True
    compile_mode: str = "default"  # torch.compile's mode (COMPILE_MODES), the same for both models
    compare: bool = True  # also train nn.Transformer; False: tfm_ref alone, for its MFU without the other's compiling
    attn_lengths: tuple[int, ...] = (256, 512, 1024, 2048, 4096)
    attn_batch: int = 8
    peak_tflops: float | None = None  # the device's dense bf16 peak, for a GPU that PEAK_BF16 does not list

    def __post_init__(self) -> None:
        for name in ("d_model", "n_heads", "n_layers", "d_ff", "vocab_size", "batch_size", "seq_len", "steps",
                     "attn_batch"):
            if getattr(self, name) < 1:
                raise SettingsError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.warmup < 0:
            raise SettingsError(f"warmup must be 0 or more, got {self.warmup}")
        if self.d_model % self.n_heads:
            raise SettingsError(f"d_model {self.d_model} is not divisible by n_heads {self.n_heads}")
        if not 0.0 <= self.dropout < 1.0:
            raise SettingsError(f"dropout must lie in [0, 1), got {self.dropout}")
        if not self.attn_lengths or min(self.attn_lengths) < 1:
            raise SettingsError(f"attn_lengths must be positive lengths, got {list(self.attn_lengths)}")
        check_compile_mode(self.compile_mode)
        if self.peak_tflops is not None and self.peak_tflops <= 0:
            raise SettingsError(f"peak_tflops must be positive, got {self.peak_tflops}")


# What a device runs when the user does not say: the base model's batch and lengths on a GPU; on a
# CPU the same widths at a batch and lengths that take minutes, not hours.
DEVICE_SIZES = {"cuda": {}, "cpu": dict(batch_size=8, seq_len=64, attn_lengths=(256, 512, 1024, 2048), attn_batch=2)}
TINY = dict(d_model=64, n_heads=4, n_layers=1, d_ff=128, vocab_size=100, batch_size=4, seq_len=16, steps=3,
            warmup=1, compile=False, attn_lengths=(16, 32), attn_batch=2)


class TorchTransformerLM(nn.Module):
    """``nn.Transformer`` with the same embeddings, positions and output head as `tfm_ref.Transformer`."""

    def __init__(self, cfg: BenchConfig, max_len: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        nn.init.normal_(self.embed.weight, std=cfg.d_model**-0.5)
        self.register_buffer("pe", sinusoidal_positional_encoding(max_len, cfg.d_model), persistent=False)
        self.dropout = nn.Dropout(cfg.dropout)
        self.core = nn.Transformer(cfg.d_model, cfg.n_heads, cfg.n_layers, cfg.n_layers, cfg.d_ff, cfg.dropout,
                                   batch_first=True)
        # nn.Transformer always ends both stacks with a LayerNorm; a Post-Norm model has none (the
        # last block already normalises), so drop them to compare the same computation.
        self.core.encoder.norm = None
        self.core.decoder.norm = None
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.lm_head.weight = self.embed.weight
        self.scale = math.sqrt(cfg.d_model)

    def _embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.embed(ids) * self.scale + self.pe[: ids.shape[1]])  # (B, T, D)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        causal = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1], device=tgt.device)  # float, -inf above
        hidden = self.core(self._embed(src), self._embed(tgt), tgt_mask=causal, tgt_is_causal=True)
        return self.lm_head(hidden)  # (B, T, V)


def _dtype(device: torch.device) -> torch.dtype | None:
    """On a GPU, the trainer's choice (bf16 where it has bf16 units); on a CPU float32 (None: no
    autocast), as the recorded CPU results and the widgets assume."""
    return autocast_dtype("auto", device) if device.type == "cuda" else None


def training_flops(cfg: BenchConfig) -> float:
    """FLOPs of one training step: 3 × the forward pass (the backward costs twice the forward).

    Forward: 2 FLOPs per multiply-add of every linear map on the tokens it reads, plus the
    attention products Q Kᵀ and A V (2 · 2 · positions² · D each, the causal one counted
    in full as the kernels that take a mask compute it), plus the output head.
    """
    b, n, d, f, v, layers = cfg.batch_size, cfg.seq_len, cfg.d_model, cfg.d_ff, cfg.vocab_size, cfg.n_layers
    encoder = layers * (2 * b * n * (4 * d * d + 2 * d * f) + 4 * b * n * n * d)
    decoder = layers * (2 * b * n * (8 * d * d + 2 * d * f) + 2 * 4 * b * n * n * d)  # self + cross attention
    head = 2 * b * n * d * v
    return 3.0 * (encoder + decoder + head)


def peak_bf16_flops(device_name: str) -> tuple[str, float] | None:
    """(the part `PEAK_BF16` takes ``device_name`` for, its dense bf16 FLOP/s), or None for a device it does not list."""
    return next(((part, peak) for pattern, part, peak in PEAK_BF16 if re.search(pattern, device_name)), None)


def available_memory(device: torch.device) -> int:
    """Bytes free for this process: the GPU's free memory, or on a CPU the system's available memory
    (within the container's limit, where a cgroup sets one)."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    meminfo = Path("/proc/meminfo")
    kib = re.search(r"MemAvailable:\s+(\d+) kB", meminfo.read_text()) if meminfo.exists() else None
    # MemAvailable counts the caches the kernel would give back; free pages alone undercount
    free = int(kib.group(1)) * 1024 if kib else os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    limit, used = Path("/sys/fs/cgroup/memory.max"), Path("/sys/fs/cgroup/memory.current")
    if limit.exists() and used.exists() and limit.read_text().strip() != "max":
        free = min(free, int(limit.read_text()) - int(used.read_text()))
    return free


def planning_memory(device: torch.device) -> int:
    """The bytes the benchmark plans its sizes for when not told: ``MEMORY_FRACTION`` of `available_memory`."""
    return int(MEMORY_FRACTION * available_memory(device))


def training_memory(cfg: BenchConfig, device_type: str = "cuda") -> int:
    """An upper estimate, in bytes, of one float32 training step of either model at ``cfg``.

    Weights, gradients and AdamW's two moments (16 bytes a parameter); the activations the backward
    pass keeps, per token and layer (the block's inputs, Q K V, attention output, the FFN's hidden
    layer before and after ReLU, dropout masks and outputs, the norms' inputs; the decoder has two
    attentions); the output head's logits with their log-softmax and gradients. Fused attention
    keeps no B·H·T² weights, except on a CPU with dropout, where PyTorch falls back to the unfused
    path: then each of the 3 attentions per layer keeps about 7 copies of them, as `attention_memory`
    counts. `tests/test_bench.py` checks it against measured steps.
    """
    b, n, d, f, v, layers = cfg.batch_size, cfg.seq_len, cfg.d_model, cfg.d_ff, cfg.vocab_size, cfg.n_layers
    parameters = v * d + layers * (4 * d * d + 2 * d * f) + layers * (8 * d * d + 2 * d * f)
    per_token = layers * (16 * d + 4 * f) + layers * (24 * d + 4 * f) + 16 * d  # encoder, decoder, embeddings
    unfused = device_type == "cpu" and cfg.dropout > 0
    scores = 3 * layers * 7 * b * cfg.n_heads * n * n if unfused else 0
    return 4 * (4 * parameters + b * n * per_token + 4 * b * n * v + scores)


def attention_memory(cfg: BenchConfig, seq_len: int, path: str) -> int:
    """An upper estimate, in bytes, of one float32 forward + backward of attention at ``seq_len``.

    Q, K, V, their gradients and the output (8 tensors B·H·T·Dh with temporaries), and for the
    eager path the B·H·T² scores it keeps: scores, weights and their gradients, about 7 copies.
    """
    b, h, head_dim = cfg.attn_batch, cfg.n_heads, cfg.d_model // cfg.n_heads
    scores = 7 * b * h * seq_len * seq_len if path == "eager" else 0
    return 4 * (8 * b * h * seq_len * head_dim + scores)


def _gib(n_bytes: float) -> str:
    return f"{n_bytes / 2**30:.1f} GiB"


def fit_to_memory(cfg: BenchConfig, memory: int, device_type: str = "cuda",
                  chosen: Collection[str] = ()) -> tuple[BenchConfig, list[str]]:
    """``cfg`` with a batch whose `training_memory` on ``device_type`` fits ``memory`` bytes, and notes
    saying what changed. A batch the user did not choose is halved until it fits.

    Raises:
        SettingsError: it does not fit at batch 1, or at the batch the user chose (``"batch_size" in chosen``).
    """
    need = training_memory(cfg, device_type)
    if need <= memory:
        return cfg, []
    if "batch_size" in chosen:
        raise SettingsError(f"training at batch {cfg.batch_size} × length {cfg.seq_len} needs about {_gib(need)}, "
                            f"and {_gib(memory)} is free; choose a smaller --batch-size or --seq-len")
    batch = cfg.batch_size
    while batch > 1 and training_memory(replace(cfg, batch_size=batch), device_type) > memory:
        batch //= 2
    fitted = replace(cfg, batch_size=batch)
    if training_memory(fitted, device_type) > memory:
        raise SettingsError(f"training needs about {_gib(training_memory(fitted, device_type))} even at batch 1, and "
                            f"{_gib(memory)} is free; choose a smaller --seq-len, --vocab-size or --d-model")
    return fitted, [f"batch {cfg.batch_size} needs about {_gib(need)} and {_gib(memory)} is free: "
                    f"training at batch {batch} instead"]


def bench_training(model: nn.Module, forward, cfg: BenchConfig, device: torch.device, *, compile: bool,
                   compile_loss: bool = False, desc: str, profile: Path | None = None) -> dict:
    """Time ``cfg.steps`` training steps of ``model`` (``compile``: compiled; ``compile_loss``: its
    loss, the trainer's `token_loss_sum`, too) after ``cfg.warmup`` untimed ones; then, given a
    ``profile`` file, write `profile_steps` of a few more steps there."""
    model.to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)  # one kernel, on a CPU too
    run_model = torch.compile(model, mode=cfg.compile_mode) if compile else model
    loss_sum_of = torch.compile(token_loss_sum, mode=cfg.compile_mode) if compile_loss else token_loss_sum
    g = torch.Generator().manual_seed(0)
    src = torch.randint(3, cfg.vocab_size, (cfg.batch_size, cfg.seq_len), generator=g).to(device)
    tgt = torch.randint(3, cfg.vocab_size, (cfg.batch_size, cfg.seq_len + 1), generator=g).to(device)

    def step() -> torch.Tensor:
        with autocast(device, _dtype(device)):
            logits = forward(run_model, src, tgt[:, :-1])  # (B, T, V)
        loss = loss_sum_of(logits, tgt[:, 1:], 0.0) / logits.shape[0] / logits.shape[1]  # the mean token loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss

    for _ in tqdm(range(cfg.warmup), desc=f"{desc} warmup", leave=False):
        step()
    synchronize(device)
    if compile or compile_loss:
        stop_compile_workers()  # from a warm cache they would still be starting, on the clock
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    start = time.perf_counter()
    for _ in tqdm(range(cfg.steps), desc=desc, leave=False):
        loss = step()
    loss.item()
    synchronize(device)
    seconds = (time.perf_counter() - start) / cfg.steps
    result = {"step_ms": seconds * 1e3, "tokens_per_s": 2 * cfg.batch_size * cfg.seq_len / seconds,
              "tflops": training_flops(cfg) / seconds / 1e12}
    if device.type == "cuda":
        result["peak_memory_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
        peak = _peak_flops(cfg, device)
        result["mfu"] = None if peak is None else training_flops(cfg) / seconds / peak[1]
    if profile is not None:
        profile.write_text(f"{desc}, {cfg}\n{profile_steps(step, device)}\n")
    return result


def profile_steps(step, device: torch.device, steps: int = 3, rows: int = 30) -> str:
    """The operations ``steps`` calls of ``step`` run, the slowest first (on a GPU by their kernels'
    time on the device, else by CPU time), as torch.profiler's table of ``rows`` rows."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as profiler:
        for _ in range(steps):
            step()
        synchronize(device)
    key = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"
    return profiler.key_averages().table(sort_by=key, row_limit=rows)


def _peak_flops(cfg: BenchConfig, device: torch.device) -> tuple[str, float] | None:
    """(where the figure comes from, the dense bf16 peak in FLOP/s) of ``device``, or None."""
    if cfg.peak_tflops is not None:
        return "--peak-tflops", cfg.peak_tflops * 1e12
    known = peak_bf16_flops(torch.cuda.get_device_name(device))
    return None if known is None else (f"{known[0]} data sheet", known[1])


def bench_attention(cfg: BenchConfig, device: torch.device, repeats: int = 5, memory: int | None = None) -> list[dict]:
    """Eager attention against SDPA (no mask, as in the encoder): forward + backward time and peak memory.

    A path whose `attention_memory` at a length exceeds ``memory`` bytes (None: no limit) is not
    run there: its time is None and ``{path}_skipped`` says why, as does a line on stderr.
    """
    dtype = _dtype(device) or torch.float32
    head_dim = cfg.d_model // cfg.n_heads
    rows = []
    for n in tqdm(cfg.attn_lengths, desc="attention", leave=False):
        row = {"seq_len": n}
        for name, attend in (("eager", scaled_dot_product_attention), ("sdpa", sdpa_attention)):
            need = attention_memory(cfg, n, name)
            if memory is not None and need > memory:
                row[f"{name}_ms"] = None
                row[f"{name}_skipped"] = f"needs about {_gib(need)}, {_gib(memory)} is free"
                tqdm.write(f"attention: {name} at length {n} skipped: {row[f'{name}_skipped']}", file=sys.stderr)
                continue
            shape = (cfg.attn_batch, cfg.n_heads, n, head_dim)  # (B, H, T, Dh)
            q, k, v = (torch.randn(shape, device=device, dtype=dtype, requires_grad=True) for _ in range(3))
            try:
                attend(q, k, v).sum().backward()  # warm-up (kernel selection, allocator)
                synchronize(device)
                if device.type == "cuda":
                    torch.cuda.reset_peak_memory_stats(device)
                    base = torch.cuda.memory_allocated(device)
                start = time.perf_counter()
                for _ in range(repeats):
                    attend(q, k, v).sum().backward()
                synchronize(device)
                row[f"{name}_ms"] = (time.perf_counter() - start) / repeats * 1e3
                if device.type == "cuda":
                    row[f"{name}_memory_mib"] = (torch.cuda.max_memory_allocated(device) - base) / 2**20
            except torch.OutOfMemoryError:
                row[f"{name}_ms"] = None  # the eager path materialises B·H·T² scores and can run out
            del q, k, v
            if device.type == "cuda":
                torch.cuda.empty_cache()
        rows.append(row)
    return rows


def run(cfg: BenchConfig, device: torch.device, memory: int | None = None, profile: Path | None = None) -> dict:
    """Every measurement; returns the results (the CLI prints them).

    memory: bytes the attention sweep may use (see `bench_attention`); None: `planning_memory`.
    profile: a file for `profile_steps` of tfm_ref's steps (compiled, when compiling).
    """
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    memory = planning_memory(device) if memory is None else memory
    model_config = TransformerConfig(cfg.vocab_size, cfg.d_model, cfg.n_heads, None, cfg.n_layers, cfg.n_layers,
                                     cfg.d_ff, cfg.dropout, max_len=cfg.seq_len + 1)
    ours = lambda m, src, tgt: m(src, tgt)  # noqa: E731
    results: dict = {"config": {k: getattr(cfg, k) for k in cfg.__dataclass_fields__}, "training": {}}
    results["config"]["attn_lengths"] = list(cfg.attn_lengths)
    tfm_ref_model = lambda: Transformer(model_config)  # noqa: E731
    torch_model = lambda: TorchTransformerLM(cfg, cfg.seq_len + 1)  # noqa: E731
    # (row, model, compiled, loss compiled): each model's own way, then nn.Transformer with tfm_ref's loss
    rows = [("tfm_ref_eager", tfm_ref_model, False, False), ("torch_eager", torch_model, False, False)]
    if cfg.compile:
        rows += [("tfm_ref_compiled", tfm_ref_model, True, True), ("torch_compiled", torch_model, True, False),
                 ("torch_compiled+loss", torch_model, True, True)]
    if not cfg.compare:
        rows = [row for row in rows if row[0].startswith("tfm_ref")]
    best = "compiled" if cfg.compile else "eager"
    for row, make_model, compile, compile_loss in rows:
        torch.manual_seed(0)
        results["training"][row] = bench_training(make_model(), ours, cfg, device, compile=compile,
                                                  compile_loss=compile_loss, desc=row,
                                                  profile=profile if row == f"tfm_ref_{best}" else None)
    results["attention"] = bench_attention(cfg, device, memory=memory)
    ref, base = results["training"][f"tfm_ref_{best}"], results["training"].get(f"torch_{best}", {})
    peak = _peak_flops(cfg, device) if device.type == "cuda" else None
    results["summary"] = {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "mode": best, "tokens_per_s": ref["tokens_per_s"], "torch_tokens_per_s": base.get("tokens_per_s"),
        "ratio_vs_torch": ref["tokens_per_s"] / base["tokens_per_s"] if base else None, "mfu": ref.get("mfu"),
        "torch_mfu": base.get("mfu"), "peak_tflops": None if peak is None else peak[1] / 1e12,
        "peak_source": None if peak is None else peak[0],
    }
    if cfg.compile and cfg.compare:
        same_loss = results["training"]["torch_compiled+loss"]["tokens_per_s"]
        results["summary"].update(torch_compiled_loss_tokens_per_s=same_loss,
                                  ratio_vs_torch_compiled_loss=ref["tokens_per_s"] / same_loss)
    return results


def _parser() -> OneLineParser:
    p = OneLineParser(prog="python -m tfm_lab.bench", description=__doc__.split("\n\n")[0])
    defaults = BenchConfig()
    for name in ("d_model", "n_heads", "n_layers", "d_ff", "vocab_size", "batch_size", "seq_len", "steps", "warmup",
                 "attn_batch"):
        cpu = DEVICE_SIZES["cpu"].get(name)
        p.add_argument("--" + name.replace("_", "-"), type=int, default=None,
                       help=f"default {getattr(defaults, name)}" + ("" if cpu is None else f" on a GPU, {cpu} on a CPU"))
    p.add_argument("--dropout", type=float, default=None)
    p.add_argument("--attn-lengths", type=_lengths, default=None,
                   help="comma-separated sequence lengths for the attention comparison")
    p.add_argument("--peak-tflops", type=float, default=None,
                   help="the GPU's dense bf16 peak in TFLOP/s, for MFU on a GPU that PEAK_BF16 does not list")
    # argparse formats help with %: the second % escapes the one that .0% writes
    p.add_argument("--memory-gib", type=float, default=None,
                   help=f"memory to plan the sizes for (default: {MEMORY_FRACTION:.0%}% of what the device has free)")
    p.add_argument("--no-compile", action="store_true", help="skip the torch.compile measurements")
    p.add_argument("--only-tfm-ref", action="store_true",
                   help="train tfm_ref alone: its MFU without compiling nn.Transformer too (no ratio then)")
    p.add_argument("--compile-mode", choices=COMPILE_MODES, default=None,
                   help="torch.compile's mode for both models (default: default)")
    p.add_argument("--tiny", action="store_true", help="a tiny configuration that runs in seconds (CI)")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    p.add_argument("--out", help="also write the full results here (JSON)")
    p.add_argument("--profile", help="also write where tfm_ref's training step spends its time here (a table)")
    return p


def _lengths(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers such as 256,512,1024, got {text!r}") from None


def main(argv: list[str] | None = None) -> dict:
    """The CLI: measure, print a table, then the summary as the last line of stdout (JSON).

    Bad settings print one line, ``python -m tfm_lab.bench: error: …``, and exit with status 2.
    """
    parser = _parser()
    args = parser.parse_args(argv)
    chosen = {k: v for k, v in vars(args).items() if k in BenchConfig.__dataclass_fields__ and v is not None}
    try:
        device = pick_device(args.device)
        options = {**(TINY if args.tiny else DEVICE_SIZES[device.type]), **chosen}
        if args.no_compile:
            options["compile"] = False
        if args.only_tfm_ref:
            options["compare"] = False
        cfg = BenchConfig(**options)
        if args.memory_gib is not None and args.memory_gib <= 0:
            raise SettingsError(f"--memory-gib must be positive, got {args.memory_gib}")
        memory = int(args.memory_gib * 2**30) if args.memory_gib else planning_memory(device)
        for option, example in (("out", "bench.json"), ("profile", "profile.txt")):
            path = getattr(args, option)
            if path and Path(path).is_dir():
                raise SettingsError(f"--{option} {path} is a folder; give a file name, e.g. {Path(path) / example}")
            if path:
                check_writable_folder(Path(path).absolute().parent)
        cfg, notes = fit_to_memory(cfg, memory, device.type, chosen)
    except SettingsError as error:
        parser.error(str(error))
    for note in notes:
        print(note, file=sys.stderr)
    results = run(cfg, device, memory, Path(args.profile) if args.profile else None)
    if results["summary"]["device"] != "cpu" and results["summary"]["peak_tflops"] is None:
        print(f"no MFU: the bf16 peak of {results['summary']['device']} is not in tfm_lab.bench.PEAK_BF16; "
              f"give it with --peak-tflops", file=sys.stderr)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)
    for label, row in results["training"].items():
        print(f"{label:>19}: {row['tokens_per_s']:>12,.0f} tokens/s  {row['step_ms']:8.2f} ms/step"
              + (f"  MFU {row['mfu']:.1%}" if row.get("mfu") is not None else ""))
    print(json.dumps(results["summary"]), flush=True)
    return results


if __name__ == "__main__":
    main()
